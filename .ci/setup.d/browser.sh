# Sourced by .ci/run (set -euo pipefail): Debian's Chromium for the browser tests.
# Playwright drives /usr/bin/chromium; its own browser downloads are never used.
if [ ! -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium for the browser tests"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium
fi
/usr/bin/chromium --version 2>/dev/null || true
# With chromium here, a skipped browser test is a failure, not a quiet pass.
export GPUBROKER_CI_REQUIRE_EXTRA="${GPUBROKER_CI_REQUIRE_EXTRA:+$GPUBROKER_CI_REQUIRE_EXTRA,}browser"
