#!/usr/bin/env bash
# Sets up the project (idempotent) and runs a sweep: the demo by default.
#   bash run.sh                      # the default sweep on the embedded model (CPU)
#   bash run.sh sweep=draft_count    # any Hydra override
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
exec python -m runner "$@"
