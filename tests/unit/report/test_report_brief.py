"""The Answer in brief (runner.report.brief): load ranges merged, lines that read alike merged, every cell within
the limit; the arm × load matrix, the blocking caveats and labels without defaults (pure: hand-made Parquet). The
committed H200 results and report.html in a browser: tests/cli/test_report_html.py."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from runner.report.arms import without_defaults
from runner.report.brief import CELL_LIMIT, by_line, fit, lines_text, runs, where_text
from runner.report.build import analyse
from runner.report.load import load_results
from runner.report.matrix import CHOSEN, TIED, arm_load_matrices

from tests.support.results import Sweep


def _points(rows: list[tuple[dict, int]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(params, concurrency) rows as a point frame and the trials that give them their axes."""
    frame = pd.DataFrame({"workload": "decode", "concurrency": [c for _, c in rows],
                          "workload_params_json": [json.dumps(p, sort_keys=True) for p, _ in rows]})
    return frame, frame.copy()


def test_consecutive_load_points_with_the_same_label_merge():
    assert runs([(16, "a"), (1, "a"), (4, "a"), (64, "b"), (128, "a")]) == [("a", [1, 4, 16]), ("b", [64]),
                                                                              ("a", [128])]
    frame, trials = _points([({"ctx": 4}, c) for c in (1, 4, 16, 64)])
    assert lines_text(by_line(frame, ["mtp:2", "mtp:2", "mtp:2", "off"], trials)) == "mtp:2 c=1–16, off c=64"


def test_lines_that_read_alike_merge_and_the_others_are_named():
    rows = [({"ctx": ctx}, c) for ctx in (4096, 16384, 32768) for c in (1, 8)]
    frame, trials = _points(rows)
    alike = ["off", "off", "off", "off", "off", "off"]
    assert lines_text(by_line(frame, alike, trials)) == "off c=1–8"
    differ = ["off", "mtp:1", "off", "mtp:1", "off", "off"]
    assert lines_text(by_line(frame, differ, trials)) == "ctx=4096, 16384: off c=1, mtp:1 c=8 · ctx=32768: off c=1–8"
    assert where_text(frame, [label == "mtp:1" for label in differ], trials) == "ctx=4096, 16384: c=8"
    assert where_text(frame, [True] * 6, trials) == ""


def test_fit_takes_the_most_detailed_text_within_the_limit():
    long = "x" * (CELL_LIMIT + 1)
    assert fit(long, "short") == "short"
    assert fit("detailed", "short") == "detailed"
    cut = fit(long, long)
    assert len(cut) == CELL_LIMIT and cut.endswith("…")


def test_default_label_words_go_unsaid():
    assert without_defaults("mtp:3 sched=static accept=real") == "mtp:3"
    assert without_defaults("mtp:3 sched=1-3:2,4-256:1 accept=real") == "mtp:3 sched=1-3:2,4-256:1"


@pytest.fixture(scope="module")
def many_loads(tmp_path_factory):
    """Two context lengths × six loads, three arms: the choice changes along load and between the lines."""
    s = Sweep()
    for arm in ("off", "mtp:1", "mtp:2"):
        s.engine(arm)
    loads = (1, 2, 4, 8, 16, 32)
    for ctx in (1024, 8192):
        for i, c in enumerate(loads):
            speeds = {"off": 100.0, "mtp:1": 150.0 if i < 3 else 90.0,
                      "mtp:2": 200.0 if ctx == 1024 and i < 2 else 80.0}
            for arm, speed in speeds.items():
                for r in range(3):
                    s.trial(arm, params={"input_len": ctx, "output_len": 16}, concurrency=c, repeat=r,
                            tok_s=speed + r * 0.1)
    return analyse(load_results([s.write(tmp_path_factory.mktemp("loads") / "run")]))


def test_the_answer_merges_loads_and_stays_within_the_limit(many_loads):
    row = many_loads.answer.iloc[0]
    assert row.deploy.startswith("input_len=1024: mtp:2 c=1–2, mtp:1 c=4, off c=8–32 · "
                                 "input_len=8192: mtp:1 c=1–4, off c=8–32; one for all: ")
    assert all(len(str(v)) <= CELL_LIMIT for v in row.to_dict().values())
    assert "sched=" not in row.deploy and not many_loads.blocking  # real weights, 3 repeats: nothing blocks


def test_the_matrix_has_a_row_per_arm_and_a_column_per_load_with_the_choice_marked(many_loads):
    (title, first), (_, second) = arm_load_matrices(many_loads.points, many_loads.outcomes, many_loads.trials)
    assert title.startswith("decode: input_len=1024 — decode tok/s per session")
    assert list(first.columns) == ["arm", "c=1", "c=2", "c=4", "c=8", "c=16", "c=32"]
    assert list(first.arm) == ["off", "mtp:1", "mtp:2"]
    assert first.set_index("arm").loc["mtp:2", "c=1"] == f"**200.1** {CHOSEN}"
    assert first.set_index("arm").loc["off", "c=32"] == f"**100.1** {CHOSEN}"
    assert TIED not in "".join(first.to_numpy().ravel())


def test_too_few_repeats_and_dummy_weights_block_the_answer(tmp_path):
    import yaml

    s = Sweep()
    for arm in ("off", "mtp:2"):
        s.engine(arm)
    for arm, speed in (("off", 100.0), ("mtp:2", 150.0)):
        s.trial(arm, tok_s=speed)
    run = s.write(tmp_path / "one")
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"name": "m", "load_format": "dummy"}}))
    a = analyse(load_results([run]))
    assert [b.split("**")[1] for b in a.blocking] == ["Dummy weights", "Too few repeats"]
    assert "sweep.repeats=3" in a.blocking[1]


def test_an_open_loop_rate_is_the_load_axis(tmp_path):
    s = Sweep()
    for arm in ("off", "mtp:2"):
        s.engine(arm)
    for rate in (1.0, 2.0, 4.0):
        for arm, ttft in (("off", 0.2 if rate < 4 else 0.1), ("mtp:2", 0.1 if rate < 4 else 0.2)):
            for r in range(3):
                s.trial(arm, workload="shared_prefix", concurrency=8, repeat=r, ttft_s=ttft + r * 1e-4,
                        params={"prefix_len": 64, "suffix_len": 8, "output_len": 4, "request_rate": rate})
    a = analyse(load_results([s.write(tmp_path / "rates")]))
    assert a.answer.iloc[0].deploy == "mtp:2 request_rate=1.0–2.0, off request_rate=4.0; one for all: mtp:2"
    ((_, matrix),) = arm_load_matrices(a.points, a.outcomes, a.trials)
    assert list(matrix.columns) == ["arm", "request_rate=1.0", "request_rate=2.0", "request_rate=4.0"]
