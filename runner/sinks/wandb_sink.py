"""W&B export of a run's Parquet record: one W&B run per trial, one per sweep with the files as an artifact.

Runs are grouped by "<sweep>/<run id>" (job type = workload for trials, "sweep" for the sweep run). A trial's
run holds the full config (trial keys, engine settings, engine arguments, workload params), the trial summary
(every scalar column of trials.parquet, acceptance per draft position, and the engine's memory/KV figures
under engine/*) and its requests as a Table. The sweep run holds the engines and trials tables and
engines/trials/requests.parquet (and any parts not compacted) + config.yaml as one artifact. Offline by
default (files under <run dir>/wandb; `wandb sync <run dir>/wandb/offline-run-*` uploads them later);
tracking=wandb_online logs online.

When: all at once at the end of the sweep, from the Parquet files, not per trial as results arrive.
Measured here (2 CPU cores, wandb 0.31.0, offline): `import wandb` 0.7 s idle, 1.5 s under load; the first
trial's run 0.6 s idle (1.5 s under load: wandb.init starts the wandb-core service process); every later
trial (init + summary + requests Table + finish) 0.06 s with the settings below (0.15 s with W&B's default
stats sampler and metadata capture); the sweep run with its artifact 0.1 s. That is not seconds, so the
cost alone would allow logging inline; three other things decide it:
- Measurement isolation. wandb-core is a separate process that writes files (and, unless disabled,
  samples system stats). On a CPU host the engines share a few cores with it, and with several engines at
  once (one per GPU) the driver would log one engine's trial while another is being measured. Exporting
  after the last trial costs the measurements nothing.
- Parquet is the record. Exporting from the files makes W&B show exactly what the report reads, and a trial
  that missed W&B (a crash, W&B down, an interrupted export) is exported by the next invocation of the same
  run, or by `python -m runner.sinks.wandb_sink <run dir>`. A ledger (<run dir>/wandb/exported.json) keeps
  a trial from being exported twice; a re-run trial (retry_failed) is exported again under a new id.
- Failure is cheap. The first W&B error stops the export with one warning that names the retry command
  (no 90 s init timeout per trial when the network is down); the Parquet files are never touched.
The cost is no live W&B dashboard while a sweep runs (the terminal and the Parquet files are live), and
a few seconds at the end of the sweep (8 trials: 2.9 s in all, import included).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from runner.spec_arm import row_spec
from runner.schema import EngineSettings, EngineStatus, RequestRecord, TrialRecord, TrialStatus, column_names

LEDGER = "exported.json"
ENGINE_SUMMARY_KEYS = ("status", "failure_kind", "failure_reason", "load_s", "kv_capacity_tokens", "num_kv_blocks",
                       "block_size", "max_concurrency_at_max_len", "weights_gib", "kv_budget_gib", "memory_source",
                       "vllm_version", "device_name", "device_kind", "hostname")
TRIAL_CONFIG_KEYS = ("sweep", "run_id", "trial_id", "engine_id", "workload", "workload_params_json", "api",
                     "concurrency", "repeat", *column_names(EngineSettings))
REQUEST_TABLE_COLUMNS = [f.name for f in dataclasses.fields(RequestRecord)
                         if f.name not in ("sweep", "run_id", "trial_id", "engine_id", "itl_s", "chunk_sizes",
                                           "output_token_ids")]


@dataclass(kw_only=True)
class ExportResult:
    exported: int = 0
    skipped: int = 0
    failed: bool = False
    seconds: float = 0.0
    error: str | None = None


def _scalar(value) -> bool:
    return value is None or isinstance(value, (int, float, str, bool))


def _clean(value):
    """NaN → None, numpy scalars → Python (W&B's JSON and Parquet's pandas floats disagree on NaN)."""
    if hasattr(value, "item") and not isinstance(value, (list, dict)):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def trial_config(trial: dict, engine: dict | None, *, label: str | None = None) -> dict:
    """The trial's full configuration: its keys, engine settings and arguments, workload params, and the
    engine's label among the run's engines (runner.labels)."""
    config = {k: _clean(trial.get(k)) for k in TRIAL_CONFIG_KEYS}
    config["workload_params"] = json.loads(trial.get("workload_params_json") or "{}")
    config["engine_args"] = json.loads(trial.get("engine_args_json") or "{}")
    config["spec"] = row_spec(trial).arm.label
    config["engine_label"] = label or config["spec"]
    if engine:
        config["device_name"] = engine.get("device_name")
        config["vllm_version"] = engine.get("vllm_version")
    return config


def trial_summary(trial: dict, engine: dict | None) -> dict:
    """Every scalar result of the trial, acceptance per position, and the engine's memory/KV figures."""
    summary = {}
    for name in column_names(TrialRecord):
        value = _clean(trial.get(name))
        if name not in TRIAL_CONFIG_KEYS and _scalar(value):
            summary[name] = value
    for i, rate in enumerate(trial.get("spec_acceptance_per_position") or []):
        summary[f"spec_acceptance_pos{i + 1}"] = _clean(rate)
    for key in ENGINE_SUMMARY_KEYS:
        summary[f"engine/{key}"] = _clean((engine or {}).get(key))
    return summary


