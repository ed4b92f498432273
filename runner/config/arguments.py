"""The subcommands' arguments checked before they act (`vllm-sweep report`, `vllm-sweep pool`): each problem names
its fix, and nothing is created, joined or written by a command that then refuses. Called at the command-line
entry (runner/cli.py, and `python -m runner.report`), before the command imports what it runs."""
from __future__ import annotations

import errno
import math
import os
import socket
import tempfile
from pathlib import Path
from typing import Optional

from runner.config.checks import address_problem, plain_name_problem

REACH_TIMEOUT_S = 3.0  # a cluster address that does not answer within this is refused (Ray would wait minutes)


# ---- report ----
def refuse(problems: list[str]) -> int:
    """Prints each problem as the CLI's refusals are printed; the exit code (2 where any, else 0)."""
    import sys

    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 2 if problems else 0


def report_problems(*, folders: list[Path], out: Optional[Path], tie_band=None, bandwidth_tbs=None,
                    gpu_hour_usd=None) -> list[str]:
    """Why `vllm-sweep report FOLDER... [--out DIR]` cannot run as given."""
    problems = [p for folder in folders for p in [run_folder_problem(Path(folder))] if p]
    if problems:
        return problems
    target = Path(out) if out is not None else Path(folders[0])
    problem = out_folder_problem(target, flag="--out" if out is not None else None)
    if problem:
        problems.append(problem)
    problems += _settings_problems(tie_band=tie_band, gpu_hour_usd=gpu_hour_usd)
    if bandwidth_tbs is not None and not (math.isfinite(bandwidth_tbs) and bandwidth_tbs > 0):
        problems.append(f"--bandwidth-tbs {bandwidth_tbs:g} must be TB/s > 0 (fix: --bandwidth-tbs 3.35)")
    return problems


def _settings_problems(*, tie_band, gpu_hour_usd) -> list[str]:
    """The report flags by the rule the config's `report:` block follows (runner/config/report.py)."""
    from runner.config.report import ReportSettingsError, parse_settings

    problems = []
    for key, flag, value in (("tie_band", "--tie-band", tie_band), ("gpu_hour_usd", "--gpu-hour-usd", gpu_hour_usd)):
        if value is None:
            continue
        try:
            parse_settings({key: value})
        except ReportSettingsError as exc:
            problems.append(str(exc).replace(f"report.{key}=", f"{flag} "))
    return problems


def run_folder_problem(folder: Path) -> Optional[str]:
    """Why `folder` is not a run folder a report can read (None where it is)."""
    from runner.sinks.parquet import has_table

    fix = "fix: give a run folder, outputs/<sweep>/<run>"
    if not folder.exists():
        return f"{folder}: no such folder ({fix})"
    if not folder.is_dir():
        return f"{folder} is a file, not a run folder ({fix}; --out names where the report goes)"
    if not os.access(folder, os.R_OK | os.X_OK):
        return f"{folder}: cannot be read (fix: chmod u+rx {folder})"
    if not has_table(folder, "trials") and not has_table(folder, "engines"):
        runs = sorted(str(d) for d in folder.iterdir() if d.is_dir() and (has_table(d, "trials") or
                                                                          has_table(d, "engines")))
        if runs:
            shown = ", ".join(runs[:3]) + (f" (+{len(runs) - 3} more)" if len(runs) > 3 else "")
            return f"{folder} holds runs, not results: no results (trials / engines) in it (fix: name a run: {shown})"
        return f"{folder}: no results (trials / engines, as parts or .parquet files) in it: not a run folder ({fix})"
    return config_problem(folder)


def config_problem(folder: Path) -> Optional[str]:
    """A run folder's config.yaml that cannot be read (not YAML, truncated, not a mapping)."""
    from runner.config.resume import unreadable_config

    return unreadable_config(folder, fix="repair it, or move it aside to report with the default settings",
                             required=())


def out_folder_problem(target: Path, *, flag: Optional[str]) -> Optional[str]:
    """Why the report's files cannot go into `target` (None where they can); tested without creating anything."""
    name = f"{flag} {target}" if flag else f"{target} (where the report goes without --out)"
    fix = "fix: --out DIR, a folder you can write"
    if target.exists() and not target.is_dir():
        return f"{name} is a file, not a folder ({fix})"
    existing = target
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        return f"{name}: {existing} is a file, so no folder can be made there ({fix})"
    reason = _write_test(existing)
    if reason:
        return f"{name}: cannot write in {existing} ({reason}; {fix})"
    return None


