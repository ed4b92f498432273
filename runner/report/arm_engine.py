"""An arm's engine as a deployment takes it, built for the k its trials ran, never the engine's. Pure.

One engine may run several arms (runner.plan.draft_hosts: the largest-k engine runs every smaller k, its draft
count set between trials), so an arm is not always an engine row: its trials name the engine that ran them
(engine_id) and the k or schedule they ran (num_speculative_tokens, spec_schedule). The arm's engine arguments are
that engine's (engines.vllm_args_json) with its speculative_config set to the arm's k and schedule: a k=1 choice
ships k=1's flags.
"""
from __future__ import annotations

import json
from typing import Optional

import pandas as pd

from runner.spec_arm import row_spec
from runner.vllm.spec_config import with_draft

ARM_COLUMNS = ["arm", "k", "arm_order"]


def arm_rows(engines: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Every arm once (arm, k, arm_order): the engines' and those only trials name."""
    frames = [f[ARM_COLUMNS] for f in (engines, trials) if len(f) and set(ARM_COLUMNS) <= set(f.columns)]
    if not frames:
        return pd.DataFrame(columns=ARM_COLUMNS)
    return pd.concat(frames, ignore_index=True).dropna(subset=["arm"]).drop_duplicates("arm")


def arm_engine(choice: str, *, engines: pd.DataFrame, trials: pd.DataFrame) -> Optional[dict]:
    """The engine row of the arm `choice` as its trials ran it (None: no engine row for it)."""
    ran = trials[trials.arm == choice] if len(trials) and "arm" in trials else trials.iloc[0:0]
    if len(ran):
        trial = ran.iloc[0].to_dict()
        hosts = engines[(engines.engine_id == trial["engine_id"]) & (engines.source == trial["source"])]
        if len(hosts):
            return for_trial(hosts.iloc[0].to_dict(), trial)
    rows = engines[engines.arm == choice] if len(engines) else engines
    return rows.iloc[0].to_dict() if len(rows) else None


def for_trial(engine: dict, trial: dict) -> dict:
    """The engine row with the trial's arm: its k and schedule, and its arguments' speculative_config."""
    spec = row_spec(trial)
    if spec.method == "off" or (not spec.set_live and row_spec(engine).schedule == spec.schedule):
        return engine
    out = dict(engine, num_speculative_tokens=spec.k, spec_schedule=spec.schedule, arm=trial.get("arm"))
    text = engine.get("vllm_args_json")
    if isinstance(text, str) and text:
        args = json.loads(text)
        args["speculative_config"] = with_draft(args.get("speculative_config"), k=spec.k,
                                                schedule=json.loads(spec.schedule) if spec.schedule else None)
        out["vllm_args_json"] = json.dumps(args, sort_keys=True, separators=(",", ":"))
    return out
