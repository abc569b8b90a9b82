# Sourced by .ci/run (set -euo pipefail), after slurm.sh: the compose stack (issue 30).
# Installs podman, podman-compose, mmdebstrap, runc, netavark, aardvark-dns and iptables from Debian when missing, builds every image
# from Debian's archive (scripts/images: the base is tagged by the hash of its inputs and made
# only when they change; the others come from podman's layer cache when nothing changed), and
# requires the `stack` tests, which the Slurm lane runs at its end (docker-compose.yml brought
# up unchanged against the real Slurm cluster, then faults under load and a broker outage).
# netavark and aardvark-dns are only podman's Recommends: without them podman 4.3 falls back to
# CNI, whose networks resolve no container names (the stack never became healthy: "failed to
# resolve host 'db'", CI on a fresh machine, 2026-12-05). netavark 1.4 sets up each network's
# NAT with iptables, which it only Recommends: without it every container stays "Created"
# ("netavark: No such file or directory", a cold CI run on a fresh machine, 2026-12-06)
STACK_PACKAGES=(podman podman-compose mmdebstrap runc netavark aardvark-dns iptables)
missing=()
for pkg in "${STACK_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
fi
# podman's settings for this run only (the machine's own containers.conf is left alone):
# limits within this machine's hard ones (podman asks for 1048576 and the runtime's setrlimit
# fails without CAP_SYS_RESOURCE), and runc, which runs on a hybrid cgroup layout where
# crun 1.8 refuses to (docs/operations.md, "What the trial ... needed")
mkdir -p "$DEV_SERVICES_STATE"
nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
nproc=$(ulimit -Hu); { [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; } && nproc=32768
cat >"$DEV_SERVICES_STATE/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
[network]
network_backend = "netavark"
CONF
export CONTAINERS_CONF="$DEV_SERVICES_STATE/containers.conf"
mkdir -p test-artifacts
t0=$SECONDS
scripts/images >test-artifacts/images.log 2>&1 || { tail -n 30 test-artifacts/images.log; exit 1; }
echo "stack images ready in $((SECONDS - t0)) s: $(grep -c 'took' test-artifacts/images.log) steps (test-artifacts/images.log)"
export STACK_TESTS=1
# CI's sizes (docs/reliability.md has the larger run): 10 researchers for 45 s, a 45 s outage
export GPUBROKER_STACK_LOAD_S="${GPUBROKER_STACK_LOAD_S:-45}" GPUBROKER_STACK_OUTAGE_S="${GPUBROKER_STACK_OUTAGE_S:-45}"
export GPUBROKER_CI_REQUIRE_EXTRA="${GPUBROKER_CI_REQUIRE_EXTRA:+$GPUBROKER_CI_REQUIRE_EXTRA,}stack"
