"""The caveats of one workload's answer, as the study sees them: each with the Answer table's tag and the
recommendation's sentence. Pure.

They belong to the study: the repeats rule and the capacity wall are about per-point comparisons, so a rate
search (whose probes decide by their own intervals) is not held to them; forced (synthetic) acceptance is named
as what the measurement used, never as degenerate text.
"""
from __future__ import annotations

from typing import Optional

import pandas as pd

from runner.numerics.decision import DecisionKind
from runner.report.study_answer import Caveat, Deploy

DATA_FILE_COLUMNS = {"over_length_skipped": "requests over their length limit skipped",
                     "over_length_clipped": "requests over their length limit clipped (prompt cut to fit)",
                     "source_skipped": "entries of its data file skipped (null or non-text messages, recorded "
                                       "failures)"}


def data_file_caveats(trials: pd.DataFrame) -> list[str]:
    """What of a workload's data file its trials did not send as recorded, per trial at each max_model_len."""
    caveats = []
    for column, what in DATA_FILE_COLUMNS.items():
        if column not in trials or not (trials[column].fillna(0) > 0).any():
            continue
        per_len = trials.groupby("max_model_len")[column].max()
        caveats.append(f"{what}: " + ", ".join(f"{int(n)} per trial at max_model_len={m}"
                                               for m, n in per_len.items() if n > 0))
    return caveats


def workload_caveats(workload: str, *, per_point: bool, outcomes: pd.DataFrame, config: dict,
                     deploy: Optional[Deploy], engines_dummy: bool, degenerate: pd.DataFrame,
                     divergence: pd.DataFrame, failures: pd.DataFrame, stops: pd.DataFrame, trials: pd.DataFrame,
                     min_repeats: int) -> tuple[Caveat, ...]:
    """`per_point`: the study answers this workload point by point (the repeats rule and the wall apply)."""
    out: list[Caveat] = []
    model = (config or {}).get("model") or {}
    if model.get("builtin") and not model.get("path"):
        out.append(Caveat(tag="built-in model", text=f"model is the runner's built-in {model['builtin']!r} "
                          f"({model.get('name')}): put your model's path in engine_args.model / the serve command"))
    if model.get("load_format") == "dummy" or engines_dummy:
        out.append(Caveat(tag="dummy weights", text="dummy weights (load_format: dummy): speeds and acceptance are "
                          "not those of the real model; re-run with real weights before deploying"))
    forced = (deploy.measured_with or {}).get("speculative_config.synthetic_acceptance_rates") if deploy else None
    if forced is not None:
        out.append(Caveat(tag="synthetic acceptance", text=f"acceptance forced to {forced} per draft position "
                          "(benchmark only, not in the serve line): the speed-up holds at that acceptance"))
    bad = degenerate[degenerate.workload == workload] if len(degenerate) else degenerate
    if len(bad):
        out.append(Caveat(tag="degenerate outputs", text="degenerate outputs (median distinct-token share < 0.25) "
                          "for " + ", ".join(bad.arm) + ": acceptance there does not represent real text"))
    if per_point:
        walled = outcomes[outcomes.kind == DecisionKind.CAPACITY]
        if len(walled):
            out.append(Caveat(tag="capacity wall", text=f"capacity wall at {len(walled)} point(s): no configuration "
                              "effect can be read there"))
        few = outcomes[(outcomes.n_min > 0) & (outcomes.n_min < min_repeats)]
        if len(few):
            out.append(Caveat(tag=f"< {min_repeats} repeats", text=f"too few repeats at {len(few)} point(s) (fewer "
                              f"than {min_repeats}; fix: sweep.repeats={min_repeats})"))
        ties = outcomes[outcomes.kind == DecisionKind.TIE]
        if len(ties):
            out.append(Caveat(tag="", text=f"tie within noise at {len(ties)} point(s) (the simplest tied arm "
                              "taken): " + "; ".join(dict.fromkeys(", ".join(t) for t in ties.tied))))
    mine = divergence[divergence.workload == workload] if len(divergence) else divergence
    if len(mine):
        out.append(Caveat(tag="outputs differ", text="outputs differ from the reference arm for "
                          + ", ".join(sorted(set(mine.arm))) + ": not a like-for-like comparison"))
    if len(failures):
        failed = sorted(set(map(str, failures.arm)))
        out.append(Caveat(tag="failed: " + ", ".join(failed), text="failed configurations: " + ", ".join(failed)))
    stopped = stops[stops.workload == workload] if len(stops) else stops
    if len(stopped):
        out.append(Caveat(tag="", text="stopped early by the race: " + ", ".join(stopped.arm)))
    if deploy is not None and deploy.engine_args is None:
        out.append(Caveat(tag="", text="no engine arguments: this run's engines table does not record what its "
                          "engines ran (engines.vllm_args_json, written since the runner records it); re-run the "
                          "arm to get them"))
    out += [Caveat(tag="", text=t) for t in data_file_caveats(trials[trials.workload == workload])]
    return tuple(out)


def tags_text(caveats: tuple[Caveat, ...]) -> tuple[str, str]:
    """The Answer table's caveat cell: in full and in brief (failed arms counted)."""
    tags = [c.tag for c in caveats if c.tag]
    if not tags:
        return "–", "–"
    brief = [t if not t.startswith("failed: ") else f"{len(t.split(', '))} arm(s) failed" for t in tags]
    return ", ".join(tags), ", ".join(brief)
