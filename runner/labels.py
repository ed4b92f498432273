"""Engine labels that tell every engine of a plan apart (plan print, progress bar, summary, report, W&B). Pure.

A label is the speculative arm, then each setting in which the engines being shown differ, and nothing they
share: two engines that differ only in an `engine_axes` value (kv_cache_dtype=auto vs fp8) get two labels.
"""
from __future__ import annotations

import json
from typing import Optional, Sequence

from runner.schema import EngineSettings

# Settings of EngineSettings (beyond the spec arm) in label order, with their short names.
_SHORT = {"enable_prefix_caching": "pc", "gpu_memory_utilization": "mem", "max_model_len": "len",
          "tensor_parallel_size": "tp", "model": "model"}
# A key one engine passes through engine_args and another does not.
UNSET = "unset"


def _text(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return str(value)


def _parts(s: EngineSettings) -> dict[str, str]:
    """Every labelled setting of one engine, `name → text`, in label order (spec arm excluded)."""
    parts = {short: _text(getattr(s, name)) for name, short in _SHORT.items()}
    parts.update(spec_parts(s))
    try:
        args = json.loads(s.engine_args_json or "{}")
    except ValueError:
        args = {"engine_args_json": s.engine_args_json}
    for key in sorted(args):
        parts[key] = _text(args[key])
    return parts


def spec_parts(s: EngineSettings) -> dict[str, str]:
    """The draft-count schedule ("sched=1:3,2-8:1", static k otherwise) and the acceptance profile
    ("accept=0.86/0.74/0.64", the model's own: real) of a speculative engine; spec off shows neither."""
    if s.spec.off:
        return {"sched": "static", "accept": "real"}
    sched = "static"
    if isinstance(s.spec_schedule, str) and s.spec_schedule:  # rows read back hold NaN for null
        try:
            sched = ",".join(f"{a}:{k}" if a == b else f"{a}-{b}:{k}" for a, b, k in json.loads(s.spec_schedule))
        except (TypeError, ValueError):
            sched = str(s.spec_schedule)
    accept = "real"
    if isinstance(s.spec_acceptance_profile, str) and s.spec_acceptance_profile:
        try:
            accept = "/".join(f"{r:g}" for r in json.loads(s.spec_acceptance_profile)[:s.spec.k])
        except (TypeError, ValueError):
            accept = str(s.spec_acceptance_profile)
    return {"sched": sched, "accept": accept}


def engine_labels(settings: Sequence[EngineSettings], *, apis: Optional[Sequence[str]] = None) -> list[str]:
    """Same order as given. Each label: the spec arm ("off", "mtp:2", "ngram:3"), then every other setting in
    which these engines differ (pc=on/off, mem=0.9, len=1024, and any engine_args_json key, e.g.
    kv_cache_dtype=fp8), and nothing they share. `apis` (one per engine, optional) adds api=offline where the
    same settings run under two APIs."""
    parts = [_parts(s) for s in settings]
    if apis is not None:
        for p, api in zip(parts, apis):
            p["api"] = str(api)
    names: list[str] = []
    for p in parts:
        names += [n for n in p if n not in names]
    differing = [n for n in names if len({p.get(n, UNSET) for p in parts}) > 1]
    return [" ".join([s.spec.label]
                     + [f"{n}={p.get(n, UNSET)}" for n in differing])
            for s, p in zip(settings, parts)]


def full_label(s: EngineSettings) -> str:
    """One engine seen alone: the spec arm and every setting (where the other engines are not known)."""
    return " ".join([s.spec.label]
                    + [f"{n}={v}" for n, v in _parts(s).items() if n != "model"])


def plan_labels(engines: Sequence) -> dict[str, str]:
    """`engine_id → label` for a plan's engines (EngineConfig: settings, api, engine_id)."""
    engines = list(engines)
    labels = engine_labels([e.settings for e in engines], apis=[getattr(e, "api", "async") for e in engines])
    return {e.engine_id: label for e, label in zip(engines, labels)}


def _plain(value):
    return value.item() if hasattr(value, "item") and not isinstance(value, (list, dict, str)) else value


def labels_of_rows(rows) -> dict[str, str]:
    """`engine_id → label` from persisted rows (trials or engines: dicts holding EngineSettings' columns)."""
    import dataclasses

    names = [f.name for f in dataclasses.fields(EngineSettings)]
    first: dict[str, dict] = {}
    for row in rows:
        first.setdefault(row["engine_id"], row)
    ids = list(first)
    settings = [EngineSettings(**{n: _plain(first[i][n]) for n in names if n in first[i]}) for i in ids]
    apis = [str(first[i].get("api") or "async") for i in ids]
    return dict(zip(ids, engine_labels(settings, apis=apis)))
