"""Per workload, the deciding figure as an arm × load matrix: rows the arms, columns the load points (concurrency,
or an open-loop rate), cells the median over repeats, the choice and the arms tied with it marked. Pure.

One matrix per line of the workload (its varying params other than the load).
"""
from __future__ import annotations

import pandas as pd

from runner.report.arms import CONCURRENCY, axis_short, point_coords
from runner.report.brief import line_axes, load_axis
from runner.report.render import md_table, section
from runner.report.samples import deciding_metric
from runner.report.verdict import _sort_key

CHOSEN, TIED = "✓", "≈"


def _cell(row: dict, decision: dict | None, metric) -> str:
    if not row["n"]:
        return f"failed ({row['n_failed']})" if row["n_failed"] else "skipped" if row["n_skipped"] else "–"
    text = metric.display(row["median"])
    if decision is None:
        return text
    if row["arm"] == decision.get("choice"):
        return f"**{text}** {CHOSEN}"
    return f"{text} {TIED}" if row["arm"] in (decision.get("tied") or []) else text


def arm_load_matrices(points: pd.DataFrame, outcomes: pd.DataFrame,
                      trials: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """[(title, matrix)] per workload and line; the matrix's first column is the arm."""
    out = []
    decisions = {(r["workload"], r["workload_params_json"], int(r["concurrency"])): r
                 for r in outcomes.to_dict("records")}
    for workload in dict.fromkeys(points.workload):
        metric = deciding_metric(workload)
        mine = points[points.workload == workload].sort_values("arm_order")
        of_workload = trials[trials.workload == workload]
        load, lines = load_axis(of_workload), line_axes(of_workload)
        records = [(point_coords(r), r) for r in mine.to_dict("records")]
        keys = sorted({tuple(c.get(a) for a in lines) for c, _ in records}, key=lambda k: [_sort_key(v) for v in k])
        for key in keys:
            here = [(c, r) for c, r in records if tuple(c.get(a) for a in lines) == key]
            loads = sorted({c.get(load) for c, _ in here}, key=_sort_key)
            dropped = 0
            if load != CONCURRENCY:  # open loop: compare arms only at rates every arm ran
                arms = {r["arm"] for _, r in here}
                common = [v for v in loads if {r["arm"] for c, r in here if c.get(load) == v and r["n"]} == arms]
                dropped, loads = len(loads) - len(common), common
                here = [(c, r) for c, r in here if c.get(load) in loads]
            table: dict[str, dict[str, str]] = {}
            for c, r in here:
                decision = decisions.get((workload, r["workload_params_json"], int(r["concurrency"])))
                table.setdefault(r["arm"], {"arm": r["arm"]})[f"{axis_short(load)}={c.get(load)}"] = \
                    _cell(r, decision, metric)
            columns = ["arm", *(f"{axis_short(load)}={v}" for v in loads)]
            frame = pd.DataFrame(list(table.values()), columns=columns).fillna("–")
            where = ", ".join(f"{axis_short(a)}={v}" for a, v in zip(lines, key))
            note = (f" (offered rates every arm ran; {dropped} rate(s) only some arms ran: see Against offered rate)"
                    if dropped else "")
            out.append((f"{workload}{': ' + where if where else ''} — {metric.heading}{note}", frame))
    return out


def matrix_section(a) -> str:
    blocks = [f"**{title}**\n\n{md_table(frame)}" for title, frame in arm_load_matrices(a.points, a.outcomes,
                                                                                        a.trials)]
    if not blocks:
        return ""
    return section("Deciding figure by arm and load",
                   f"Median over repeats per arm (rows) and load (columns). {CHOSEN}: the choice at that load "
                   f"(bold); {TIED}: tied with it within noise.", *blocks)
