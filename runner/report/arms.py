"""Arms (configurations under comparison) and workload points (where they are compared).

An arm is everything about the engine that the sweep varied, labelled as the
plan labels engines (runner.labels): the spec arm always shows, every
other setting (prefix caching, memory budget, max length, engine arguments,
API, model) only where arms differ; the source folder shows only when the same
configuration appears in more than one folder.
A static draft count and the model's own acceptance are the defaults and go unsaid
(`sched=static`, `accept=real` are dropped): only a schedule or profile arm names its own.
A workload point is (workload, params, concurrency); repeats of one arm at one
point are pooled.
"""
from __future__ import annotations

import json

import pandas as pd

from runner.spec_arm import SpecArm
from runner.labels import engine_labels
from runner.schema import EngineSettings

ARM_FIELDS = ("model", "spec_method", "num_speculative_tokens", "enable_prefix_caching", "gpu_memory_utilization",
              "max_model_len", "tensor_parallel_size", "engine_args_json", "api", "spec_schedule",
              "spec_acceptance_profile")
# Arm fields that results from before them lack (read as null: a static k, real acceptance).
LATER_ARM_FIELDS = ("spec_schedule", "spec_acceptance_profile")
DEFAULT_LABEL_WORDS = ("sched=static", "accept=real")  # what every arm is unless it says otherwise
POINT_FIELDS = ("workload", "workload_params_json", "concurrency")
CONCURRENCY = "concurrency"


def draft_count(method: str, k) -> int:
    return SpecArm.of(method, k).k


