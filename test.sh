#!/usr/bin/env bash
# Sets up the project (idempotent) and runs the whole test suite (engine tests included).
#   bash test.sh -m "not engine"     # only the fast, pure-logic tests
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
# The report.html test renders the page in headless Chromium: Debian's package, installed once where we may.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test.sh: installing chromium (the report.html test; first run only)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ||
    echo "test.sh: chromium did not install; tests/cli/test_report_html.py will fail" >&2
fi
set +e
python -m pytest "$@"
code=$?
# pytest exits 5 when it collected no test: that is a failure here, never a silent pass.
if [ "$code" -eq 5 ]; then echo "test.sh: no tests were collected" >&2; fi
exit "$code"
