"""A small hand-made results folder (two arms, three trials) for the W&B export tests."""
from __future__ import annotations

from pathlib import Path

from runner.schema import EngineRecord, RequestRecord, TrialRecord
from runner.sinks.result_sink import ParquetSink


def engine_record(arm: str) -> EngineRecord:
    method, k = ("off", 0) if arm == "off" else ("mtp", int(arm[-1]))
    return EngineRecord(model="m", spec_method=method, num_speculative_tokens=k, sweep="fx", run_id="r1",
                        engine_id=f"e-{arm}", status="ok", kv_capacity_tokens=699008, num_kv_blocks=5461,
                        block_size=128, weights_gib=0.004, kv_budget_gib=1.0, load_s=20.5, device_name="cpu")


def trial_record(arm: str, *, concurrency: int, tok_s: float, started_at: float = 1.0) -> TrialRecord:
    e = engine_record(arm)
    return TrialRecord(model="m", spec_method=e.spec_method, num_speculative_tokens=e.num_speculative_tokens,
                       sweep="fx", run_id="r1", trial_id=f"t-{arm}-c{concurrency}", engine_id=e.engine_id,
                       workload="decode", workload_params_json='{"input_len": 64, "output_len": 8}',
                       concurrency=concurrency, num_requests=concurrency, decode_tok_s_per_session=tok_s,
                       ttft_p50_s=0.05, started_at=started_at,
                       spec_acceptance_per_position=[0.75, 0.5] if arm != "off" else [])


def request_records(trial: TrialRecord) -> list[RequestRecord]:
    return [RequestRecord(sweep="fx", run_id="r1", trial_id=trial.trial_id, engine_id=trial.engine_id,
                          request_index=i, session=i, prompt_tokens=64, output_tokens=8, ttft_s=0.05 + i / 100,
                          itl_s=[0.01] * 7, output_token_ids=list(range(8)), output_hash="abc")
            for i in range(trial.concurrency)]


def write_run_dir(run_dir: Path) -> Path:
    """Engines off and mtp:2, trials off c=1, off c=2 and mtp:2 c=1, with config.yaml, in run_dir."""
    sink = ParquetSink(run_dir)
    for arm in ("off", "mtp:2"):
        sink.write_engine(engine_record(arm))
    for arm, c, speed in (("off", 1, 400.0), ("off", 2, 300.0), ("mtp:2", 1, 150.0)):
        t = trial_record(arm, concurrency=c, tok_s=speed)
        sink.write_trial(t, request_records(t))
    (run_dir / "config.yaml").write_text("sweep:\n  name: fx\nrun: r1\n")
    return run_dir
