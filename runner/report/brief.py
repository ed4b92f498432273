"""The Answer in brief: per workload, what holds where, with consecutive load points merged into ranges, and every
cell within CELL_LIMIT characters. Pure.

A workload's points lie on lines (its varying params other than the load) and, along each line, on its load axis:
concurrency, or the offered rate of an open-loop sweep. Along a line, consecutive load points with the same label
merge into one range ("mtp:1 c=64–128"); lines that read the same merge too. Where even that is too long, a cell
falls back to counts (the arm × load matrix below the Answer has every point).
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import pandas as pd

from runner.numerics.rate_bracket import RATE_AXES
from runner.report.arms import CONCURRENCY, axis_short, point_axes, point_coords
from runner.report.verdict import _sort_key

CELL_LIMIT = 200  # characters in one Answer cell: a line one reads in a glance


def fit(*candidates: str, limit: int = CELL_LIMIT) -> str:
    """The first candidate within the limit (most detailed first); else the last one cut short."""
    for text in candidates:
        if text is not None and len(text) <= limit:
            return text
    return candidates[-1][:limit - 1].rstrip(" ,;") + "…"


def load_axis(trials_of_workload: pd.DataFrame) -> str:
    """The axis a workload's load varies on: an open-loop rate where one varies, else concurrency."""
    axes = point_axes(trials_of_workload)
    return next((a for a in RATE_AXES if a in axes), CONCURRENCY)


def line_axes(trials_of_workload: pd.DataFrame) -> list[str]:
    """The workload's varying axes other than its load."""
    load = load_axis(trials_of_workload)
    return [a for a in point_axes(trials_of_workload) if a != load]


def _values_text(values: Sequence) -> str:
    return str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"


def runs(labelled: list[tuple[object, str]]) -> list[tuple[str, list]]:
    """(load value, label) pairs, sorted by load, as runs of consecutive equal labels: [(label, [values])]."""
    out: list[tuple[str, list]] = []
    for value, label in sorted(labelled, key=lambda p: _sort_key(p[0])):
        if out and out[-1][0] == label:
            out[-1][1].append(value)
        else:
            out.append((label, [value]))
    return out


def by_line(frame: pd.DataFrame, labels: Sequence[str], trials_of_workload: pd.DataFrame) -> list[tuple[str, str]]:
    """Per line of the workload (lines that read alike merged): (line text, its load runs as text).

    `frame` holds one row per point (workload_params_json, concurrency); `labels` one text per row."""
    load = load_axis(trials_of_workload)
    lines = line_axes(trials_of_workload)
    load_name = axis_short(load)
    grouped: dict[tuple, list[tuple[object, str]]] = {}
    for row, label in zip(frame.to_dict("records"), labels):
        coords = point_coords(row)
        key = tuple(coords.get(a) for a in lines)
        grouped.setdefault(key, []).append((coords.get(load), label))
    texts: dict[str, list[tuple]] = {}
    for key in sorted(grouped, key=lambda k: [_sort_key(v) for v in k]):
        pieces = runs(grouped[key])
        text = ", ".join(f"{label} {load_name}={_values_text(values)}" for label, values in pieces)
        texts.setdefault(text, []).append(key)
    return [(_keys_text(lines, keys) if len(texts) > 1 else "", text) for text, keys in texts.items()]


def _keys_text(lines: list[str], keys: list[tuple]) -> str:
    """Lines named by their axes' values: "ctx=4096, 16384" on one axis, "(a=1, b=2) or (a=3, b=4)" on more."""
    if len(lines) == 1:
        return f"{axis_short(lines[0])}=" + ", ".join(str(k[0]) for k in keys)
    named = [", ".join(f"{axis_short(a)}={v}" for a, v in zip(lines, key)) for key in keys]
    return named[0] if len(named) == 1 else " or ".join(f"({n})" for n in named)


def lines_text(pairs: list[tuple[str, str]]) -> str:
    return " · ".join(f"{where}: {text}" if where else text for where, text in pairs)


def where_text(frame: pd.DataFrame, selected: Sequence[bool], trials_of_workload: pd.DataFrame) -> str:
    """Where the selected points lie, as load ranges per line ("" where they are all the points)."""
    selected = list(selected)
    if all(selected):
        return ""
    labels = ["x" if s else "" for s in selected]
    load_name = axis_short(load_axis(trials_of_workload))
    out = []
    for where, text in by_line(frame, labels, trials_of_workload):
        chosen = [p.removeprefix(f"x {load_name}=") for p in text.split(", ") if p.startswith("x ")]
        if chosen:
            out.append((where, f"{load_name}=" + ", ".join(chosen)))
    return lines_text(out)


def counts_text(labels: Sequence[str]) -> str:
    """Labels by how many points carry them, most first: "mtp:3 at 6, mtp:2 at 2 of 10 points"."""
    counts = Counter(labels)
    return ", ".join(f"{label} at {n}" for label, n in counts.most_common()) + f" of {len(labels)} points"
