"""Bad input on the subcommands and the values one rule governs, through the real CLI: each refused with exit 2,
its fix named, no traceback, and nothing created by the command that refused (no engine starts here)."""
from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from runner.cache import CACHE_ENV

from tests.support.cli import ROOT, run_cli_batch
from tests.support.results import decode_study, report_fixture


def runner(*args: str, cache: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "RUNNER_CACHE_DIR": str(cache), "WANDB_MODE": "offline"}
    return subprocess.run([sys.executable, "-m", "runner", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def refused(proc: subprocess.CompletedProcess, *needles: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "fix" in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    return report_fixture(tmp_path_factory.mktemp("fx") / "sweep" / "run1")


# ---- vllm-sweep report ----
REPORT_CASES = {
    # name: (arguments, `@x` a path in a scratch folder holding the file `afile` and the folder `empty`; RUN the run
    # folder, RUNS the folder above it; what the refusal says)
    "a file as the folder": (["@afile"], ["is a file, not a run folder"]),
    "a missing folder": (["@missing"], ["no such folder"]),
    "an empty folder": (["@empty"], ["no results", "not a run folder"]),
    "a sweep folder, not a run": (["RUNS"], ["holds runs", "name a run:"]),
    "a file as --out": (["RUN", "--out", "@afile"], ["--out", "is a file, not a folder", "fix: --out DIR"]),
    "--out under a file": (["RUN", "--out", "@afile/sub"], ["is a file, so no folder can be made there"]),
    "--out where nothing can be written": (["RUN", "--out", "/proc/no-such/out"], ["cannot write in /proc"]),
    "a negative --tie-band": (["RUN", "--out", "@new", "--tie-band", "-1"], ["--tie-band -1.0 must be ≥ 0",
                                                                           "fix: --tie-band 0.02"]),
    "a negative --gpu-hour-usd": (["RUN", "--out", "@new", "--gpu-hour-usd", "-2"], ["fix: --gpu-hour-usd 3.5"]),
    "a zero --bandwidth-tbs": (["RUN", "--out", "@new", "--bandwidth-tbs", "0"], ["fix: --bandwidth-tbs 3.35"]),
    "--slo percentile=0": (["RUN", "--out", "@new", "--slo", "percentile=0"], ["valid: 50, 90, 99",
                                                                             "fix: --slo percentile=99"]),
    "an --slo without a value": (["RUN", "--out", "@new", "--slo", "ttft"], ["expected KEY=VALUE"]),
    "no folder at all": ([], ["the following arguments are required: folders"]),
}


POOL_CASES = [
    (["release", "../x"], ["pool name '../x' must be a plain name", "fix: vllm-sweep pool release x"]),
    (["release", "."], ["pool name '.'", "fix: vllm-sweep pool release default"]),
    (["release", "a b"], ["fix: vllm-sweep pool release a-b"]),
    (["release", "default", "--all"], ["not both", "fix: vllm-sweep pool release default"]),
    (["list", "--address", "nohost:99999"], ["port '99999' must be a number in 1–65535", "fix: --address"]),
    (["list", "--address", "bad host:1"], ["is not a host name or IP address"]),
    (["list", "--address", "6379"], ["must be auto or HOST:PORT"]),
    (["release", "x", "--address", "127.0.0.1:1"], ["cannot be reached", "fix: the head's HOST:PORT"]),
    (["list", "--json", "--address", "no-such-host.invalid:6379"], ["cannot be reached"]),
]


DAMAGED = [
    (b"model: {name: x\n  engine: [1, 2\n", "not valid YAML"),
    (b"", "it is empty"),
    (b"model:\n  name: x\nengine:\n  device: cpu\n", "it lacks sweep, execution, run (cut short, or edited)"),
    (b"\x00\xff\xfe\x80", "it is not text"),
    (b"- a\n- b\n", "it holds a list"),
]


RULES = [
    (["sweep.arms=[{spec_method:mtp,num_speculative_tokens_per_batch_size:[[1,4,9]]}]"],
     ["its largest k (9)", "outside 1..8 for 'mtp', as a static arm's k would be", "fix: k ≤ 8"]),
    (["sweep.arms=[{spec_method:mtp,num_speculative_tokens:9}]"], ["num_speculative_tokens=9 is outside 1..8"]),
    (["slo.percentile=0"], ["slo.percentile=0: valid: 50, 90, 99", "fix: slo.percentile=99"]),
    (["slo.percentile=95"], ["slo.percentile=95: valid: 50, 90, 99"]),
    (["workload=trace", "workload.trace.max_requests=0", "workload.trace.trace_file=TRACE"],
     ["workload 'trace': max_requests=0 must be ≥ 1", "fix: workload.trace.max_requests="]),
    (["workload=trace", "workload.trace.max_requests=[0,2]", "workload.trace.trace_file=TRACE"],
     ["max_requests=0 must be ≥ 1"]),
]


@dataclasses.dataclass(kw_only=True)
class Answer:
    proc: subprocess.CompletedProcess
    root: Path  # the case's own scratch folder
    before: set[str]  # what the scratch folder (and the report's run folder) held before the command, and after
    after: set[str]


def trace_file(folder: Path) -> Path:
    trace = folder / "trace.jsonl"
    trace.write_text("".join(f'{{"timestamp": {i * 100}, "input_length": 64, "output_length": 16, '
                             f'"hash_ids": [{i}]}}\n' for i in range(5)))
    return trace


@pytest.fixture(scope="module")
def answers(run_folder, tmp_path_factory) -> dict:
    """Every case of the tables above, each in a scratch folder of its own, run in one interpreter
    (tests/support/cli.py's run_cli_batch: the imports are paid once); what each folder held before and after."""
    root = tmp_path_factory.mktemp("cases")
    cases: list[tuple[tuple, Path, dict]] = []

    def scratch(kind: str) -> Path:
        folder = root / f"{kind}-{len(cases)}"
        folder.mkdir()
        return folder

    names = {"RUN": str(run_folder), "RUNS": str(run_folder.parent)}
    for case, (args, _) in REPORT_CASES.items():
        folder = scratch("report")
        (folder / "afile").write_text("not a folder\n")
        (folder / "empty").mkdir()
        argv = [str(folder / a[1:]) if a.startswith("@") else names.get(a, a) for a in args]
        cases.append((("report", case), folder, {"argv": ["report", *argv], "env": {CACHE_ENV: folder / "cache"}}))
    for args, _ in POOL_CASES:
        folder = scratch("pool")
        command = {"argv": ["pool", *args], "env": {CACHE_ENV: folder / "cache"}}
        cases.append((("pool", " ".join(args)), folder, command))
    for text, reason in DAMAGED:
        folder = scratch("damaged")
        damaged_run(folder, text)
        cases.append((("damaged", reason), folder, {"overrides": ["dry_run=true", "run=r1", "tracking=none"],
                                                     "output_root": folder}))
    for overrides, _ in RULES:
        folder = scratch("rule")
        trace = trace_file(folder)
        cases.append((("rule", " ".join(overrides)), folder, {
            "overrides": ["dry_run=true", "tracking=none", *[o.replace("TRACE", str(trace)) for o in overrides]],
            "output_root": folder / "out"}))

    def state(folder: Path) -> set[str]:
        return tree(folder) | {f"run folder: {p}" for p in tree(run_folder)}

    before = [state(folder) for _, folder, _ in cases]
    procs = run_cli_batch([command for _, _, command in cases])
    return {key: Answer(proc=proc, root=folder, before=b, after=state(folder))
            for (key, folder, _), proc, b in zip(cases, procs, before)}


@pytest.mark.parametrize("case", list(REPORT_CASES))
def test_report_refuses_bad_arguments_before_writing(case, answers):
    _, needles = REPORT_CASES[case]
    a = answers["report", case]
    proc = a.proc
    if case in ("no folder at all", "an --slo without a value"):  # argparse's refusal: exit 2, usage, an example
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and needles[0] in proc.stderr
    else:
        refused(proc, *needles)
    assert a.after == a.before  # nothing created in its scratch folder, nothing written in the run folder


def test_report_refuses_a_damaged_config_yaml_naming_it(tmp_path):
    run = tmp_path / "run1"
    run.mkdir()
    decode_study().write(run)
    (run / "config.yaml").write_text("sweep: {name: s\n  grid: [1, 2\n")
    before = tree(tmp_path)
    proc = runner("report", str(run), cache=tmp_path / "cache")
    refused(proc, f"saved config {run / 'config.yaml'} cannot be read", "not valid YAML", "repair it")
    assert tree(tmp_path) == before


# ---- vllm-sweep pool ----
@pytest.mark.parametrize("args, needles", POOL_CASES, ids=[" ".join(c[0]) for c in POOL_CASES])
def test_pool_refuses_bad_names_and_addresses(args, needles, answers):
    a = answers["pool", " ".join(args)]
    refused(a.proc, *needles)
    assert not (a.root / "cache").exists()  # no head started, nothing cached


def test_pool_refuses_an_address_that_accepts_but_never_answers_within_seconds(tmp_path):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        proc = runner("pool", "list", "--address", f"127.0.0.1:{port}", cache=tmp_path / "cache", timeout=60)
    refused(proc, "no answer within 3 s")


def test_pool_refuses_a_grpc_server_that_is_not_a_ray_head(tmp_path):
    from concurrent import futures

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        proc = runner("pool", "list", "--address", f"127.0.0.1:{port}", cache=tmp_path / "cache", timeout=60)
    finally:
        server.stop(0)
    refused(proc, "not as a Ray head")


# ---- the sweep: a damaged run folder, one rule per value ----
def damaged_run(root: Path, text: bytes) -> Path:
    run = root / "quick" / "r1"
    run.mkdir(parents=True)
    decode_study().write(run)
    (run / "config.yaml").write_bytes(text)
    return run


@pytest.mark.parametrize("text, reason", DAMAGED, ids=[reason for _, reason in DAMAGED])
def test_resume_refuses_a_damaged_saved_config_naming_the_file_and_the_fix(text, reason, answers):
    a = answers["damaged", reason]
    proc, run = a.proc, a.root / "quick" / "r1"
    refused(proc, f"saved config {run / 'config.yaml'} cannot be read: {reason}", "fix: run=<new name>",
            "e.g. run=r1-2", f"or repair {run / 'config.yaml'}")
    assert "plan:" not in proc.stdout
    assert a.after - a.before <= {"quick/r1/.run.lock"}  # the folder's lock, nothing else


@pytest.mark.parametrize("overrides, needles", RULES, ids=[" ".join(r[0]) for r in RULES])
def test_one_rule_per_value(overrides, needles, answers):
    proc = answers["rule", " ".join(overrides)].proc
    refused(proc, *needles)
    assert "plan:" not in proc.stdout
