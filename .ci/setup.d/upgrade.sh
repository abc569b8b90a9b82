# Sourced by .ci/run: the broker's own upgrade and rollback (issue 28, tests/upgrade/): the
# previous release (CHANGELOG.md's newest, checked out of git history) upgraded on PostgreSQL
# while its worker runs, and rolled back. Its Celery workers are separate processes that mostly
# start and wait: a lane of its own beside the main run (about 2 minutes), its Redis db 8.
export GPUBROKER_CI_REQUIRE_EXTRA="${GPUBROKER_CI_REQUIRE_EXTRA:+$GPUBROKER_CI_REQUIRE_EXTRA,}upgrade"
upgrade_lane() {
  make test PYTEST_ARGS="-m upgrade -p no:cacheprovider --junitxml=test-artifacts/junit-upgrade.xml"
}
test_lane upgrade upgrade_lane
