"""The terminal's closing table (runner.summary) on hand-made Parquet: one row per point, its figures the median
[min–max] over the repeats, the workload parameters that vary, and the repeats that finished."""
from __future__ import annotations

from runner.summary import print_summary, spread
from tests.support.results import DECODE, Sweep, decode_study


def lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_one_row_per_point_with_median_and_range(tmp_path, capsys):
    print_summary(run_dir=decode_study().write(tmp_path))
    out = lines(capsys)
    header, rows = out[0], [line for line in out[1:] if line.startswith("  decode") or line.startswith("decode")]
    assert "repeats" in header.split() and "tok/s/session" in header
    assert len(rows) == 4 * 3  # arms × loads, the 3 repeats of each folded into one row
    assert len(set(rows)) == len(rows)
    off_c1 = next(r for r in rows if " off " in f" {r} " and r.split()[2] == "1")
    assert "100 [99–101]" in off_c1 and off_c1.split()[3] == "3"
    failed = [r for r in rows if "mtp:3" in r]
    assert len(failed) == 3 and all(r.split()[3] == "0/3" for r in failed)
    assert out[-1].startswith("failed (engine_failed): engine did not start")


def test_the_workload_parameters_that_vary_tell_points_apart(tmp_path, capsys):
    s = Sweep()
    s.engine("off")
    for input_len in (128, 1024):
        for r, v in enumerate((10.0, 12.0)):
            s.trial("off", params={**DECODE, "input_len": input_len}, repeat=r, tok_s=v + input_len / 1024)
    print_summary(run_dir=s.write(tmp_path))
    out = lines(capsys)
    assert "params" in out[0].split()
    rows = out[1:]
    assert len(rows) == 2 and "input_len=128" in rows[0] and "input_len=1024" in rows[1]
    assert "output_len" not in "".join(rows)  # the same at every point: not shown
    assert "11.1 [10.1–12.1]" in rows[0]  # input_len 128: 10.125 and 12.125


def test_spread_of_one_repeat_is_its_value():
    assert spread([2.0]) == "2" and spread([]) == "" and spread([1.0, 3.0, 2.0]) == "2 [1–3]"
