"""PNG plots (matplotlib, Agg backend, linear axes from zero). Each function returns the file it wrote, or None."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from runner.report.arms import CONCURRENCY, fixed_params, point_axes, workload_params
from runner.report.samples import deciding_metric
from runner.schema import EngineStatus, TrialStatus


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    font_cache()
    import matplotlib.pyplot as plt

    return plt


def font_cache() -> None:
    """Loads matplotlib's font list; a process without a cached one builds it and logs "generated new
    fontManager" at INFO, which belongs in no terminal: the build runs with that logger quietened."""
    import logging

    logger = logging.getLogger("matplotlib.font_manager")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        import matplotlib.font_manager  # noqa: F401  (the import builds or loads the cache)
    finally:
        logger.setLevel(level)


def _grid(n: int):
    cols = min(n, 3)
    return math.ceil(n / cols), cols


def _panel_figure(n: int):
    """A figure of `n` panels on _grid's rows and columns; returns (fig, axes) with axes a 2-D array."""
    rows, cols = _grid(n)
    return _pyplot().subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)


def _concurrency_axes(ax, panel: pd.DataFrame, *, ylabel: str, title: str) -> None:
    """A panel against concurrent sessions: ticks at the loads measured, both axes from zero."""
    ax.set_xticks(sorted(panel[CONCURRENCY].unique()))
    ax.set_xlabel("concurrent sessions")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _panels(points: pd.DataFrame, trials: pd.DataFrame, workload: str) -> list[tuple[str, pd.DataFrame]]:
    """Panels: one per combination of the workload's varying params (concurrency is the x axis)."""
    mine = points[points.workload == workload]
    axes = [a for a in point_axes(trials[trials.workload == workload]) if a != CONCURRENCY]
    if not axes:
        fixed = fixed_params(trials[trials.workload == workload])
        return [(", ".join(f"{k}={v}" for k, v in fixed.items()), mine)]
    params = workload_params(mine)
    keys = pd.Series([", ".join(map(str, row)) for row in params[axes].itertuples(index=False)], index=mine.index)
    panels = []
    for key in sorted(keys.unique(), key=lambda k: [float(v) if v.replace(".", "", 1).isdigit() else 0
                                                    for v in k.split(", ")]):
        title = ", ".join(f"{a}={v}" for a, v in zip(axes, key.split(", ")))
        panels.append((title, mine[keys == key]))
    return panels


def plot_vs_concurrency(points: pd.DataFrame, trials: pd.DataFrame, workload: str, out_dir: Path) -> Path | None:
    """The deciding metric against concurrency, one line per arm, one panel per param combination."""
    metric = deciding_metric(workload)
    panels = _panels(points, trials, workload)
    if not any(p["n"].sum() for _, p in panels):
        return None
    fig, axes = _panel_figure(len(panels))
    for ax, (title, panel) in zip(axes.flat, panels):
        for arm, line in panel.sort_values("arm_order").groupby("arm_order", sort=True):
            line = line.sort_values(CONCURRENCY)
            median = line["median"] * metric.scale
            # Bars: the 95% bootstrap interval of the median (absent below two repeats).
            below = (line["median"] - line.ci_lo).clip(lower=0).fillna(0) * metric.scale
            above = (line.ci_hi - line["median"]).clip(lower=0).fillna(0) * metric.scale
            ax.errorbar(line[CONCURRENCY], median, yerr=[below, above], marker="o", capsize=3,
                        label=line.arm.iloc[0])
        _concurrency_axes(ax, panel, ylabel=f"{metric.label} ({metric.unit})", title=title or workload)
    return _save(fig, axes, used=len(panels), out=Path(out_dir) / f"{workload}_vs_concurrency.png",
                 title=f"{workload}: {metric.label} vs concurrency\n(median of repeats; bars: 95% bootstrap interval)")


