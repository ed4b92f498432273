"""pip's configured package sources as uv arguments, so that uv installs from exactly what pip would read.

    python3 scripts/pip_sources.py    # one item a line: NAME=VALUE variables for uv, then "--", then uv's arguments

Reads `pip config list` (pip's own merge of its config files and PIP_* variables, the later scope winning) and
maps the settings that choose packages: indexes, find-links, constraints, the certificate bundle, the timeout.
A setting that chooses packages and has no mapping here is an error (exit 2) naming it, so that set-up falls back
to pip instead of installing from other sources. Pure text in, arguments out: no import of pip's internals.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

# pip setting -> uv option; the value may list several, separated by whitespace (as pip reads them).
LISTED = {"extra-index-url": "--extra-index-url", "find-links": "--find-links", "constraint": "--constraint",
          "trusted-host": "--allow-insecure-host"}
SINGLE = {"index-url": "--index-url", "cert": "--cert"}
FLAGS = {"no-index": "--no-index", "pre": "--prerelease=allow"}
# Settings that do not choose packages (how pip talks, not what it installs): uv's defaults serve.
HARMLESS = {"disable-pip-version-check", "no-cache-dir", "cache-dir", "progress-bar", "quiet", "verbose",
            "no-input", "root-user-action", "retries", "no-color", "break-system-packages", "require-virtualenv",
            "timeout", "default-timeout", "user"}
# The scopes `pip install` reads, as `pip config list` prints them (its keys are "scope.name", sorted, each file
# already merged), weakest first: the files' [global], their [install], then PIP_* variables (":env:").
SCOPES = ("global", "install", ":env:")
LINE = re.compile(r"^(?P<scope>[^.]*)\.(?P<name>[^=]+)='(?P<value>.*)'$")


def pip_settings(listing: str) -> dict[str, str]:
    """`pip config list` -> {name: value}, the stronger scope winning as in pip."""
    found = [m for m in map(LINE.match, (line.strip() for line in listing.splitlines()))
             if m and m["scope"] in SCOPES]
    found.sort(key=lambda m: SCOPES.index(m["scope"]))
    return {m["name"]: m["value"] for m in found}


def truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def uv_arguments(settings: dict[str, str]) -> list[str]:
    """uv pip install's arguments for pip's settings; ValueError names a setting that has none."""
    args: list[str] = ["--index-strategy", "unsafe-best-match"]  # pip takes the best match over every index
    for name, value in settings.items():
        if name in LISTED:
            for item in value.split():
                args += [LISTED[name], item]
        elif name in SINGLE:
            args += [SINGLE[name], value]
        elif name in FLAGS:
            args += [FLAGS[name]] if truthy(value) else []
        elif name not in HARMLESS:
            raise ValueError(f"pip setting {name}={value!r} has no uv equivalent here")
    return args


def uv_environment(settings: dict[str, str]) -> dict[str, str]:
    """Variables for uv: pip's timeout (seconds) as uv's."""
    timeout = settings.get("default-timeout") or settings.get("timeout")
    return {"UV_HTTP_TIMEOUT": timeout} if timeout else {}


def main() -> int:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             check=True, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}).stdout
    settings = pip_settings(listing)
    try:
        args = uv_arguments(settings)
    except ValueError as err:
        print(f"pip_sources: {err}", file=sys.stderr)
        return 2
    env = [f"{k}={v}" for k, v in uv_environment(settings).items()]
    print("\n".join(env + ["--"] + args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
