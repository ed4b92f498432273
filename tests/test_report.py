"""Reports over hand-made Parquet results whose right answers are known, and one over a real CPU sweep."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from runner.report.build import analyse, write_report
from runner.report.load import load_results
from runner.report.verdict import CAPACITY_OUTCOME, TIE_OUTCOME, TOO_FEW_OUTCOME, choose_k
from runner.schema import EngineRecord, RequestRecord, TrialRecord
from runner.sinks.parquet import table_path, write_atomic

ROOT = Path(__file__).resolve().parents[1]
DECODE = {"input_len": 128, "output_len": 64}


class Sweep:
    """Builds engines/trials/requests rows for one results folder, by arm name."""

    def __init__(self, run_id: str = "fixture", *, device: str = "cpu-fixture"):
        self.run_id, self.device = run_id, device
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


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory) -> Path:
    s = decode_study()
    for arm in ("off", "mtp:1"):
        s.engines[arm].kv_capacity_tokens = 100_000
    return multi_turn_study(s).write(tmp_path_factory.mktemp("fx") / "fixture")


@pytest.fixture(scope="module")
def analysis(fixture_dir):
    return analyse(load_results([fixture_dir]))


def _outcome(analysis, workload: str, concurrency: int, **params) -> str:
    o = analysis.outcomes[(analysis.outcomes.workload == workload) & (analysis.outcomes.concurrency == concurrency)]
    for key, value in params.items():
        o = o[[json.loads(p)[key] == value for p in o.workload_params_json]]
    assert len(o) == 1
    return o.iloc[0].outcome


def test_choose_k_within_noise_is_a_tie_and_the_smaller_k_wins():
    candidates = pd.DataFrame({"k": [0, 1, 2], "n": [3, 3, 3],
                               "values": [[100, 101, 99], [149, 150, 151], [150.5, 149.5, 151.5]]})
    candidates["median"] = [float(np.median(v)) for v in candidates["values"]]
    assert choose_k(candidates, higher_is_better=True) == {"best_k": 1, "leader_k": 2, "tied": [1, 2], "n_min": 3}
    lower = pd.DataFrame({"k": [0, 2], "n": [3, 1], "values": [[1.0, 1.0, 1.1], [0.5]], "median": [1.0, 0.5]})
    assert choose_k(lower, higher_is_better=False) == {"best_k": None, "leader_k": 2, "tied": [2], "n_min": 1}


def test_tie_between_k1_and_k2_picks_k1(analysis):
    choices = analysis.draft_choices[(analysis.draft_choices.workload == "decode")]
    at_c1 = choices[choices.concurrency == 1].iloc[0]
    assert at_c1.tied == [1, 2] and at_c1.best_k == 1
    assert choices[choices.concurrency == 16].iloc[0].best_k == 0  # spec off wins at 16 sessions
    row = analysis.draft_summary[analysis.draft_summary.workload == "decode"].iloc[0]
    assert "k=1 at c=1, 4" in row["best k"] and "k=0 (off) at c=16" in row["best k"]
    assert "ties" in row.notes and "fewer than" not in row.notes and row["single k"] == "1"


def test_verdict_tie_and_crossover(analysis):
    # mtp:1 vs mtp:2 medians: 150 vs 150.5 (c=1) and 120 vs 120.5 (c=4): inside the 2% tie band.
    assert _outcome(analysis, "decode", 1) == TIE_OUTCOME
    assert _outcome(analysis, "decode", 16) == "off"
    cross = analysis.crossovers[analysis.crossovers.workload == "decode"]
    assert cross[["axis", "between", "from", "to"]].values.tolist() == [["c", "4 → 16", TIE_OUTCOME, "off"]]
    verdict = analysis.verdict[analysis.verdict.workload == "decode"].set_index("winner")
    assert verdict.loc["off", "over"] == "c=16"
    assert verdict.loc["off", "by how much"].startswith("1.25× over mtp:1")
    lo, hi = map(float, verdict.loc["off", "95% interval"].rstrip("×").split("–"))
    assert 1.02 < lo <= 1.25 <= hi  # off [49, 50, 51] against mtp:1 [39, 40, 41]
    assert verdict.loc[TIE_OUTCOME, "over"] == "c=1, 4"
    assert "failed: mtp:3" in verdict.loc["off", "notes"]


def test_capacity_wall_is_flagged_not_read_as_a_win(analysis):
    walled = analysis.capacity[analysis.capacity.workload == "multi_turn"]
    assert set(walled.concurrency) == {8}
    assert {json.loads(p)["context_len"] for p in walled.workload_params_json} == {16384}
    # 8 sessions × (16384 + 2·1088 + 64) = 148,992 live tokens against a 100,000-token pool.
    assert walled.demand_tokens.iloc[0] == 8 * (16384 + 2 * 1088 + 64)
    assert _outcome(analysis, "multi_turn", 8, context_len=16384) == CAPACITY_OUTCOME
    # One repeat: off leads by 7.5× on the numbers, but no winner is named.
    assert _outcome(analysis, "multi_turn", 8, context_len=4096) == TOO_FEW_OUTCOME
    row = analysis.verdict[(analysis.verdict.workload == "multi_turn")
                           & (analysis.verdict.winner == TOO_FEW_OUTCOME)].iloc[0]
    assert "off / mtp:1 7.50×" in row["by how much"]  # turn-1 TTFT 1.5 s vs 0.2 s decides, not the trial's 1.0 s
    assert "1 repeat(s): below 3, no winner (fix: sweep.repeats=3)" in row.notes


def test_divergence_is_found_per_request(analysis):
    d = analysis.divergence
    assert len(d) == 1
    row = d.iloc[0]
    assert (row.workload, row.concurrency, row["repeat"], row.arm, row.reference) == ("decode", 4, 0, "mtp:2", "off")
    assert (row.requests_differing, row.requests_compared) == (1, 4)
    tie = analysis.verdict[(analysis.verdict.workload == "decode") & (analysis.verdict.winner == TIE_OUTCOME)]
    assert "outputs differ: mtp:2 vs off" in tie.iloc[0].notes


def test_failed_configuration_keeps_its_reason(analysis):
    f = analysis.failures
    assert f.values.tolist() == [["mtp:3", "engine start", "kv_cache_too_small",
                                  "not enough KV cache for max_model_len", "needed_gib=2.47", 9]]


def test_too_few_repeats_is_said(analysis):
    row = analysis.draft_summary[analysis.draft_summary.workload == "multi_turn"].iloc[0]
    assert "fewer than 3" in row.notes and "sweep.repeats=3" in row.notes


def test_bandwidth_share_on_a_known_device(tmp_path):
    s = Sweep(device="NVIDIA H200")
    s.engine("off", weights_gib=12.42)
    s.trial("off", tok_s=210.0)
    a = analyse(load_results([s.write(tmp_path / "h200")]))
    share = a.bandwidth.iloc[0]
    assert share.bound_tok_s == pytest.approx(4.8e12 / (12.42 * 2**30))
    assert share.share == pytest.approx(0.58, abs=0.01)  # the reference figure: ~58% at bs1


def test_fixed_task_runs_count_as_repeats(tmp_path):
    """One trial per arm with a warm-up and 3 measured runs: the runs are the samples (1 / TPOT)."""
    s = Sweep()
    params = {"input_len": 512, "output_len": 256, "runs": 3}
    for arm, tpots in (("off", [0.0130, 0.0129, 0.0131]), ("mtp:2", [0.0067, 0.0068, 0.0066])):
        s.engine(arm)
        runs = [{"turn": 0, "phase": "warmup", "prompt_tokens": 512, "output_tokens": 256, "tpot_s": 0.5,
                 "output_hash": "w"}]
        runs += [{"turn": i + 1, "phase": "measured", "prompt_tokens": 512, "output_tokens": 256, "tpot_s": t,
                  "output_hash": "x"} for i, t in enumerate(tpots)]
        s.trial(arm, workload="fixed_task", params=params, requests=runs, tok_s=1.0)
    a = analyse(load_results([s.write(tmp_path / "fixed")]))
    points = a.points.set_index("arm")
    assert points.loc["off", "n"] == 3 and points.loc["off", "median"] == pytest.approx(1 / 0.0130)
    row = a.verdict.iloc[0]
    assert row.winner == "mtp:2" and row["by how much"].startswith("1.94× over off") and row.notes == ""
    assert row["95% interval"] != "–"
    assert a.draft_summary.iloc[0]["best k"].startswith("k=2") and a.draft_summary.iloc[0].repeats == 3


def test_two_folders_are_compared_with_the_folder_in_the_arm(tmp_path):
    for name, speed in (("run_a", 100.0), ("run_b", 130.0)):
        s = Sweep(run_id=name)
        s.engine("off")
        s.trial("off", tok_s=speed)
        s.write(tmp_path / name)
    a = analyse(load_results([tmp_path / "run_a", tmp_path / "run_b"]))
    assert set(a.points.arm) == {"off @run_a", "off @run_b"}
    assert a.verdict.iloc[0].winner == TOO_FEW_OUTCOME  # one repeat each: the ratio is shown, no winner
    assert a.verdict.iloc[0]["by how much"] == "ahead on the numbers: off @run_b / off @run_a 1.30×"


def test_write_report_files_and_cli(fixture_dir, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(fixture_dir), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().splitlines()[-1].startswith("| multi_turn")  # the verdict table ends the output
    assert "verdict:" in proc.stdout and "| decode | tie within noise" in proc.stdout
    text = (out / "report.md").read_text()
    for heading in ("## Verdict", "## Crossovers", "## Best draft count", "## Capacity-wall flags",
                    "## Output divergence", "## Failed configurations", "## Plots", "## Recommendation",
                    "## Under a latency target", "## Pareto"):
        assert heading in text
    names = {p.name for p in out.glob("*.png")}
    assert names == {"decode_vs_concurrency.png", "multi_turn_vs_concurrency.png", "acceptance_per_position.png",
                     "kv_capacity.png", "decode_pareto.png"}
    assert (out / "recommendation.yaml").exists()
    assert not (fixture_dir / "report.md").exists()  # --out was honoured; the data folder is untouched


def test_missing_folder_is_an_error_not_a_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "runner.report", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "no results" in proc.stderr


@pytest.mark.engine
def test_report_on_a_real_cpu_sweep(small_sweep, tmp_path):
    run_dir, proc = small_sweep
    assert "verdict:" in proc.stdout  # the sweep's own end-of-run report
    assert (run_dir / "report.md").exists()
    report = write_report(run_dirs=[run_dir], out_dir=tmp_path)
    a = report.analysis
    assert set(a.points.arm) == {"off", "mtp:2"}
    assert len(a.verdict) >= 1 and set(a.verdict.workload) == {"decode"}
    assert not len(a.capacity)  # 2 sessions × ~88 tokens against a pool of hundreds of thousands
    assert len(a.draft_summary) == 1 and "fewer than 3" in a.draft_summary.iloc[0].notes
    assert (tmp_path / "recommendation.yaml").exists()
    assert {p.name for p in report.plots} >= {"decode_vs_concurrency.png", "acceptance_per_position.png",
                                              "kv_capacity.png"}
