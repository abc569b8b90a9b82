# Sourced by .ci/run: build (cold: from the Go module proxy, cached per version under
# /var/cache/gpubroker/k8s) and start the Kubernetes control planes, then require the `k8s`
# tests (Kueue, Volcano and MultiKueue on real controllers, tests/broker/backends/kube/real).
# the object plumbing (scripts/k8s-cluster-objects) uses the project's venv (kubernetes client)
make install
k8s_t0=$SECONDS
# stopped again at exit only when this run is the one that starts them
if ! scripts/k8s-cluster status >/dev/null 2>&1; then
  at_exit scripts/k8s-cluster down
fi
timeout 2400 scripts/k8s-cluster up  # a cold build must fit in 40 minutes, a warm start in 5
echo "Kubernetes control planes up in $((SECONDS - k8s_t0))s:"
scripts/k8s-cluster versions
export K8S_TESTS=1
export GPUBROKER_CI_REQUIRE_EXTRA="${GPUBROKER_CI_REQUIRE_EXTRA:+$GPUBROKER_CI_REQUIRE_EXTRA,}k8s"
# the `k8s` tests (both sets of control planes) wait on controllers: a lane of their own,
# which then runs the `replay` tests
# Then Kueue as v0.20 ships it: the session stops serving kueue.x-k8s.io/v1beta1 on both
# clusters of both sets (tests/broker/backends/kube/real/api_versions.py), asserts the 404,
# runs the Kueue and MultiKueue tests again and serves v1beta1 again at its end.
KUEUE_V1BETA2_ONLY_TESTS="tests/broker/backends/kube/real/test_kueue_api_versions_real.py
  tests/broker/backends/kube/real/test_kueue_real.py tests/broker/backends/kube/real/test_multikueue_real.py
  tests/broker/backends/kube/real/test_broker_path_real.py tests/broker/backends/kube/real/test_bad_input_real.py
  tests/broker/backends/kube/real/test_local_limits_real.py
  tests/broker/backends/kube/mk_dispatcher tests/compat"
k8s_lane() {
  make test PYTEST_ARGS="-m k8s -p no:cacheprovider --junitxml=test-artifacts/junit-k8s.xml" || return
  local t0=$SECONDS
  K8S_KUEUE_V1BETA1=unserved make test PYTEST_ARGS="-m k8s -k 'not volcano' -p no:cacheprovider \
    --junitxml=test-artifacts/junit-k8s-kueue-v1beta2-only.xml $(echo $KUEUE_V1BETA2_ONLY_TESTS)" || return
  echo "Kueue and MultiKueue tests with kueue.x-k8s.io/v1beta1 unserved: $((SECONDS - t0))s"
  # then the replay's tests (CPU only): here, once the controllers' tests are done, rather
  # than in the main run, whose end would otherwise come as late as the Slurm lane's
  # (docs/ci.md); after the calibration slices, which time real starts. On SQLite, as
  # `manage.py replay_trace` runs by default and every committed replay figure was made: 459 s
  # there against 1,205 s on the lane's PostgreSQL (a4395fb); the main run keeps PostgreSQL's
  # own tests
  t0=$SECONDS
  DATABASE_URL="sqlite:///$PWD/test-artifacts/replay.sqlite3" \
    make test PYTEST_ARGS="-m replay -p no:cacheprovider --junitxml=test-artifacts/junit-replay.xml" || return
  echo "replay tests: $((SECONDS - t0))s"
}
test_lane "k8s or replay" k8s_lane  # .ci/run puts it in parentheses