def plot_acceptance_per_position(trials: pd.DataFrame, out_dir: Path) -> Path | None:
    """Mean acceptance rate at each draft position, one line per spec arm, one panel per workload."""
    spec = trials[(trials.status == TrialStatus.OK) & (trials.k > 0)]
    spec = spec[spec.spec_acceptance_per_position.map(lambda v: v is not None and len(v) > 0)]
    if not len(spec):
        return None
    plt = _pyplot()
    workloads = list(dict.fromkeys(spec.workload))
    rows, cols = _grid(len(workloads))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    for ax, workload in zip(axes.flat, workloads):
        for _, arm in spec[spec.workload == workload].sort_values("arm_order").groupby("arm_order"):
            width = max(len(v) for v in arm.spec_acceptance_per_position)
            matrix = np.array([list(v) + [np.nan] * (width - len(v)) for v in arm.spec_acceptance_per_position],
                              dtype=float)
            ax.plot(range(1, width + 1), np.nanmean(matrix, axis=0), marker="o", label=arm.arm.iloc[0])
        ax.set_xticks(range(1, max(len(v) for v in spec.spec_acceptance_per_position) + 1))
        ax.set_xlabel("draft position")
        ax.set_ylabel("acceptance rate")
        ax.set_title(workload, fontsize=10)
        ax.set_ylim(0, 1.05)
        ax.set_xlim(left=0.5)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(workloads):]:
        ax.set_visible(False)
    fig.suptitle("acceptance per draft position (mean over trials)", fontsize=11)
    fig.tight_layout()
    path = Path(out_dir) / "acceptance_per_position.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_kv_capacity(engines: pd.DataFrame, out_dir: Path) -> Path | None:
    """KV pool size in tokens per engine configuration; a failed start shows as an empty bar, labelled."""
    if not len(engines):
        return None
    plt = _pyplot()
    frame = engines.sort_values("arm_order").drop_duplicates("arm")
    capacity = pd.to_numeric(frame.kv_capacity_tokens, errors="coerce").fillna(0)
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(frame) + 1.6))
    positions = np.arange(len(frame))
    ax.barh(positions, capacity, color=["tab:blue" if s == EngineStatus.OK else "tab:red" for s in frame.status])
    ax.set_yticks(positions, frame.arm)
    ax.invert_yaxis()
    for y, (value, status, kind) in enumerate(zip(capacity, frame.status, frame.failure_kind)):
        text = f" {int(value):,}" if status == EngineStatus.OK else f" failed: {kind}"
        ax.text(value, y, text, va="center", fontsize=8)
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("KV cache capacity (tokens)")
    ax.set_xlim(0, max(capacity.max(), 1) * 1.25)
    ax.set_title("KV capacity per configuration", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path = Path(out_dir) / "kv_capacity.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_pareto(pareto: pd.DataFrame, workload: str, out_dir: Path, *, params_text) -> Path | None:
    """tok/s per session (y) against tok/s per device (x) across concurrency, one curve per arm, front marked."""
    mine = pareto[pareto.workload == workload]
    if not len(mine):
        return None
    plt = _pyplot()
    panels = list(dict.fromkeys(mine.workload_params_json))
    rows, cols = _grid(len(panels))
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.2 * rows), squeeze=False)
    for ax, params in zip(axes.flat, panels):
        panel = mine[mine.workload_params_json == params]
        for _, line in panel.sort_values("arm_order").groupby("arm_order", sort=True):
            line = line.sort_values(CONCURRENCY)
            ax.plot(line.per_device, line.per_session, marker="o", label=line.arm.iloc[0])
            for x, y, c in zip(line.per_device, line.per_session, line[CONCURRENCY]):
                ax.annotate(f"c={c}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        front = panel[panel.on_front].sort_values("per_device")
        ax.plot(front.per_device, front.per_session, linestyle="--", color="black", linewidth=1, zorder=0)
        ax.scatter(front.per_device, front.per_session, s=140, facecolors="none", edgecolors="black",
                   label="Pareto front", zorder=3)
        ax.set_xlabel("output tok/s per device (aggregate ÷ devices)")
        ax.set_ylabel("tok/s per session")
        ax.set_title(params_text(workload, params), fontsize=10)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, axes, used=len(panels), out=Path(out_dir) / f"{workload}_pareto.png",
                 title=f"{workload}: per-session speed against throughput per device (medians of repeats)")


def _save(fig, axes, *, used: int, out: Path, title: str) -> Path:
    """Hides the grid's unused panels, titles the figure and writes it."""
    import matplotlib.pyplot as plt

    for ax in list(axes.flat)[used:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