def _run_id(*parts: str) -> str:
    """A W&B run id: letters, digits, - and _ only, at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", "-".join(parts))[:64]


def _fingerprint(trial: dict) -> str:
    return f"{trial.get('status')}:{_clean(trial.get('started_at'))}:{trial.get('attempts')}"


def _read_table(run_dir: Path, table: str) -> list[dict]:
    from runner.sinks.parquet import has_table, read_rows

    return read_rows(run_dir, table) if has_table(run_dir, table) else []


def _read_requests(run_dir: Path) -> dict[str, list[dict]]:
    from runner.sinks.parquet import has_table, read_rows

    if not has_table(run_dir, "requests"):
        return {}
    by_trial: dict[str, list[dict]] = {}
    for row in read_rows(run_dir, "requests", ["trial_id", *REQUEST_TABLE_COLUMNS]):
        by_trial.setdefault(row["trial_id"], []).append(row)
    return by_trial


class _Ledger:
    """Which trials are already in W&B, so an export after a resume or a failure sends only the rest."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / "wandb" / LEDGER
        self.entries: dict[str, dict] = json.loads(self.path.read_text()) if self.path.exists() else {}

    def exported(self, trial: dict) -> bool:
        entry = self.entries.get(trial["trial_id"])
        return bool(entry) and entry.get("fingerprint") == _fingerprint(trial)

    def exports_of(self, trial_id: str) -> int:
        return int(self.entries.get(trial_id, {}).get("exports", 0))

    def record(self, trial: dict, wandb_id: str) -> None:
        self.entries[trial["trial_id"]] = {"fingerprint": _fingerprint(trial), "wandb_id": wandb_id,
                                           "exports": self.exports_of(trial["trial_id"]) + 1}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{LEDGER}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.entries, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


@dataclass(kw_only=True)
class WandbTarget:
    mode: str = "offline"
    project: str = "vllm-sweeps"
    entity: str | None = None
    init_timeout_s: float = 60.0


def _settings(wandb, target: WandbTarget):
    # No stats sampler, no code/git/requirements capture: the export must stay cheap and touch nothing else.
    return wandb.Settings(silent=True, console="off", x_disable_stats=True, x_disable_meta=True,
                          disable_git=True, save_code=False, x_save_requirements=False,
                          init_timeout=target.init_timeout_s)


def _init(wandb, target: WandbTarget, *, run_dir: Path, **kwargs):
    return wandb.init(project=target.project, entity=target.entity, mode=target.mode, dir=str(run_dir),
                      settings=_settings(wandb, target), reinit="finish_previous", **kwargs)


def _export_trial(wandb, target: WandbTarget, *, run_dir: Path, group: str, trial: dict, engine: dict | None,
                  requests: list[dict], wandb_id: str, label: str | None = None) -> None:
    config = trial_config(trial, engine, label=label)
    run = _init(wandb, target, run_dir=run_dir, group=group, job_type=trial["workload"], id=wandb_id,
                name=f"{trial['workload']}-{config['engine_label'].replace(' ', '-')}-c{trial['concurrency']}"
                     f"-r{trial['repeat']}",
                config=config)
    try:
        run.summary.update(trial_summary(trial, engine))
        if requests:
            table = wandb.Table(columns=REQUEST_TABLE_COLUMNS,
                                data=[[_clean(r.get(c)) for c in REQUEST_TABLE_COLUMNS] for r in requests])
            run.log({"requests": table})
    finally:
        run.finish()


def _export_sweep(wandb, target: WandbTarget, *, run_dir: Path, group: str, sweep: str, run_id: str,
                  engines: list[dict], trials: list[dict]) -> None:
    """The sweep's own run: engines and trials tables, and the Parquet files + config as one artifact."""
    config = {}
    config_path = run_dir / "config.yaml"
    if config_path.exists():
        import yaml

        config = yaml.safe_load(config_path.read_text()) or {}
    run = _init(wandb, target, run_dir=run_dir, group=group, job_type="sweep", name=f"{sweep}-{run_id}",
                id=_run_id(run_id, "sweep", str(int(time.time()))), config=config)
    try:
        run.summary.update({"trials_ok": sum(t["status"] == TrialStatus.OK for t in trials),
                            "trials_failed": sum(t["status"] != TrialStatus.OK for t in trials),
                            "engines_ok": sum(e["status"] == EngineStatus.OK for e in engines),
                            "engines_failed": sum(e["status"] != EngineStatus.OK for e in engines)})
        answer = _read_answer(run_dir)
        if answer:
            rows = answer["answer"]
            run.log({"answer": wandb.Table(columns=list(rows[0]), data=[list(r.values()) for r in rows])})
            # The deploy per workload is the answer's own (answer.json "deploy"), not a table cell's words.
            deploy = answer.get("deploy") or {}
            run.summary.update({f"answer/{w}": d.get("choice") or "none" for w, d in deploy.items()})
            run.summary.update({f"answer/{w}/vllm_serve": d["vllm_serve"] for w, d in deploy.items()
                                if d.get("vllm_serve")})
            if answer.get("draft_count"):
                run.summary["answer/draft_count"] = "\n".join(answer["draft_count"])
        for name, rows in (("engines", engines), ("trials", trials)):
            if rows:
                columns = [c for c in rows[0] if _scalar(_clean(rows[0][c])) or rows[0][c] is None]
                run.log({name: wandb.Table(columns=columns, data=[[_clean(r[c]) for c in columns] for r in rows])})
        artifact = wandb.Artifact(name=_run_id("results", sweep, run_id), type="results",
                                  description="engines/trials/requests.parquet and the resolved config")
        for name in ("engines.parquet", "trials.parquet", "requests.parquet", "config.yaml"):
            if (run_dir / name).exists():
                artifact.add_file(str(run_dir / name), name=name)
        from runner.sinks.parquet import part_files

        for table in ("engines", "trials", "requests"):  # parts not compacted (yet): as they are
            for _, path in part_files(run_dir, table):
                artifact.add_file(str(path), name=f"{table}/{path.name}")
        run.log_artifact(artifact)
    finally:
        run.finish()


