"""Open-loop trials against their offered rate: latency percentiles, goodput, and each arm's highest rate that
meets the config's `slo`, with an interval. Pure: reads persisted trials and requests only.

A line is one arm at one workload point with the rate axes (`request_rate`, a trace's `time_scale`) left out; its
points are the offered rates, `inf` (everything at once: saturation) placed at the request throughput it measured.
A point meets the SLO when the median over repeats of every targeted trial figure is within its limit (as in
runner.report.latency_target). The highest sustainable rate is interpolated linearly between the last point that
meets it and the first that does not; its 95 % interval is a seeded bootstrap of that crossing (each point's repeats
resampled independently), never narrower than what the grid can say: "≥ r" when every measured rate meets it,
"< r" when even the lowest misses. Goodput = the trial's measured requests meeting every target as a per-request
limit (TTFT, TPOT or E2EL ≤ its tightest target) / `duration_s` (vLLM's `--goodput`).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from runner.numerics.rate_bracket import crossing, crossing_interval, line_params, within_noise
from runner.report.frames import GOODPUT, request_goodput
from runner.report.probe_note import probe_notes
from runner.report.render import md_table, section
from runner.schema import TrialStatus
from runner.slo import Metric, Slo

OPEN_LOOP = ("poisson", "gamma", "trace")


def rate_points(trials: pd.DataFrame, requests: pd.DataFrame, slo: Slo) -> pd.DataFrame:
    """One row per (workload, line, arm, offered rate) of the ok open-loop trials."""
    if "arrival" not in trials:
        return pd.DataFrame()
    ok = trials[(trials.status == TrialStatus.OK) & trials.arrival.isin(OPEN_LOOP)]
    ok = ok[pd.to_numeric(ok.offered_rate_req_s, errors="coerce").notna()].copy()
    if not len(ok):
        return pd.DataFrame()
    ok["line"] = [line_params(p) for p in ok.workload_params_json]
    # The analysis's frames carry each trial's goodput under the report's SLO (runner.report.frames).
    ok["goodput"] = ok[GOODPUT] if GOODPUT in ok else request_goodput(ok, requests, slo)
    rows = []
    for (workload, line, arm, rate), group in ok.groupby(["workload", "line", "arm", "offered_rate_req_s"],
                                                          sort=False):
        throughput = float(pd.to_numeric(group.request_throughput_req_s, errors="coerce").median())
        row = {"workload": workload, "line": line, "arm": arm, "arm_order": group.arm_order.iloc[0],
               "offered": float(rate), "x": throughput if math.isinf(rate) else float(rate), "n": len(group),
               "throughput": throughput, "goodput": float(group.goodput.median()),
               "ttft_p50_ms": float(pd.to_numeric(group.ttft_p50_s, errors="coerce").median()) * 1000,
               "ttft_p99_ms": float(pd.to_numeric(group.ttft_p99_s, errors="coerce").median()) * 1000,
               "tpot_p50_ms": float(pd.to_numeric(group.tpot_p50_s, errors="coerce").median()) * 1000,
               "tok_s_per_session": float(pd.to_numeric(group.decode_tok_s_per_session, errors="coerce").median())
               if "decode_tok_s_per_session" in group else math.nan,
               # A saturation probe sends everything at once by design: its sends are late, not its client.
               "client_behind": not math.isinf(rate) and bool(group.client_behind.fillna(False).astype(bool).any()),
               "samples": {name: [float(v) * 1000 for v in pd.to_numeric(group[slo.column(name)],
                                                                          errors="coerce")]
                           for name in slo.limits}}
        medians = {name: float(np.nanmedian(v)) if len(v) else math.nan for name, v in row["samples"].items()}
        row.update({f"slo:{name}": m for name, m in medians.items()})
        row["meets"] = all(m <= slo.limits[name] for name, m in medians.items())  # NaN does not meet
        rows.append(row)
    points = pd.DataFrame(rows)
    # Saturation (inf) stays last on its line whatever its measured throughput.
    points["order"] = [(math.isinf(o), o) for o in points.offered]
    return points.sort_values(["workload", "line", "arm_order", "order"]).drop(columns="order").reset_index(drop=True)


def highest_rates(points: pd.DataFrame, slo: Slo, *, seed: int = 0) -> pd.DataFrame:
    """Per line and arm: the highest sustainable rate, its bootstrap interval and the bracket the grid gives."""
    rows = []
    rng = np.random.default_rng(seed)
    for (workload, line, arm), group in points.groupby(["workload", "line", "arm"], sort=False):
        xs = list(group.x)
        medians = [{n: float(np.nanmedian(s[n])) if len(s[n]) else math.nan for n in slo.limits} for s in group.samples]
        estimate, miss = crossing(xs, medians, slo)
        lo, hi = crossing_interval(xs, list(group.samples), slo, rng=rng)
        rates = [("inf→" if math.isinf(o) else "") + f"{x:.3g}" for o, x in zip(group.offered, xs)]
        if miss == 0:
            text = f"< {xs[0]:.3g} req/s (the lowest rate misses it)"
        elif miss < 0:
            text = f"≥ {xs[-1]:.3g} req/s (every measured rate meets it)"
        else:
            # The interval shown is never narrower than the measured rates around the crossing (as in the Answer).
            shown = (min(lo, xs[miss - 1]), max(hi, xs[miss], xs[miss - 1]))
            text = (f"≈ {estimate:.3g} req/s [{shown[0]:.3g}–{shown[1]:.3g}] "
                    f"(between {xs[miss - 1]:.3g} and {xs[miss]:.3g})")
        rows.append({"workload": workload, "line": line, "arm": arm, "arm_order": group.arm_order.iloc[0],
                     "highest rate": estimate, "ci_lo": float(lo), "ci_hi": float(hi), "within the SLO": text,
                     "bracket": bracket_text(xs, miss, (lo, hi)),
                     "repeats": int(group.n.min()), "measured rates (req/s)": ", ".join(rates),
                     "client behind at": ", ".join(r for r, b in zip(rates, group.client_behind) if b) or "–"})
    return pd.DataFrame(rows)


def bracket_text(xs: list[float], miss: int, interval: tuple[float, float]) -> str:
    """The measured rates around the crossing, their gap as a share of the lower one, and whether the repeats
    resolve it (runner.numerics.rate_bracket: what the rate search stops on)."""
    if miss <= 0:
        return "–"
    low, high = xs[miss - 1], xs[miss]
    gap = (high - low) / low if low > 0 else math.nan
    noise = ", within the repeats' noise" if within_noise(interval, low, high) else ""
    return f"{low:.3g}–{high:.3g} req/s ({gap:.0%} wide{noise})"


def _line_text(a, workload: str, line: str) -> str:
    return a.params_text(workload, line) or "–"


def rate_section(a) -> str:
    """The report's "Against offered rate" section (empty without open-loop trials)."""
    slo = a.settings.slo
    points = a.rate_points
    if not len(points):
        return ""
    table = pd.DataFrame({
        "workload": points.workload, "params": [_line_text(a, w, l) for w, l in zip(points.workload, points.line)],
        "arm": points.arm, "offered req/s": ["inf (saturation)" if math.isinf(o) else o for o in points.offered],
        "n": points.n, "throughput req/s": points.throughput, "goodput req/s": points.goodput,
        "TTFT p50 ms": points.ttft_p50_ms, "TTFT p99 ms": points.ttft_p99_ms, "TPOT p50 ms": points.tpot_p50_ms,
        "meets SLO": ["yes" if m else "no" for m in points.meets] if slo else "–",
        "client behind": ["yes" if b else "" for b in points.client_behind]})
    blocks = ["Open-loop trials by offered rate (medians over repeats). Throughput = measured requests completed / "
              "their span; goodput counts those within every `slo` target taken as a per-request limit. "
              "\"client behind\": the sends ran late (p99 lag > 10 ms), so that point measured the client "
              "(a saturation probe sends everything at once by design: never behind)."]
    blocks += probe_notes(a.trials)
    if slo:
        best = a.highest_rates
        blocks.append(md_table(pd.DataFrame({
            "workload": best.workload, "params": [_line_text(a, w, l) for w, l in zip(best.workload, best.line)],
            "arm": best.arm, f"highest rate within the SLO ({a.settings.slo.text()})": best["within the SLO"],
            "bracket": best.bracket, "repeats": best.repeats, "measured": best["measured rates (req/s)"],
            "client behind at": best["client behind at"]})))
        blocks.append("Interpolated between the two measured rates around the crossing; [interval]: a seeded 95 % "
                      "bootstrap of the crossing over each rate's repeats, widened to those two measured rates where "
                      "it is narrower (the crossing lies between them whatever the repeats say). A narrower bracket needs rates between "
                      "(sweep.adaptive=rate_search measures them until the bracket is within "
                      "sweep.rate_search.precision, or within the repeats' noise: the interval is as wide as the "
                      "bracket).")
    else:
        blocks.append("No `slo` target: set one (e.g. slo.ttft=500, or --slo ttft=500) "
                      "for each arm's highest sustainable rate.")
    blocks.append(md_table(table))
    return section("Against offered rate", *blocks)


