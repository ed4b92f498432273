"""W&B: one run per trial, grouped by sweep and run id; offline by default.

Per-trial runs (rather than one per engine with a step per trial) make every trial
a row in W&B's run table, so its config columns (spec method, k, prefix caching,
concurrency, workload) can be filtered, grouped and plotted against each other.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

_SKIP_SUMMARY = {"spec_acceptance_per_position"}


class WandbTracker:
    def __init__(self, *, tracking: dict, keys, run_dir: Path, plan):
        import wandb  # noqa: F401  (fail early: the caller falls back to no tracking)

        self.mode = tracking.get("mode", "offline")
        self.project = tracking.get("project", "vllm-sweeps")
        self.entity = tracking.get("entity")
        self.keys = keys
        self.run_dir = Path(run_dir)
        self.engines: dict[str, dict] = {}
        self.failures = 0
        os.environ.setdefault("WANDB_SILENT", "true")
        os.environ.setdefault("WANDB_CONSOLE", "off")

    def log_engine(self, record) -> None:
        self.engines[record.engine_id] = dataclasses.asdict(record)

    def log_trial(self, record, requests) -> None:
        try:
            self._log_trial(record, requests)
        except Exception as exc:  # never lose or block results over tracking
            self.failures += 1
            print(f"warning: W&B logging failed for {record.trial_id}: {type(exc).__name__}: {exc}", file=sys.stderr)

    def _log_trial(self, record, requests) -> None:
        import wandb

        row = dataclasses.asdict(record)
        config = {k: v for k, v in row.items() if k in _CONFIG_KEYS}
        config["workload_params"] = json.loads(row["workload_params_json"])
        config["engine"] = self.engines.get(record.engine_id, {})
        run = wandb.init(project=self.project, entity=self.entity, mode=self.mode, dir=str(self.run_dir),
                         group=f"{self.keys.sweep}/{self.keys.run_id}", job_type=record.workload,
                         name=f"{record.workload}-{record.trial_id}", id=f"{self.keys.run_id}-{record.trial_id}"[:64],
                         config=config, reinit="finish_previous", resume="allow")
        summary = {k: v for k, v in row.items() if k not in _CONFIG_KEYS and k not in _SKIP_SUMMARY
                   and (v is None or isinstance(v, (int, float, str, bool)))}
        for i, rate in enumerate(row.get("spec_acceptance_per_position") or []):
            summary[f"spec_acceptance_pos{i}"] = rate
        engine = self.engines.get(record.engine_id, {})
        for key in ("kv_capacity_tokens", "weights_gib", "kv_budget_gib", "load_s"):
            summary[f"engine/{key}"] = engine.get(key)
        run.summary.update(summary)
        if requests:
            columns = ["request_index", "session", "turn", "phase", "prompt_tokens", "output_tokens",
                       "cached_tokens", "ttft_s", "tpot_s", "e2e_s"]
            table = wandb.Table(columns=columns,
                                data=[[getattr(r, c) for c in columns] for r in requests])
            run.log({"requests": table})
        run.finish()

    def finish(self) -> None:
        pass


_CONFIG_KEYS = {
    "sweep", "run_id", "trial_id", "engine_id", "workload", "api", "concurrency", "repeat", "model",
    "spec_method", "num_speculative_tokens", "enable_prefix_caching", "gpu_memory_utilization",
    "max_model_len", "tensor_parallel_size", "engine_args_json", "workload_params_json",
}
