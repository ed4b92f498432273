"""`report` over a damaged run folder names the file and the fix, not pyarrow's traceback."""
from __future__ import annotations

import pytest

from runner.report.__main__ import main
from runner.sinks.parquet import table_path
from tests.support.results import Sweep


def _folder(tmp_path):
    s = Sweep()
    s.engine("off")
    for r in range(3):
        s.trial("off", repeat=r, tok_s=100.0)
    return s.write(tmp_path / "run")


@pytest.mark.parametrize("table, damage", [("trials", "cut"), ("requests", "cut"), ("requests", "text")])
def test_a_damaged_table_is_named_with_its_fix(tmp_path, capsys, table, damage):
    run_dir = _folder(tmp_path)
    path = table_path(run_dir, table)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "cut" else b"ts,ttft\n1,2\n")
    assert main([str(run_dir), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{path} is cut short or not Parquet" in err and "Fix: copy it again" in err
    assert f"mv {path} {path}.damaged" in err and "Traceback" not in err
