"""Markdown for report.md and the terminal: plain pipe tables, numbers formatted for reading."""
from __future__ import annotations

import math

import pandas as pd


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if abs(value) >= 1e4 or (value == int(value) and abs(value) >= 1):
            return f"{value:,.0f}"
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1e4:
        return f"{value:,}"
    text = str(value)
    return text.replace("|", "\\|").replace("\n", " ") or "–"


def md_table(frame: pd.DataFrame) -> str:
    if frame is None or not len(frame):
        return "_none_"
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def percent(value) -> str:
    return "–" if value is None or pd.isna(value) else f"{value:.0%}"


def section(title: str, *blocks: str) -> str:
    return "\n\n".join([f"## {title}", *[b for b in blocks if b]])
