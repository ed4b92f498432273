"""Hand-made results folders (engines/trials/requests Parquet) whose right answers are known, for the report tests."""
from __future__ import annotations

import json
from pathlib import Path

from runner.schema import EngineRecord, RequestRecord, TrialRecord
from runner.sinks.parquet import table_path, write_atomic

DECODE = {"input_len": 128, "output_len": 64}


class Sweep:
    """Builds engines/trials/requests rows for one results folder, by arm name."""

    def __init__(self, run_id: str = "fixture", *, device: str = "cpu-fixture", load_format: str = "auto"):
        self.run_id, self.device, self.load_format = run_id, device, load_format
        self.engines: dict[str, EngineRecord] = {}
        self.trials: list[TrialRecord] = []
        self.requests: list[RequestRecord] = []

    def engine(self, arm: str, *, pool: int = 1_000_000, status: str = "ok", weights_gib: float = 1.0,
               **failure) -> str:
        method, k = (arm.split(":") + ["0"])[:2] if ":" in arm else ("off", "0")
        engine_id = f"e-{arm.replace(':', '')}"
        self.engines[arm] = EngineRecord(
            model="m", spec_method=method, num_speculative_tokens=int(k), sweep="fx", run_id=self.run_id,
            engine_id=engine_id, status=status, kv_capacity_tokens=pool if status == "ok" else None,
            weights_gib=weights_gib, device_name=self.device, vllm_version="0.32.0", **failure)
        if status == "ok":  # what the engine ran, as the plan builds it, loaded from a fixture folder
            from runner.config.sections import ModelSection
            from runner.plan.vllm_args import Target, vllm_args

            args = vllm_args(settings=self.engines[arm], engine_args={}, spec_extra={},
                             model=ModelSection(name="m", load_format=self.load_format),
                             target=Target(cuda=False, per_request_metrics=True))
            self.engines[arm].vllm_args_json = args.located(path="/fixture/models/m", tokenizer=None,
                                                            load_format=self.load_format).json
        return engine_id

    def trial(self, arm: str, *, workload: str = "decode", params: dict = DECODE, concurrency: int = 1,
              repeat: int = 0, tok_s: float | None = None, ttft_s: float = 0.1, status: str = "ok",
              output_hash: str = "same", requests: list[dict] | None = None, **columns) -> None:
        e = self.engines[arm]
        trial_id = f"t-{arm.replace(':', '')}-{workload}-{json.dumps(params, sort_keys=True)}-c{concurrency}-r{repeat}"
        requests = requests if requests is not None else [
            {"session": s, "prompt_tokens": params.get("input_len", 100), "output_tokens": params.get("output_len", 10),
             "ttft_s": ttft_s, "output_hash": f"{output_hash}-{s}"} for s in range(concurrency)]
        if status == "ok":
            for i, r in enumerate(requests):
                self.requests.append(RequestRecord(sweep="fx", run_id=self.run_id, trial_id=trial_id,
                                                   engine_id=e.engine_id, request_index=i, **r))
        ok = status == "ok"
        if tok_s is not None and ok:
            columns.setdefault("decode_tok_s_aggregate", tok_s * concurrency)
        self.trials.append(TrialRecord(
            model="m", spec_method=e.spec_method, num_speculative_tokens=e.num_speculative_tokens, sweep="fx",
            run_id=self.run_id, trial_id=trial_id, engine_id=e.engine_id, workload=workload,
            workload_params_json=json.dumps(params, sort_keys=True), concurrency=concurrency, repeat=repeat,
            status=status, num_requests=len(requests) if ok else 0,
            prompt_tokens_total=sum(r["prompt_tokens"] for r in requests) if ok else 0,
            output_tokens_total=sum(r["output_tokens"] for r in requests) if ok else 0,
            decode_tok_s_per_session=tok_s if ok else None, ttft_p50_s=ttft_s if ok else None,
            output_hash=output_hash if ok else None, **columns))

    def write(self, run_dir: Path) -> Path:
        import dataclasses

        run_dir.mkdir(parents=True, exist_ok=True)
        for table, rows in (("engines", list(self.engines.values())), ("trials", self.trials),
                            ("requests", self.requests)):
            write_atomic(rows=[dataclasses.asdict(r) for r in rows], table=table, path=table_path(run_dir, table))
        return run_dir


