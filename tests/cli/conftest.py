"""tests/cli: the command line (`python -m runner ...` dry runs and refusals, `python -m runner.report` on
hand-made Parquet) and other tests that need a process of their own; no engine starts here (those are in
tests/engine). Helpers: tests/support/cli.py. Every test collected here carries the `cli` marker, so
`-m "not cli and not engine"` selects the pure tests alone."""
from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.cli)
