"""The pool command's arguments checked before it acts (`vllm-sweep pool`): each problem names its fix, and no
cluster is joined by a command that then refuses. Called at the command-line entry (runner/cli.py), before the
command imports what it runs."""
from __future__ import annotations

import os
import socket
from typing import Optional

from runner.config.checks import address_problem, plain_name_problem

REACH_TIMEOUT_S = 3.0  # a cluster address that does not answer within this is refused (Ray would wait minutes)


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
