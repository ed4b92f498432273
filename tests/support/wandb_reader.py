"""Reads offline W&B run folders back (what an offline export wrote), for the W&B tests."""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

_BLOCK = 32768
_HEADER = 7


def _log_records(path: Path):
    """The records of a .wandb file (a LevelDB-style log: 32 KiB blocks of checksummed, typed chunks)."""
    data = Path(path).read_bytes()
    ident, _magic, _version = struct.unpack("<4sHB", data[:_HEADER])
    if ident != b":W&B":
        raise ValueError(f"{path} is not a W&B run file")
    pos, pending = _HEADER, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        pos += _HEADER
        if kind == 0 and length == 0:  # block padding
            pos += left - _HEADER
            continue
        chunk, pos = data[pos:pos + length], pos + length
        if kind == 1:
            yield chunk
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            yield pending + chunk


@dataclass(kw_only=True)
class OfflineRun:
    folder: Path
    id: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    logged_keys: set = field(default_factory=set)
    artifacts: list[str] = field(default_factory=list)


def read_offline_run(folder: Path) -> OfflineRun:
    from wandb.proto import wandb_internal_pb2 as pb

    folder = Path(folder)
    (path,) = folder.glob("*.wandb")
    run = OfflineRun(folder=folder)
    for blob in _log_records(path):
        record = pb.Record()
        record.ParseFromString(blob)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.id, run.name, run.group, run.job_type = r.run_id, r.display_name, r.run_group, r.job_type
            run.config.update({u.key: json.loads(u.value_json) for u in r.config.update if u.key})
        elif kind == "config":
            run.config.update({u.key: json.loads(u.value_json) for u in record.config.update if u.key})
        elif kind == "summary":
            for u in record.summary.update:
                if u.key:
                    run.summary[u.key] = json.loads(u.value_json)
        elif kind == "history":
            run.logged_keys.update(i.nested_key[0] if i.nested_key else i.key for i in record.history.item)
        elif kind == "artifact":
            run.artifacts.append(f"{record.artifact.type}:{record.artifact.name}")
    return run


def offline_runs(run_dir: Path) -> list[OfflineRun]:
    return [read_offline_run(f) for f in sorted((Path(run_dir) / "wandb").glob("offline-run-*"))]