def _fill_engine_api(engines: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Older engine rows have no api; take it from their trials (the default API otherwise)."""
    engines = engines.copy()
    if "api" not in engines.columns:
        engines["api"] = None
    if len(trials):
        by_engine = trials.drop_duplicates(["source", "engine_id"]).set_index(["source", "engine_id"]).api
        fill = [by_engine.get((s, e)) for s, e in zip(engines.source, engines.engine_id)]
        engines["api"] = [a if isinstance(a, str) else f for a, f in zip(engines.api, fill)]
    engines["api"] = engines.api.where(engines.api.notna(), "async")
    return engines


def _arm_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per distinct (source, arm fields), with its label and sort order."""
    arms = rows[["source", *ARM_FIELDS]].drop_duplicates().reset_index(drop=True)
    arms["spec_method"] = arms.spec_method.fillna("off")
    labels = engine_labels([_settings(r) for r in arms.to_dict("records")], apis=list(arms.api.astype(str)))
    arms["arm"] = labels
    # Arms that differ only in spec method and static k form a family: the candidates for "best draft count"
    # (a schedule arm is not one of them: it is compared with the chosen static k instead).
    arms["family"] = [" ".join(w for w in label.partition(" ")[2].split() if not w.startswith(("sched=", "accept=")))
                      for label in labels]
    arms["scheduled"] = [isinstance(v, str) and bool(v) for v in arms.spec_schedule]
    arms["arm"] = [without_defaults(label) for label in labels]
    if (arms.groupby("arm").source.nunique() > 1).any():
        arms["arm"] = [f"{a} @{s}" for a, s in zip(arms.arm, arms.source)]
        arms["family"] = [f"{f} @{s}".strip() for f, s in zip(arms.family, arms.source)]
    arms["k"] = [draft_count(m, k) for m, k in zip(arms.spec_method, arms.num_speculative_tokens)]
    source_order = {s: i for i, s in enumerate(dict.fromkeys(rows.source))}
    arms["arm_order"] = list(zip(arms.source.map(source_order), arms.model.astype(str), arms.spec_method != "off",
                                 arms.spec_method, arms.k, ~arms.enable_prefix_caching.astype(bool),
                                 arms.gpu_memory_utilization, arms.max_model_len, arms.engine_args_json,
                                 arms.api.astype(str), arms.spec_schedule.fillna("").astype(str),
                                 arms.spec_acceptance_profile.fillna("").astype(str)))
    order = sorted(arms.arm_order.unique())
    arms["arm_order"] = arms.arm_order.map({o: i for i, o in enumerate(order)})
    return arms


def without_defaults(label: str) -> str:
    """A label without the words every arm has unless it says otherwise (a static k, the model's acceptance)."""
    return " ".join(w for w in label.split(" ") if w not in DEFAULT_LABEL_WORDS)


def _settings(row: dict) -> EngineSettings:
    def number(value, default, kind):
        return default if value is None or pd.isna(value) else kind(value)

    return EngineSettings(
        model=str(row["model"]), spec_method=str(row["spec_method"] or "off"),
        num_speculative_tokens=number(row["num_speculative_tokens"], 0, int),
        enable_prefix_caching=bool(row["enable_prefix_caching"]) if row["enable_prefix_caching"] is not None else True,
        gpu_memory_utilization=number(row["gpu_memory_utilization"], 0.9, float),
        max_model_len=number(row["max_model_len"], 0, int),
        tensor_parallel_size=number(row["tensor_parallel_size"], 1, int),
        engine_args_json=row["engine_args_json"] or "{}",
        spec_schedule=row.get("spec_schedule") if isinstance(row.get("spec_schedule"), str) else None,
        spec_acceptance_profile=(row.get("spec_acceptance_profile")
                                 if isinstance(row.get("spec_acceptance_profile"), str) else None))


def _row_keys(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    return ["|".join(map(str, row)) for row in frame[columns].itertuples(index=False)]


def add_arms(engines: pd.DataFrame, trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Adds arm, family, k (0 for off) and arm_order to both tables, labelled consistently across them."""
    engines = _fill_engine_api(engines, trials)
    engines, trials = (frame.assign(**{c: None for c in LATER_ARM_FIELDS if c not in frame.columns})
                       for frame in (engines, trials))
    if not len(engines) and not len(trials):
        empty = dict(arm=[], k=[], arm_order=[], family=[], scheduled=[])
        return engines.assign(**empty), trials.assign(**empty)
    both = pd.concat([engines[["source", *ARM_FIELDS]], trials[["source", *ARM_FIELDS]]], ignore_index=True)
    both["spec_method"] = both.spec_method.fillna("off")
    arms = _arm_table(both)
    key = ["source", *ARM_FIELDS]

    def attach(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame["spec_method"] = frame.spec_method.fillna("off")
        frame["_key"] = _row_keys(frame, key)
        table = arms.assign(_key=_row_keys(arms, key)).set_index("_key")
        for column in ("arm", "k", "arm_order", "family", "scheduled"):
            frame[column] = frame._key.map(table[column])
        return frame.drop(columns="_key")

    return attach(engines), attach(trials)


def workload_params(trials: pd.DataFrame) -> pd.DataFrame:
    """The workload params of each trial as columns (one per param name)."""
    parsed = [json.loads(p or "{}") for p in trials.workload_params_json]
    return pd.DataFrame(parsed, index=trials.index)


def point_axes(trials_of_workload: pd.DataFrame) -> list[str]:
    """The axes of one workload: params that vary between its trials, then concurrency if it varies."""
    params = workload_params(trials_of_workload)
    axes = [c for c in params.columns if params[c].astype(str).nunique() > 1]
    if trials_of_workload[CONCURRENCY].nunique() > 1:
        axes.append(CONCURRENCY)
    return axes


def fixed_params(trials_of_workload: pd.DataFrame) -> dict:
    params = workload_params(trials_of_workload)
    return {c: params[c].iloc[0] for c in params.columns if params[c].astype(str).nunique() == 1}


def axis_short(axis: str) -> str:
    return "c" if axis == CONCURRENCY else axis


def point_coords(row: dict) -> dict:
    """A point's coordinates: its params plus concurrency."""
    return {**json.loads(row["workload_params_json"] or "{}"), CONCURRENCY: int(row[CONCURRENCY])}


def describe_point(coords: dict, axes: list[str]) -> str:
    shown = [a for a in axes if a in coords]
    return ", ".join(f"{axis_short(a)}={coords[a]}" for a in shown) or "all"