def _read_answer(run_dir: Path) -> dict | None:
    """The report's Answer (answer.json, written before the export when the sweep completes); None without one."""
    path = run_dir / "answer.json"
    try:
        answer = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return answer if answer.get("answer") else None


def export_run(*, run_dir: Path, target: WandbTarget = WandbTarget(), echo: bool = True) -> ExportResult:
    """Exports every trial of run_dir's Parquet files not yet in W&B; never raises over a W&B failure."""
    run_dir = Path(run_dir)
    result = ExportResult()
    start = time.perf_counter()
    trials = _read_table(run_dir, "trials")
    engines = _read_table(run_dir, "engines")
    ledger = _Ledger(run_dir)
    todo = [t for t in trials if not ledger.exported(t)]
    result.skipped = len(trials) - len(todo)
    if not todo:
        return result
    os.environ.setdefault("WANDB_SILENT", "true")
    try:
        import wandb

        engine_of = {e["engine_id"]: e for e in engines}
        from runner.labels import labels_of_rows

        label_of = labels_of_rows(trials)
        requests = _read_requests(run_dir)
        sweep, run_id = todo[0]["sweep"], todo[0]["run_id"]
        group = f"{sweep}/{run_id}"
        for trial in todo:
            n = ledger.exports_of(trial["trial_id"])
            wandb_id = _run_id(run_id, trial["trial_id"], *([f"x{n}"] if n else []))
            _export_trial(wandb, target, run_dir=run_dir, group=group, trial=trial,
                          engine=engine_of.get(trial["engine_id"]), requests=requests.get(trial["trial_id"], []),
                          wandb_id=wandb_id, label=label_of.get(trial["engine_id"]))
            ledger.record(trial, wandb_id)
            result.exported += 1
        _export_sweep(wandb, target, run_dir=run_dir, group=group, sweep=sweep, run_id=run_id, engines=engines,
                      trials=trials)
    except (Exception, KeyboardInterrupt) as exc:  # W&B never costs a result: Parquet is the record
        result.failed = True
        result.error = f"{type(exc).__name__}: {exc}"
        print(f"warning: W&B export stopped after {result.exported} of {len(todo)} trials ({result.error}); "
              f"the results are in {run_dir}; retry: python -m runner.sinks.wandb_sink {run_dir}", file=sys.stderr)
    finally:
        _teardown()
    result.seconds = time.perf_counter() - start
    if echo and not result.failed:
        where = f"{run_dir / 'wandb'} (offline; upload: wandb sync {run_dir / 'wandb'}/offline-run-*)" \
            if target.mode == "offline" else f"project {target.project}"
        print(f"W&B: {result.exported} trial run(s) + 1 sweep run in {result.seconds:.1f} s → {where}")
    return result


def _teardown() -> None:
    try:
        import wandb

        wandb.teardown()
    except Exception:
        pass


class WandbTracker:
    """The scheduler's tracking hooks: results are exported from Parquet when the sweep ends (see above)."""

    def __init__(self, *, tracking, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.target = WandbTarget(mode=tracking.mode, project=tracking.project, entity=tracking.entity,
                                  init_timeout_s=float(tracking.init_timeout_s))

    def log_engine(self, record) -> None:
        pass  # in engines.parquet already; exported at finish()

    def log_trial(self, record, requests) -> None:
        pass  # in trials/requests.parquet already; exported at finish()

    def finish(self) -> ExportResult:
        return export_run(run_dir=self.run_dir, target=self.target)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m runner.sinks.wandb_sink",
                                     description="Export a results folder's trials to W&B (those not yet exported).")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--mode", default="offline", choices=["offline", "online"])
    parser.add_argument("--project", default="vllm-sweeps")
    parser.add_argument("--entity", default=None)
    args = parser.parse_args(argv)
    result = export_run(run_dir=args.run_dir, target=WandbTarget(mode=args.mode, project=args.project,
                                                                 entity=args.entity))
    if not result.exported and not result.failed:
        print(f"W&B: nothing to export ({result.skipped} trial(s) already exported)")
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
