# Sourced by .ci/run: bring up the single-host Slurm test cluster (Debian 12's Slurm 22.05,
# munge, slurmdbd on MariaDB, slurmctld, two slurmd, slurmrestd) and require its tests.
# The `slurm` tests run in a lane of their own beside the main run (they mostly wait on real
# jobs): on 22.05, then again on each of $SLURM_CI_OTHER_VERSIONS: 24.11.5, built from Debian's
# source archive, and 26.05.5, from Debian unstable's binary packages in a root of its own (its
# source is not served here: scripts/slurm-cluster-root), both cached in /var/cache/gpubroker;
# then 22.05 is brought back.
SLURM_CI_OTHER_VERSIONS=${SLURM_CI_OTHER_VERSIONS:-24.11.5 26.05.5}

# slurmrestd on every address, so that the compose stack's containers reach it (stack.sh);
# it still asks every client for a JWT
export SLURM_CI_REST_BIND=0.0.0.0
# stopped again at exit only when this run is the one that starts it
if ! scripts/slurm-cluster status >/dev/null 2>&1; then
  at_exit scripts/slurm-cluster down
fi
scripts/slurm-cluster up --version debian
echo "Slurm for the main run: $(sinfo --version), $(slurmctld -V)"
export SLURM_TESTS=1
export GPUBROKER_CI_REQUIRE_EXTRA="${GPUBROKER_CI_REQUIRE_EXTRA:+$GPUBROKER_CI_REQUIRE_EXTRA,}slurm"

slurm_lane() {
  local rc=0 build_pid v
  # cold: fetch, verify and build the other versions while the first one's tests run
  # (warm: the cached builds are found at once)
  (for v in $SLURM_CI_OTHER_VERSIONS; do scripts/slurm-cluster build --version "$v" || exit 1; done) \
    >test-artifacts/slurm-build.log 2>&1 &
  build_pid=$!
  make test PYTEST_ARGS="-m slurm -p no:cacheprovider --junitxml=test-artifacts/junit-slurm-22.05.xml" || rc=$?
  [ "$rc" -ne 5 ] || { echo "no slurm-marked test ran on Slurm 22.05" >&2; rc=1; }
  wait "$build_pid" || echo "building Slurm $SLURM_CI_OTHER_VERSIONS failed (test-artifacts/slurm-build.log)" >&2
  tail -n 4 test-artifacts/slurm-build.log
  for v in $SLURM_CI_OTHER_VERSIONS; do
    slurm_ci_other_version "$v" || { [ "$rc" -ne 0 ] || rc=1; }
  done
  # back to Debian's version, which the machine is expected to run (and the stack tests use)
  scripts/slurm-cluster down
  scripts/slurm-cluster up --version debian || rc=1
  echo "Slurm back to $(sinfo --version)"
  stack_tests || { [ "$rc" -ne 0 ] || rc=1; }
  return "$rc"
}

# the compose stack (stack.sh) against Debian's Slurm, once the version tests are done with
# the cluster: its smoke test, kills under load and a broker outage
stack_tests() {
  [ "${STACK_TESTS:-}" = 1 ] || return 0
  local t0=$SECONDS rc=0
  rm -f test-artifacts/stack-diagnostics.txt
  make test PYTEST_ARGS="-m stack -p no:cacheprovider --junitxml=test-artifacts/junit-stack.xml" || rc=$?
  [ "$rc" -ne 5 ] || { echo "no stack-marked test ran" >&2; rc=1; }
  echo "stack tests: rc=$rc in $((SECONDS - t0))s"
  # what the containers and their DNS looked like when a stack test failed (tests/ops/stack/conftest.py)
  [ "$rc" -eq 0 ] || tail -n 60 test-artifacts/stack-diagnostics.txt 2>/dev/null || true
  cat test-artifacts/stack-kills.json test-artifacts/stack-outage.json 2>/dev/null | grep -E '"(acknowledged|lost|in_database|duplicate_destination_jobs|slurm_jobs|mid_chunk|workers_restart_to_[a-z_]+|reconcile_lag_[a-z_]+)"' || true
  return "$rc"
}

slurm_ci_other_version() {
  local v=$1 t0 rc=0
  t0=$SECONDS
  scripts/slurm-cluster down || return 1
  # a start from the cache the lane's build filled (bounded, in case it is cold after all)
  if ! timeout 1200 scripts/slurm-cluster up --version "$v"; then
    echo "Slurm $v did not come up" >&2
    scripts/slurm-cluster down; scripts/slurm-cluster up --version debian
    return 1
  fi
  echo "Slurm $v up in $((SECONDS - t0))s: $(sinfo --version), $(slurmctld -V)"
  cat "/var/cache/gpubroker/slurm-$v/.built" 2>/dev/null || true
  # the simulator's calibration runs on one version (22.05, above): 2.5 minutes of real jobs;
  # scenario tests that wait on real time run on the oldest and the newest only (issue 28:
  # "calibration, topology, preemption may run on the oldest and newest Slurm only"): a job
  # past its time limit (84 s a version), preemption by a local job (21 s) and topology/tree's
  # profile (a restart into it and out again, a gang held for one leaf switch: 28 s), and the
  # shard profile's (a restart into it and out again, a job of shares run and charged: 18 s)
  local skip="--deselect tests/broker/backends/slurm/test_calibration_real.py" last=${SLURM_CI_OTHER_VERSIONS##* }
  if [ "$v" != "$last" ]; then
    # and the outage scenarios: the fault harness (tests/faults: slurmctld stopped, orphans
    # injected; 70 s a version) and the backend's two tests that stop slurmctld (45 s)
    skip+=" --deselect tests/faults"
    skip+=" --deselect tests/broker/backends/slurm/test_integration.py::test_controller_down_is_unavailable_then_recovers"
    skip+=" --deselect tests/broker/backends/slurm/test_broker_path.py::test_stopped_slurmctld_makes_the_cluster_stale_and_running_jobs_carry_on"
    skip+=" --deselect tests/broker/backends/slurm/test_outcome_real.py::test_a_job_past_its_time_limit_says_timeout_in_plain_words"
    skip+=" --deselect tests/compat/test_compat.py::test_a_higher_priority_local_job_preempts_the_brokers_job_which_is_queued_again_and_charged_once"
    skip+=" --deselect tests/broker/backends/slurm/test_topology_real.py"
    skip+=" --deselect tests/broker/backends/slurm/test_shards_real.py"
  fi
  make test PYTEST_ARGS="-m slurm -p no:cacheprovider --junitxml=test-artifacts/junit-slurm-$v.xml $skip" || rc=$?
  [ "$rc" -ne 5 ] || { echo "no slurm-marked test ran on Slurm $v" >&2; rc=1; }
  return "$rc"
}
# the lane's markers, which the main run leaves out: the stack tests run at the lane's end
test_lane "(slurm or stack)" slurm_lane
