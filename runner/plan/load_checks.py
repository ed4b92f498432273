"""Checks of production-shaped load (open-loop arrivals, traces, prompt sets) that span more than one workload
parameter; each parameter's own value is checked by its workload's params (WorkloadParams.validate). Pure but for
the tokenizer handed in (a callable: loaded only where a workload renders prompts)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable


def _values(raw: dict, key: str) -> list:
    value = raw.get(key)
    return list(value) if isinstance(value, (list, tuple)) else [value]


def check_load_shape(*, workloads: dict) -> list[str]:
    """Open-loop arrivals need streamed requests: the offline API hands the engine one batch, with no clock."""
    errors = []
    for name, raw in (workloads or {}).items():
        raw = dict(raw or {})
        open_loop = [a for a in _values(raw, "arrival") if a not in (None, "closed")]
        if open_loop and raw.get("api", "async") == "offline":
            errors.append(f"workload {name!r}: arrival={open_loop[0]} sends requests on a clock, which "
                          f"api=offline (one LLM.generate batch) cannot (fix: workload.{name}.api=async)")
    return errors


def _renders(params) -> bool:
    from runner.measurement.workloads.base import WorkloadParams

    return type(params).with_prompts is not WorkloadParams.with_prompts


def check_prompt_lengths(*, workloads: dict, max_lens: list, tokenizer: Callable[[], Any]) -> list[str]:
    """Each prompt as the engine will get it (after the chat template, counted with the model's tokenizer) against
    every max_model_len: one that does not fit is refused with its length, its file and line, and the fix."""
    from runner.plan.grid import PlanError, expand_workload_points, parse_point

    errors: list[str] = []
    loaded: list = []
    for name, raw in (workloads or {}).items():
        raw = {k: v for k, v in dict(raw or {}).items() if k not in ("api", "concurrency", "repeats")}
        try:
            points = [parse_point(name, point) for point in expand_workload_points(name=name, params=raw)]
        except (PlanError, ValueError):
            continue  # check_workloads names it
        for params in points:
            if not _renders(params) or params.validate():
                continue
            if not loaded:
                try:
                    loaded.append(tokenizer())
                except Exception as exc:
                    if name != "prompt_set":
                        continue  # nothing is cut there: an over-long request fails in vLLM with its length
                    return errors + [f"workload {name!r}: the model's tokenizer does not load on this machine "
                                     f"({type(exc).__name__}: {str(exc)[:160]}); prompt files are counted with it "
                                     f"before start (fix: model.tokenizer=<a local folder with the model's "
                                     f"tokenizer>)"]
            errors += [f"workload {name!r}: {e}" for e in
                       params.prompt_problems(tokenizer=loaded[0], max_model_lens=list(max_lens))]
    return list(dict.fromkeys(errors))


def ship_prompts(plan, *, tokenizer: Callable[[], Any]):
    """The plan with each rendering workload's data read here, on the driver, and measured with the model's
    tokenizer: the trials carry their prompt files' conversations to the actors, so no other node needs the
    files, and their max_sequence_tokens are the real prompts'."""
    shipped: dict[int, Any] = {}
    trials = []
    for trial in plan.trials:
        if _renders(trial.params):
            key = id(trial.params)
            if key not in shipped:
                try:
                    shipped[key] = trial.params.with_prompts(tokenizer())
                except Exception:
                    shipped[key] = trial.params  # validation refused what matters; the actor reads it itself
            trial = dataclasses.replace(trial, params=shipped[key])
        trials.append(trial)
    return dataclasses.replace(plan, trials=trials)
