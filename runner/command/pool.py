"""`vllm-sweep pool list` and `vllm-sweep pool release (NAME ... | --all)`: the engine pools that commands with
execution.keep_engines=true left on a Ray cluster (the head the runner started, or --address HOST:PORT)."""
from __future__ import annotations

import argparse
import sys
from typing import Optional

USAGE_HINT = "execution.keep_engines=true keeps a command's engines in a pool"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm-sweep pool", description="Engines that outlive a command "
                                "(execution.keep_engines=true): list them, or release them.")
    sub = p.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="every pooled engine: its pool, engine, model, state, idle time, TTL left")
    release = sub.add_parser("release", help="end a pool's engines (their engine processes too); the Ray head the "
                                             "runner started stops once no pool is left")
    release.add_argument("names", nargs="*", metavar="NAME", help="pools to release (execution.pool)")
    release.add_argument("--all", action="store_true", help="every pool")
    listing.add_argument("--json", action="store_true", help="one JSON object per engine (its actor's and its engine "
                         "processes' pids too)")
    for each in (listing, release):
        each.add_argument("--address", default=None,
                          help="HOST:PORT of the Ray cluster (cluster.address); default: the head the runner started")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.action == "release" and not args.names and not args.all:
        print("error: name the pools to release, or --all (fix: vllm-sweep pool release default)", file=sys.stderr)
        return 2
    address = _address(args.address)
    if address is None:
        if not getattr(args, "json", False):
            print(f"no engine pool: no pool's Ray head is running on this machine ({USAGE_HINT})")
        return 0
    _connect(address)
    try:
        if args.action == "list":
            return _list(address, as_json=args.json)
        return _release(address, pools=None if args.all else set(args.names), own_head=args.address is None)
    finally:
        _disconnect()


def _address(given: Optional[str]) -> Optional[str]:
    if given:
        return given
    from runner.pool.head import running_head

    head = running_head()
    return head.address if head is not None else None


def _connect(address: str) -> None:
    import logging

    from runner.scheduling.cluster import use_cluster_token

    use_cluster_token()
    import ray

    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)


def _disconnect() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


def _list(address: str, *, as_json: bool = False) -> int:
    from runner.pool.pools import EnginePool

    rows = EnginePool().list()
    if as_json:
        import json

        for r in rows:
            print(json.dumps({**r.as_dict(), "address": address}))
        return 0
    if not rows:
        print(f"no pooled engines on {address} (`vllm-sweep pool release --all` stops the pool's Ray head)")
        return 0
    print(f"engine pools on {address}:")
    table = [("POOL", "ENGINE", "MODEL", "STATE", "IDLE", "TTL LEFT", "WARM SHAPES")]
    for r in rows:
        table.append((r.pool, r.engine or r.name, r.model, str(r.state), _duration(r.idle_s),
                      _duration(r.ttl_left_s), str(r.warm_shapes if r.warm_shapes is not None else "")))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def _release(address: str, *, pools: Optional[set[str]], own_head: bool) -> int:
    from runner.pool.pools import EnginePool, release_pools

    existing = {a.pool for a in EnginePool().actors()}
    missing = sorted((pools or set()) - existing)
    if missing:
        print(f"error: no pool {', '.join(missing)} on {address} (pools: {', '.join(sorted(existing)) or 'none'}; "
              f"fix: vllm-sweep pool list)", file=sys.stderr)
        return 2
    rows = release_pools(pools, say=lambda line: print(line, file=sys.stderr))
    for r in rows:
        print(f"released {r.pool}: {r.engine or r.name} ({r.state})")
    left = EnginePool().actors()
    if left:
        print(f"{len(left)} pooled engine(s) left in {', '.join(sorted({a.pool for a in left}))}")
        return 0
    if own_head:
        _disconnect()
        from runner.pool.head import stop_head

        head = stop_head()
        if head is not None:
            print(f"no pool left: stopped the pools' Ray head on {head.address}")
    return 0


def _duration(seconds) -> str:
    if seconds is None:
        return ""
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