def plot_rates(a, out_dir: Path) -> Path | None:
    """Latency percentiles and goodput against offered rate: one row of two panels per workload, one line per
    arm (and point)."""
    points = a.rate_points
    if not len(points):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(points.workload))
    fig, axes = plt.subplots(len(workloads), 3, figsize=(16, 4 * len(workloads)), squeeze=False)
    for (latency, good, speed), workload in zip(axes, workloads):
        mine = points[points.workload == workload]
        for (line, arm), row in mine.groupby(["line", "arm"], sort=False):
            label = arm if mine.line.nunique() == 1 else f"{arm} {_line_text(a, workload, line)}"
            drawn = latency.plot(row.x, row.ttft_p50_ms, marker="o", label=f"{label} TTFT p50")
            latency.plot(row.x, row.ttft_p99_ms, marker="^", linestyle="--", color=drawn[0].get_color(),
                         label=f"{label} TTFT p99")
            good.plot(row.x, row.goodput if a.settings.slo else row.throughput, marker="o", label=label)
            speed.plot(row.x, row.tok_s_per_session, marker="o", label=label)
        for target in a.settings.slo.targets:
            if target.metric == Metric.TTFT:
                latency.axhline(target.ms, color="grey", linewidth=0.8, linestyle=":")
        good.plot(sorted(mine.x), sorted(mine.x), color="grey", linewidth=0.6, linestyle=":", label="offered")
        latency.set_ylabel("ms")
        latency.set_title(f"{workload}: TTFT percentiles", fontsize=10)
        good.set_ylabel("req/s")
        good.set_title(f"{workload}: " + ("goodput (within the SLO)" if a.settings.slo else
                                          "throughput (no SLO)"), fontsize=10)
        speed.set_ylabel("tok/s")
        speed.set_title(f"{workload}: decode tok/s per session", fontsize=10)
        for ax in (latency, good, speed):
            ax.set_xlabel("offered req/s (saturation: at its measured throughput)")
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("Against offered rate (medians of repeats)")
    fig.tight_layout()
    out = Path(out_dir) / "latency_vs_rate.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
