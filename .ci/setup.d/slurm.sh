# Sourced by .ci/run: bring up the single-host Slurm test cluster (Debian's packages,
# munge, slurmdbd on MariaDB, slurmctld, two slurmd, slurmrestd) and require its tests.
scripts/slurm-cluster up
export SLURM_TESTS=1
export GPUBROKER_CI_REQUIRE_EXTRA="${GPUBROKER_CI_REQUIRE_EXTRA:+$GPUBROKER_CI_REQUIRE_EXTRA,}slurm"
