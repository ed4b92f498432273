"""The terminal's closing table, read from the persisted trials: one row per point (engine arm × workload ×
the workload parameters that vary × load), each key figure the median [min–max] over the point's repeats."""
from __future__ import annotations

import json
import re
from pathlib import Path

# Figure column → its header; each is summarized over a point's repeats that finished.
FIGURES = {
    "ttft_p50_ms": "ttft p50 ms", "tpot_p50_ms": "tpot p50 ms",
    "decode_tok_s_per_session": "tok/s/session", "decode_tok_s_aggregate": "tok/s total",
    "spec_acceptance_rate": "accept", "spec_mean_acceptance_length": "accept len",
    "prefix_cache_hit_rate": "pc hit",
}
POINT = ["workload", "params", "engine", "concurrency"]
HEADERS = {"workload": "workload", "params": "params", "engine": "engine", "concurrency": "conc", "n": "repeats"}


def _number(value: float, digits: int = 3) -> str:
    """3 significant digits (more where a range would read as one value); thousands whole, not 3.01e+03."""
    if abs(value) >= 10 ** digits:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


def spread(values) -> str:
    """`median [min–max]` of the repeats (one repeat: its value; none: blank)."""
    import pandas as pd

    values = pd.Series(values, dtype="float64").dropna()
    if values.empty:
        return ""
    if len(values) == 1 or values.min() == values.max():
        return _number(values.iloc[0] if len(values) == 1 else values.median())
    digits = next((d for d in range(3, 7) if _number(values.min(), d) != _number(values.max(), d)), 6)
    return f"{_number(values.median(), digits)} [{_number(values.min(), digits)}–{_number(values.max(), digits)}]"


def varying_params(trials) -> dict[str, str]:
    """workload_params_json → the text of its parameters that differ between the workload's points
    (`input_len=128 output_len=64`; blank where the workload has one point)."""
    texts = {}
    for _, group in trials.groupby("workload"):
        points = {j: json.loads(j) for j in group.workload_params_json.unique()}
        keys = sorted({k for p in points.values() for k in p})
        varying = [k for k in keys if len({json.dumps(p.get(k), sort_keys=True) for p in points.values()}) > 1]
        for j, p in points.items():
            texts[j] = " ".join(f"{k}={_value(p.get(k))}" for k in varying)
    return texts


def _natural(text: str) -> list:
    """input_len=128 before input_len=1024."""
    return [(0, float(part), "") if part[:1].isdigit() else (1, 0.0, part)
            for part in re.split(r"(\d+(?:\.\d+)?)", text) if part]


def _value(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _engine_labels(trials) -> dict[str, str]:
    """engine_id → label: the spec arm and the settings in which the engines differ; an id's tail where two
    engines would read the same (another API, an argument the label leaves out)."""
    from runner.labels import labels_of_rows

    label_of = labels_of_rows(trials.to_dict("records"))
    shared = {label for label in label_of.values() if list(label_of.values()).count(label) > 1}
    return {e: f"{label} ({e[-6:]})" if label in shared else label for e, label in label_of.items()}


def summary_frame(trials):
    """One row per point: its key figures as `median [min–max]` over the repeats that finished, and `repeats`, the
    repeats that finished of those recorded (`2/3`: one did not)."""
    import pandas as pd

    from runner.schema import TrialStatus

    frame = trials.copy()
    frame["engine"] = frame.engine_id.map(_engine_labels(frame))
    frame["params"] = frame.workload_params_json.map(varying_params(frame))
    frame["ttft_p50_ms"] = frame.ttft_p50_s * 1000
    frame["tpot_p50_ms"] = frame.tpot_p50_s * 1000
    rows = []
    for key, point in frame.groupby(POINT + ["engine_id"], sort=True, dropna=False):
        ok = point[point.status == TrialStatus.OK]
        row = dict(zip(POINT, key[:len(POINT)]))
        row["n"] = str(len(ok)) if len(ok) == len(point) else f"{len(ok)}/{len(point)}"
        row.update({name: spread(ok[name]) if name in ok else "" for name in FIGURES})
        rows.append(row)
    rows.sort(key=lambda r: (r["workload"], _natural(r["params"]), r["engine"], r["concurrency"]))
    table = pd.DataFrame(rows, columns=POINT + ["n", *FIGURES])
    if not table.empty and not table.params.astype(bool).any():
        table = table.drop(columns="params")
    shown = [c for c in table.columns if c in HEADERS or table[c].astype(bool).any()]
    return table[shown].rename(columns={**HEADERS, **FIGURES})


def print_summary(*, run_dir: Path, trial_ids: set[str] | None = None) -> None:
    import pandas as pd

    from runner.schema import TrialStatus
    from runner.sinks.parquet import has_table, read_frame

    if not has_table(Path(run_dir), "trials"):
        print("no trials recorded")
        return
    trials = read_frame(Path(run_dir), "trials")
    if trial_ids is not None:
        trials = trials[trials.trial_id.isin(trial_ids)]
    if trials.empty:
        print("no trials recorded")
        return
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_rows", 500,
                           "display.max_colwidth", 60):
        print(summary_frame(trials).to_string(index=False))
    not_run = trials[trials.status != TrialStatus.OK]
    for _, row in not_run.drop_duplicates(["status", "failure_kind"]).iterrows():
        print(f"{row.status} ({row.failure_kind}): {row.failure_reason}")
