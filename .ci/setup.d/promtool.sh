# Sourced by .ci/run (set -euo pipefail): Debian's prometheus package, for promtool, which
# checks and unit-tests the alert rules in ops/prometheus (tests/ops/test_alert_rules.py).
# Only the binary is used: no Prometheus server is started.
if ! command -v promtool >/dev/null 2>&1; then
  echo "installing Debian's prometheus package for promtool"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  # policy-rc.d: the package must not start a server on a CI machine (one already there stays)
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
  fi
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends prometheus
  if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi
promtool --version 2>&1 | head -1 || true
# With promtool here, a skipped rules test is a failure, not a quiet pass.
export GPUBROKER_CI_REQUIRE_EXTRA="${GPUBROKER_CI_REQUIRE_EXTRA:+$GPUBROKER_CI_REQUIRE_EXTRA,}promtool"
