# Sourced by .ci/run: a second set of Kubernetes control planes for the broker as
# MultiKueue's external dispatcher (tests/broker/backends/kube/mk_dispatcher): a manager
# whose Kueue runs with multiKueue.dispatcherName=gpubroker.io/dispatcher and two workers
# (main, worker2), on their own ports and run directory, beside the shared set of k8s.sh
# (whose manager keeps Kueue's default dispatcher for the plain MultiKueue tests).
make install
mkd_t0=$SECONDS
export K8S_MKD_ENV=/run/k8s-mkd/env
MKD_ENV=(env K8S_CI_RUN=/run/k8s-mkd K8S_CI_PORT_BASE=16600 K8S_CI_WORKER2=1 K8S_CI_NO_VOLCANO=1
         K8S_CI_MK_DISPATCHER=gpubroker.io/dispatcher)
if ! "${MKD_ENV[@]}" scripts/k8s-cluster status >/dev/null 2>&1; then
  at_exit "K8S_CI_RUN=/run/k8s-mkd scripts/k8s-cluster down"
fi
# The first Kubernetes script to run builds every component (Volcano too, which this set
# does not start) in one build phase, so a cold run's Kubernetes build is one figure, bounded
# at 40 min; with warm caches this finds every .complete stamp and returns at once.
timeout 2400 scripts/k8s-cluster-build
echo "Kubernetes build phase (cold or cached) done in $((SECONDS - mkd_t0))s"
# builds are shared with k8s.sh (same cache); a warm start takes under a minute here
timeout 600 "${MKD_ENV[@]}" scripts/k8s-cluster up
echo "MultiKueue dispatcher control planes up in $((SECONDS - mkd_t0))s"
export K8S_TESTS=1
export GPUBROKER_CI_REQUIRE_EXTRA="${GPUBROKER_CI_REQUIRE_EXTRA:+$GPUBROKER_CI_REQUIRE_EXTRA,}k8s"
