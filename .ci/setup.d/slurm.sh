# Sourced by .ci/run: bring up the single-host Slurm test cluster (Debian 12's Slurm 22.05,
# munge, slurmdbd on MariaDB, slurmctld, two slurmd, slurmrestd) and require its tests.
# The main `make test` runs the Slurm suite on 22.05; an after_test stage then runs it again
# on Slurm $SLURM_CI_SECOND_VERSION (24.11.5, built from Debian's source archive and cached
# in /var/cache/gpubroker) and brings 22.05 back.
SLURM_CI_SECOND_VERSION=${SLURM_CI_SECOND_VERSION:-24.11.5}

# stopped again at exit only when this run is the one that starts it
if ! scripts/slurm-cluster status >/dev/null 2>&1; then
  at_exit scripts/slurm-cluster down
fi
scripts/slurm-cluster up --version debian
echo "Slurm for the main run: $(sinfo --version), $(slurmctld -V)"
export SLURM_TESTS=1
export GPUBROKER_CI_REQUIRE_EXTRA="${GPUBROKER_CI_REQUIRE_EXTRA:+$GPUBROKER_CI_REQUIRE_EXTRA,}slurm"

slurm_ci_second_version() {
  local v=$SLURM_CI_SECOND_VERSION t0 rc=0
  t0=$SECONDS
  scripts/slurm-cluster down || return 1
  # cold: fetch, verify and build (bounded at 15 min in CI); warm: a start from the cache
  if ! timeout 1200 scripts/slurm-cluster up --version "$v"; then
    echo "Slurm $v did not come up" >&2
    scripts/slurm-cluster down; scripts/slurm-cluster up --version debian
    return 1
  fi
  echo "Slurm $v up in $((SECONDS - t0))s: $(sinfo --version), $(slurmctld -V)"
  cat "/var/cache/gpubroker/slurm-$v/.built" 2>/dev/null || true
  make test PYTEST_ARGS="-m slurm -p no:cacheprovider --junitxml=test-artifacts/junit-slurm-$v.xml" || rc=$?
  [ "$rc" -ne 5 ] || { echo "no slurm-marked test ran on Slurm $v" >&2; rc=1; }
  # back to Debian's version, which the machine is expected to run
  scripts/slurm-cluster down
  scripts/slurm-cluster up --version debian || rc=1
  echo "Slurm back to $(sinfo --version)"
  return "$rc"
}
after_test slurm_ci_second_version
