"""tests/engine: real vLLM engines (CPU build) in Ray actors or through the CLI. Every test collected here carries
the `engine` marker (each module also says so), so `-m "not engine"` never selects one."""
from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.engine)
