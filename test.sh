#!/usr/bin/env bash
# Sets up the project (idempotent) and runs the whole test suite (engine tests included).
#   bash test.sh -m "not engine"     # only the fast, pure-logic tests
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
set +e
python -m pytest "$@"
code=$?
# pytest exits 5 when it collected no test: that is a failure here, never a silent pass.
if [ "$code" -eq 5 ]; then echo "test.sh: no tests were collected" >&2; fi
exit "$code"