def _write_test(folder: Path) -> Optional[str]:
    """Writes and removes a file in an existing folder (root passes os.access everywhere; a read-only mount not)."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".report-write-test-"):
            pass
    except OSError as exc:
        return exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    return None


# ---- pool ----
def pool_problems(*, action: str, names: list[str], every: bool, address: Optional[str]) -> list[str]:
    """Why `vllm-sweep pool list|release ...` cannot run as given; the address is tried last (seconds at most)."""
    problems = []
    if action == "release":
        if names and every:
            problems.append(f"name the pools to release or give --all, not both (fix: vllm-sweep pool release "
                            f"{' '.join(names)})")
        for name in names:
            problem = plain_name_problem(name, where="execution.pool", example="default")
            if problem:
                plain = problem.rsplit("=", 1)[1].rstrip(")")
                problems.append(f"pool name {name!r} must be a plain name, as execution.pool is (letters, digits, "
                                f"- _ .; no '/', not . or ..) (fix: vllm-sweep pool release {plain})")
    if address is not None and not problems:
        problem = address_problem(address)
        if problem:
            problems.append(f"--address {address!r} is not a Ray address: {problem.split(' (fix:')[0]} "
                            f"(fix: --address 127.0.0.1:6379, or leave --address out for the runner's own head)")
        else:
            problem = unreachable(address)
            if problem:
                problems.append(problem)
    return problems


# HTTP/2's client preface and an empty SETTINGS frame: a Ray head (GCS, or the Ray Client server of ray://) is a
# gRPC server, which answers with its own SETTINGS frame at once; a port that accepts and says nothing is not one.
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_H2_SETTINGS = 4
GCS_PROBE = "/ray.rpc.NodeInfoGcsService/GetClusterId"  # the call a Ray driver makes first when it joins


def unreachable(address: str, *, timeout_s: float = REACH_TIMEOUT_S) -> Optional[str]:
    """Why no Ray cluster answers at HOST:PORT within `timeout_s` (None where one does; `auto` is not tried)."""
    if address == "auto":
        return None
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, _, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as conn:
            if os.environ.get("RAY_USE_TLS", "0") not in ("", "0"):
                return None  # a TLS head answers only after a handshake: the connection is all we test
            conn.settimeout(timeout_s)
            conn.sendall(_H2_HELLO)
            reply = conn.recv(9)
            if len(reply) < 4 or reply[3] != _H2_SETTINGS:
                return _unreachable(address, "it answers, but not as a Ray cluster (no gRPC reply)")
    except socket.timeout:
        return _unreachable(address, f"no answer within {timeout_s:g} s")
    except OSError as exc:
        return _unreachable(address, exc.strerror or type(exc).__name__)
    if address.startswith("ray://"):
        return None  # the Ray Client server: its gRPC reply is all we test
    reason = _gcs_problem(f"{host}:{port}", timeout_s=timeout_s)
    return _unreachable(address, reason) if reason else None


def _gcs_problem(target: str, *, timeout_s: float) -> Optional[str]:
    """Why the gRPC server at `target` is not a Ray head's GCS (None where it is): one call it serves, bounded. A
    head that refuses the call (no token, say) still answers as one."""
    try:
        import grpc
    except ImportError:
        return None
    channel = grpc.insecure_channel(target)
    try:
        call = channel.unary_unary(GCS_PROBE,
                                   request_serializer=lambda _: b"", response_deserializer=lambda data: data)
        call(None, timeout=timeout_s)
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"no answer within {timeout_s:g} s"
        if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN):
            return f"it answers, but not as a Ray head ({code.name.lower()})"
    finally:
        channel.close()
    return None


def _unreachable(address: str, reason: str) -> str:
    return (f"--address {address}: the Ray cluster cannot be reached ({reason}) (fix: the head's HOST:PORT as "
            f"`ray start --head` printed it, or leave --address out for the runner's own head)")
