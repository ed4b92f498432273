"""tests/cli: the command line (`python -m runner ...` dry runs and refusals, `python -m runner.report` on
hand-made Parquet) and other tests that need a process of their own; no engine starts here (those are in
tests/engine). Helpers: tests/support/cli.py. Every test collected here carries the `cli` marker (tests/conftest.py
marks it by folder), so `-m "not cli and not engine"` selects the pure tests alone. Dry runs and refusals go through
one interpreter kept while this folder's tests run (the fixture `warm_cli`); a command that must meet a fresh process (a cold
cache, signals, what it leaves running) runs in its own (run_cli)."""
from __future__ import annotations

import pytest

from tests.support.cli import WarmCli


@pytest.fixture(scope="package")
def warm_cli():
    """Dry runs and refusals through one interpreter kept while this folder's tests run (tests/support/cli.py's
    WarmCli); it ends with them."""
    cli = WarmCli()
    yield cli
    cli.close()
