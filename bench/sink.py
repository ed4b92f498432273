"""What a trial's results cost to write as a sweep grows: bytes and seconds per trial, early vs late.

`python bench/sink.py [--trials 200] [--requests 32] [--tokens 64]`

A ParquetSink in a temporary folder receives synthetic trials (each with `--requests` request rows carrying
`--tokens` output token ids and as many ITL values, built with runner.schema's dataclasses), plus one phase
row per trial and an engine row every 50 trials, the way the scheduler writes them. Bytes written by a
trial = the sizes of the files its writes created or replaced (taken from the folder before and after);
seconds = wall time of its writes. Figures for trials 1-10, 91-100 and 191-200 (scaled to --trials), the
ratio last/first, and the compaction at the end. Prints figures only; nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.schema import EngineRecord, PhaseRecord, RequestRecord, TrialRecord  # noqa: E402
from runner.sinks.parquet import read_table  # noqa: E402
from runner.sinks.result_sink import ParquetSink  # noqa: E402


def files(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under folder: (inode, mtime ns, size), so a rewritten file counts as written again."""
    out = {}
    for dirpath, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            out[path] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return out


def written(before: dict, after: dict) -> int:
    return sum(stat[2] for path, stat in after.items() if before.get(path) != stat)


def trial(i: int, *, requests: int, tokens: int) -> tuple[TrialRecord, list[RequestRecord]]:
    trial_id = f"t-{i:05d}"
    engine_id = f"e-{i // 50}"
    rows = [RequestRecord(sweep="bench", run_id="r", trial_id=trial_id, engine_id=engine_id, request_index=j,
                          session=j, prompt_tokens=128, output_tokens=tokens, cached_tokens=0,
                          start_offset_s=0.001 * j, ttft_s=0.05 + 0.001 * j, e2e_s=0.05 + 0.01 * tokens,
                          tpot_s=0.01, itl_s=[0.01 + 1e-5 * ((i + j + k) % 97) for k in range(tokens)],
                          chunk_sizes=[1] * tokens, output_hash=f"{i:08x}{j:08x}",
                          output_token_ids=[(i * 7919 + j * 104729 + k * 31) % 151_000 for k in range(tokens)])
            for j in range(requests)]
    record = TrialRecord(model="m", sweep="bench", run_id="r", trial_id=trial_id, engine_id=engine_id,
                         workload="decode", workload_params_json='{"input_len": 128, "output_len": 64}',
                         concurrency=requests, repeat=0, num_requests=requests, output_tokens_total=requests * tokens,
                         prompt_tokens_total=requests * 128, started_at=time.time(), duration_s=1.0,
                         ttft_p50_s=0.05, tpot_p50_s=0.01, decode_tok_s_aggregate=float(requests * tokens),
                         spec_acceptance_per_position=[0.8, 0.6], output_hash=f"{i:016x}")
    return record, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    n = args.trials
    windows = {"first": range(0, min(10, n)), "middle": range(max(0, n // 2 - 10), n // 2),
               "last": range(max(0, n - 10), n)}
    folder = Path(tempfile.mkdtemp(prefix="bench-sink-"))
    try:
        sink = ParquetSink(folder)
        per_trial: list[tuple[int, float]] = []
        for i in range(n):
            record, requests = trial(i, requests=args.requests, tokens=args.tokens)
            before = files(folder)
            t0 = time.perf_counter()
            if i % 50 == 0:
                sink.write_engine(EngineRecord(model="m", sweep="bench", run_id="r", engine_id=record.engine_id,
                                               status="ok", load_s=10.0))
            sink.write_trial(record, requests)
            sink.write_phase(PhaseRecord(sweep="bench", run_id="r", lane=0, phase="trial",
                                         engine_id=record.engine_id, trial_id=record.trial_id,
                                         started_at=time.time(), duration_s=1.0))
            seconds = time.perf_counter() - t0
            per_trial.append((written(before, files(folder)), seconds))
        total_bytes = sum(b for b, _ in per_trial)
        print(f"ParquetSink, {n} trials × {args.requests} requests × {args.tokens} token ids + {args.tokens} ITLs "
              f"(plus 1 phase row per trial, 1 engine row per 50 trials)")
        print(f"{'trials':>10} {'KiB/trial (median)':>20} {'KiB/trial (mean)':>18} {'ms/trial (median)':>18} "
              f"{'ms/trial (mean)':>16}")
        medians = {}
        for name, window in windows.items():
            b = [per_trial[i][0] / 1024 for i in window]
            s = [per_trial[i][1] * 1000 for i in window]
            medians[name] = (statistics.median(b), statistics.median(s))
            label = f"{window.start + 1}-{window.stop}"
            print(f"{label:>10} {statistics.median(b):>20.1f} {statistics.mean(b):>18.1f} {statistics.median(s):>18.2f} "
                  f"{statistics.mean(s):>16.2f}")
        first, last = medians["first"], medians["last"]
        print(f"ratio last/first (medians): bytes {last[0] / first[0]:.2f}, seconds {last[1] / first[1]:.2f}")
        print(f"written in all: {total_bytes / 2**20:.1f} MiB in {sum(s for _, s in per_trial):.2f} s; "
              f"on disk: {sum(st[2] for st in files(folder).values()) / 2**20:.1f} MiB in {len(files(folder))} files")
        t0 = time.perf_counter()
        folded = sink.compact()
        seconds = time.perf_counter() - t0
        after = files(folder)
        print(f"compaction: {sum(folded.values())} parts → {len(after)} files, "
              f"{sum(st[2] for st in after.values()) / 2**20:.1f} MiB, {seconds:.2f} s")
        t0 = time.perf_counter()
        requests = read_table(folder, "requests", ["trial_id", "ttft_s"]).num_rows
        print(f"read back: {requests} request rows (2 columns) in {time.perf_counter() - t0:.3f} s")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
