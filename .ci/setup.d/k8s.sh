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
# the `k8s` tests (both sets of control planes) wait on controllers: a lane of their own
k8s_lane() {
  make test PYTEST_ARGS="-m k8s -p no:cacheprovider --junitxml=test-artifacts/junit-k8s.xml"
}
test_lane k8s k8s_lane
