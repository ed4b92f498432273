"""The plots a study is read by, per workload (matplotlib through runner.report.plots' conventions: Agg, linear
axes from zero, one panel per combination of the workload's varying params, one line per arm). Each function
returns the file it wrote, or None where the data has nothing to draw.

- aggregate decode throughput against concurrency, one line per arm;
- speed-up over spec off on the deciding figure, one line per draft count k (> 1: faster than off);
- the best k by the engine's measured batch size (requests per step), with the ks tied for first as a bar.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from runner.report.arms import CONCURRENCY
from runner.report.plots import _concurrency_axes, _panel_figure, _panels, _pyplot, _save
from runner.report.samples import better_ratio, deciding_metric
from runner.schema import TrialStatus


def _throughput_points(trials: pd.DataFrame, workload: str) -> pd.DataFrame:
    """Median aggregate decode tok/s over repeats per (params, concurrency, arm) of one workload."""
    ok = trials[(trials.workload == workload) & (trials.status == TrialStatus.OK)].copy()
    ok["aggregate"] = pd.to_numeric(ok.get("decode_tok_s_aggregate"), errors="coerce")
    ok = ok.dropna(subset=["aggregate"])
    if not len(ok):
        return pd.DataFrame()
    keys = ["workload", "workload_params_json", CONCURRENCY, "arm"]
    return (ok.groupby(keys, sort=False).agg(arm_order=("arm_order", "first"), median=("aggregate", "median"),
                                             n=("aggregate", "size")).reset_index())


def plot_throughput(trials: pd.DataFrame, workload: str, out_dir: Path) -> Path | None:
    """Aggregate decode tok/s (all sessions together) against concurrency, one line per arm."""
    return _lines_per_arm(_throughput_points(trials, workload), trials, workload, column="median",
                          ylabel="aggregate decode tok/s", out=Path(out_dir) / f"{workload}_throughput.png",
                          title=f"{workload}: aggregate decode throughput vs concurrency (median of repeats)")


def speedups(points: pd.DataFrame, workload: str) -> pd.DataFrame:
    """Per spec arm and point: its deciding figure over spec off's of the same family (> 1: better than off)."""
    mine = points[(points.workload == workload) & (points.n > 0)]
    off = mine[mine.k == 0].drop_duplicates(["workload_params_json", CONCURRENCY, "family"])
    off_at = {(p, c, f): m for p, c, f, m in zip(off.workload_params_json, off[CONCURRENCY], off.family, off["median"])}
    rows = []
    for r in mine[mine.k > 0].to_dict("records"):
        base = off_at.get((r["workload_params_json"], r[CONCURRENCY], r["family"]))
        if base:
            rows.append({**r, "speedup": better_ratio(workload, r["median"], base)})
    return pd.DataFrame(rows)


def plot_speedup(points: pd.DataFrame, trials: pd.DataFrame, workload: str, out_dir: Path) -> Path | None:
    """The deciding figure of each spec arm over spec off's against concurrency, one line per arm (per k)."""
    return _lines_per_arm(speedups(points, workload), trials, workload, column="speedup", reference=1.0,
                          ylabel="speed-up over spec off (×)", out=Path(out_dir) / f"{workload}_speedup.png",
                          title=f"{workload}: {deciding_metric(workload).label}, speculative arm over spec off "
                                f"per k (> 1: better)")


def _lines_per_arm(frame: pd.DataFrame, trials: pd.DataFrame, workload: str, *, column: str, ylabel: str,
                   out: Path, title: str, reference: float | None = None) -> Path | None:
    """`column` against concurrency, one line per arm, one panel per combination of the workload's params."""
    if not len(frame):
        return None
    panels = _panels(frame, trials, workload)
    fig, axes = _panel_figure(len(panels))
    for ax, (name, panel) in zip(axes.flat, panels):
        for _, line in panel.sort_values("arm_order").groupby("arm_order", sort=True):
            line = line.sort_values(CONCURRENCY)
            ax.plot(line[CONCURRENCY], line[column], marker="o", label=line.arm.iloc[0],
                    color=f"C{int(line.arm_order.iloc[0]) % 10}")  # one colour per arm in every panel
        if reference is not None:
            ax.axhline(reference, color="black", linewidth=0.8, linestyle="--", label="spec off")
        _concurrency_axes(ax, panel, ylabel=ylabel, title=name or workload)
    return _save(fig, axes, used=len(panels), out=out, title=title)


def plot_best_k_by_batch(schedules: list[dict], trials: pd.DataFrame, workload: str, out_dir: Path,
                         *, params_text) -> Path | None:
    """The best k at each load against its measured batch size, one line per params and method; bars: the ks tied
    for first. Only where the trials carry the engine's batch size."""
    mine = [s for s in schedules if s["workload"] == workload and any(x["best_k"] is not None for x in s["loads"])]
    sizes = trials[trials.workload == workload].reindex(columns=["batch_size_p50", "batch_size_mean"])
    if not mine or sizes.isna().all().all():
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 1, figsize=(6.4, 4.2), squeeze=False)
    ax = axes[0, 0]
    for s in mine:
        loads = [x for x in s["loads"] if x["best_k"] is not None]
        xs = [x["batch_size"] for x in loads]
        ks = [x["best_k"] for x in loads]
        low = [k - min(x["tied"] or [k]) for k, x in zip(ks, loads)]
        high = [max(x["tied"] or [k]) - k for k, x in zip(ks, loads)]
        where = params_text(workload, s["workload_params_json"])
        label = ", ".join(p for p in (s["method"], where if where != "all" else "", s["family"]) if p)
        ax.errorbar(xs, ks, yerr=[low, high], marker="o", capsize=4, linestyle=":", label=label)
        for x, c, k in zip(xs, [x["concurrency"] for x in loads], ks):
            ax.annotate(f"c={c}", (x, k), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlim(left=0)
    ax.set_xlabel("requests per engine step (median step, measured)")
    ax.set_ylabel("best k (0: spec off)")
    ax.set_ylim(bottom=-0.2)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, axes, used=1, out=Path(out_dir) / f"{workload}_best_k_by_batch.png",
                 title=f"{workload}: best draft count by batch size (bars: ks tied for first)")