def decode_study() -> Sweep:
    """off vs mtp:1, mtp:2, mtp:3 (failed) over c ∈ {1, 4, 16}, 3 repeats.

    Known answers: mtp:1 and mtp:2 are within 1% at c=1 and c=4 (a tie: k=1 is chosen); at c=16 off wins
    (a crossover between c=4 and c=16); mtp:2 generates different tokens at c=4 repeat 0 (one request of four);
    mtp:3 failed to start with a reason.
    """
    s = Sweep()
    for arm in ("off", "mtp:1", "mtp:2"):
        s.engine(arm)
    s.engine("mtp:3", status="failed", failure_kind="kv_cache_too_small",
             failure_reason="not enough KV cache for max_model_len", failure_numbers_json='{"needed_gib": 2.47}')
    speeds = {1: {"off": [100, 101, 99], "mtp:1": [150, 151, 149], "mtp:2": [151, 150.5, 150]},
              4: {"off": [80, 80, 80], "mtp:1": [120, 120.5, 119.5], "mtp:2": [120.5, 121, 120]},
              16: {"off": [50, 51, 49], "mtp:1": [40, 41, 39], "mtp:2": [38, 38, 38]}}
    for c, arms in speeds.items():
        for arm, values in arms.items():
            for r, v in enumerate(values):
                hashes = None
                if arm == "mtp:2" and c == 4 and r == 0:
                    hashes = [{"session": i, "prompt_tokens": 128, "output_tokens": 64, "ttft_s": 0.1,
                               "output_hash": "other" if i == 2 else f"same-{i}"} for i in range(4)]
                s.trial(arm, concurrency=c, repeat=r, tok_s=v, requests=hashes,
                        output_hash="different" if hashes else "same",
                        spec_acceptance_per_position=[0.8, 0.5][: int(arm[-1])] if arm != "off" else [])
        for r in range(3):
            s.trial("mtp:3", concurrency=c, repeat=r, status="failed", failure_kind="engine_failed",
                    failure_reason="engine did not start")
    return s


def multi_turn_study(s: Sweep) -> Sweep:
    """off pc vs mtp:1 on multi_turn, 1 repeat, context 4K and 16K, sessions 1 and 8, pool 100K tokens.

    Turn-1 TTFT decides: off (cache) wins at every point; at 16K × 8 sessions the live demand
    (8 × ~18K tokens ≈ 146K) passes the 100K pool: a capacity wall, not a win.
    """
    for context in (4096, 16384):
        params = {"context_len": context, "turns": 3, "turn_tokens": 1024, "output_len": 64}
        for c in (1, 8):
            for arm, follow_up in (("off", 0.2), ("mtp:1", 1.5)):
                requests = [{"session": sess, "turn": t, "prompt_tokens": context + t * 1088, "output_tokens": 64,
                             "ttft_s": 2.0 if t == 0 else follow_up, "output_hash": f"h{sess}{t}"}
                            for sess in range(c) for t in range(3)]
                s.trial(arm, workload="multi_turn", params=params, concurrency=c, ttft_s=1.0, requests=requests)
    return s


def report_fixture(run_dir: Path) -> Path:
    """decode_study and multi_turn_study in one folder, off and mtp:1 with a 100K-token pool."""
    s = decode_study()
    for arm in ("off", "mtp:1"):
        s.engines[arm].kv_capacity_tokens = 100_000
    return multi_turn_study(s).write(run_dir)


def slo_study(*, load_format: str = "auto") -> Sweep:
    """off and mtp:2 at c = 1, 4, 16, 3 repeats. TTFT p99 (ms): off 50, 100, 300; mtp:2 40, 80, 140.
    Aggregate tok/s: off 100, 380, 1200; mtp:2 150, 420, 900. SLO: TTFT p99 ≤ 200 ms.
    Known answers: at c=1 and 4 mtp:2 has the most tok/s per device; at c=16 only mtp:2 meets the SLO.
    off sustains ≈ 4 + (200 − 100) / (300 − 100) × 12 = 10 sessions; mtp:2 every measured point (≥ 16)."""
    s = Sweep(load_format=load_format)
    s.engine("off")
    s.engine("mtp:2")
    figures = {"off": {1: (50, 100), 4: (100, 380), 16: (300, 1200)},
               "mtp:2": {1: (40, 150), 4: (80, 420), 16: (140, 900)}}
    for arm, by_c in figures.items():
        for c, (ttft_ms, aggregate) in by_c.items():
            for r, jitter in enumerate((0.99, 1.0, 1.01)):
                s.trial(arm, concurrency=c, repeat=r, tok_s=aggregate / c * jitter, ttft_p99_s=ttft_ms / 1000,
                        decode_tok_s_aggregate=aggregate * jitter, duration_s=10.0 * c)
    return s
