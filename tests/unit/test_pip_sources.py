"""scripts/pip_sources.py: pip's configured sources mapped to uv's arguments (what the set-up installs from)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pip_sources.py"
spec = importlib.util.spec_from_file_location("pip_sources", SCRIPT)
pip_sources = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pip_sources)

LISTING = """\
:env:.cert='/etc/ssl/certs/ca.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
global.cert='/etc/other.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'
global.find-links='/srv/elsewhere'
install.index-url='https://mirror.example/simple'
"""


def test_the_stronger_scope_wins_as_in_pip():
    settings = pip_sources.pip_settings(LISTING)
    assert settings["cert"] == "/etc/ssl/certs/ca.crt"  # PIP_CERT over the file's [global]
    assert settings["find-links"] == "/opt/wheels"
    assert settings["index-url"] == "https://mirror.example/simple"  # [install] is read by pip install


def test_every_source_becomes_a_uv_argument():
    args = pip_sources.uv_arguments(pip_sources.pip_settings(LISTING))
    pairs = list(zip(args[::2], args[1::2]))
    assert ("--index-strategy", "unsafe-best-match") in pairs  # pip takes the best match over all indexes
    assert ("--extra-index-url", "file:///opt/a/simple") in pairs and ("--extra-index-url", "file:///opt/b/simple") in pairs
    assert ("--find-links", "/opt/wheels") in pairs and ("--constraint", "/etc/xdg/pip/constraints.txt") in pairs
    assert ("--cert", "/etc/ssl/certs/ca.crt") in pairs and ("--index-url", "https://mirror.example/simple") in pairs
    assert pip_sources.uv_environment(pip_sources.pip_settings(LISTING)) == {"UV_HTTP_TIMEOUT": "180"}


def test_a_setting_that_chooses_packages_without_a_mapping_is_refused():
    with pytest.raises(ValueError, match="no-binary"):
        pip_sources.uv_arguments({"no-binary": ":all:"})
    assert pip_sources.uv_arguments({"no-index": "false", "quiet": "1"}) == ["--index-strategy", "unsafe-best-match"]


def test_other_sections_and_lines_are_ignored():
    assert pip_sources.pip_settings("download.dest='/x'\nnot a setting\nfreeze.all='1'\n") == {}
