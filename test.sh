#!/usr/bin/env bash
# Sets up the project (idempotent) and runs the whole test suite (engine tests included).
#   bash test.sh -m "not engine"     # only the fast, pure-logic tests
set -euo pipefail
cd "$(dirname "$0")"
# The report.html test renders the page in headless Chromium: Debian's package, installed once where we may, beside
# the Python set-up (both mostly wait on downloads). No recommends: they bring systemd, perl and printing (131
# packages against 25); the fonts the page needs are named. The package lists are refreshed only when they do
# not know chromium yet, or when the install from them fails.
chromium_job=""
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test.sh: installing chromium (the report.html test; first run only)"
  install_chromium() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core \
      >/dev/null 2>&1
  }
  known() { apt-cache policy chromium 2>/dev/null | grep -q 'Candidate: [0-9]'; }
  { { known && install_chromium; } || { apt-get update -qq && install_chromium; } ||
      echo "test.sh: chromium did not install; tests/cli/test_report_html.py will fail" >&2; } &
  chromium_job=$!
fi
source scripts/setup.sh
if [ -n "$chromium_job" ]; then wait "$chromium_job" || true; fi
set +e
python -m pytest "$@"
code=$?
# pytest exits 5 when it collected no test: that is a failure here, never a silent pass.
if [ "$code" -eq 5 ]; then echo "test.sh: no tests were collected" >&2; fi
exit "$code"
