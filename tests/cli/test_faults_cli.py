"""Atomic Parquet writes: a writer process SIGKILLed at arbitrary moments loses at most the trial in flight.
No engine; it spawns the writer, so it lives beside the CLI tests."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from runner.sinks.parquet import read_frame

from tests.support.cli import ROOT


# ---- atomic writes (no engine) -----------------------------------------------------------------
WRITER = textwrap.dedent("""
    import sys
    from runner.schema import RequestRecord, TrialRecord
    from runner.sinks.result_sink import ParquetSink

    sink = ParquetSink(sys.argv[1])
    start = len(sink.rows["trials"])
    for i in range(start, start + 100000):
        tid = f"t-{i:06d}"
        requests = [RequestRecord(sweep="s", run_id="r", trial_id=tid, engine_id="e", request_index=j,
                                  output_token_ids=list(range(200))) for j in range(3)]
        sink.write_trial(TrialRecord(model="m", sweep="s", run_id="r", trial_id=tid, engine_id="e",
                                     workload="decode", workload_params_json="{}"), requests)
        print(tid, flush=True)  # acknowledged: on disk
""")


def test_a_crash_mid_write_loses_at_most_the_trial_in_flight(tmp_path):
    """SIGKILL a writer at arbitrary moments: every acknowledged trial survives, files stay readable,
    and every trial on disk has its requests."""
    acknowledged: list[str] = []
    for round_ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                                text=True)
        acknowledged += [proc.stdout.readline().strip() for _ in range(5 + 7 * round_)]
        proc.kill()
        acknowledged += [line.strip() for line in proc.stdout.read().splitlines()]
        proc.wait()
        trials = read_frame(tmp_path, "trials")
        requests = read_frame(tmp_path, "requests")
        on_disk = set(trials.trial_id)
        assert set(acknowledged) <= on_disk
        assert len(on_disk - set(acknowledged)) <= 1  # the one in flight, written but not yet acknowledged
        counts = requests.groupby("trial_id").size()
        assert all(counts.get(t, 0) == 3 for t in on_disk)
