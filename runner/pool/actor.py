"""A pooled engine actor (execution.keep_engines): the engine actor plus its pool calls (status, lease, adopt,
park, release) and its own clock (a holder gone puts it back in the pool; ttl_s idle ends it). Actor code only:
the driver's side is runner.pool.pools."""
from __future__ import annotations

import dataclasses
import time
from typing import Optional

from runner.execution.actor import EngineActor
from runner.pool.liveness import check_holder
from runner.pool.member import Liveness, Membership, PoolEntry, PoolState

# How often a pooled actor looks at its holder and its idle time.
WATCH_EVERY_S = 5.0


class PooledEngineActor(EngineActor):
    """Wrapped by `ray.remote` (detached, named after its identity) where the command keeps its engines."""

    def __init__(self, *, pool_entry: PoolEntry, **kwargs):
        import asyncio

        super().__init__(**kwargs)
        self.membership = Membership(entry=pool_entry, holder=pool_entry.holder,
                                     holder_handle=pool_entry.holder_handle)
        self._pool_lock = asyncio.Lock()  # park and adopt never interleave (a sleep and a wake)
        self._watcher = None
        self._unknown_said = ""  # the last "cannot tell" reason the watcher printed (said once)

    async def start(self, **kwargs):
        self._ensure_watch()
        return await super().start(**kwargs)

    async def run_trial(self, **kwargs):
        self.membership.busy_calls += 1
        try:
            return await super().run_trial(**kwargs)
        finally:
            self.membership.busy_calls -= 1
            self.membership.touch()

    # ---- calls of the driver ----
    async def pool_status(self) -> dict:
        m = self.membership
        host = self.host
        if host is None:
            state = PoolState.LOADING
        elif m.holder is not None:
            state = PoolState.BUSY
        elif getattr(host, "_asleep", False):
            state = PoolState.ASLEEP
        else:
            state = PoolState.AWAKE
        return {"pool": m.entry.pool, "name": m.entry.name, "identity": m.entry.identity, "summary": m.entry.summary,
                "state": str(state), "holder": m.holder, "idle_s": m.idle_s(), "ttl_left_s": m.ttl_left_s(),
                "pid": _pid(), "engine_pids": _child_pids(), "warm_shapes": len(self.warm_shapes),
                "bundle": m.entry.bundle,
                # Host RAM its sleeps hold (the weights' pinned backups stay allocated once made).
                "weights_gib": float((self.start_columns or {}).get("weights_gib") or 0.0)}

    async def lease(self, *, holder: str, holder_handle=None) -> dict:
        """A command takes this engine for its run: refused while another running command holds it, or while
        whether that command still runs cannot be checked (the reason says so)."""
        self._ensure_watch()
        m = self.membership
        if self.host is None:
            return {"ok": False, "reason": "no engine loaded"}
        check = await check_holder(m.holder_handle) if m.needs_check(holder) else None
        refusal = m.refusal(holder, check)
        if refusal is not None:
            return {"ok": False, "reason": refusal}
        m.hold(holder, holder_handle)
        return {"ok": True, "reason": ""}

    async def adopt(self, *, holder: str, keys, slo, warmup, warmup_output_cap, first: bool,
                    ttl_s: Optional[float] = None, first_trial_twice: bool = True, holder_handle=None):
        """Woken for `holder`'s run (CUDA: out of sleep mode; CPU: it never slept), with that run's keys and
        warm-up settings and time-to-live; its warm shapes stay warm. Returns the engine row's columns (`first`: the command's
        first use of it, so its row says `reused_from_pool`) and the node's memory."""
        from runner.config.execution import Warmup
        from runner.execution.results import StartResult

        async with self._pool_lock:
            host = self.host
            if host is None:
                return StartResult(ok=False, failure_kind="pool_engine_gone", failure_reason="no engine loaded")
            if getattr(host, "_asleep", False):
                await host.wake_up()
            await self.reset_draft()
            self.keys, self.slo, self.warmup = keys, slo, Warmup.on_engine(warmup)
            self.warmup_output_cap = warmup_output_cap
            self.first_trial_twice = first_trial_twice
            self.first_run_due = first_trial_twice and first  # a new command's first trial on it runs twice too
            if ttl_s is not None:
                self.membership.entry = dataclasses.replace(self.membership.entry, ttl_s=float(ttl_s))
            self.membership.hold(holder, holder_handle)
            if first:
                self.log_offset = _log_size(self.log_path)
            columns = {**self.start_columns, "load_s": None, "reused_from_pool": bool(first)}
            return StartResult(ok=True, columns=columns, memory=self.memory())

    async def park(self) -> float:
        """Back into the pool: what runs is aborted, the engine sleeps (where it has sleep mode), no holder."""
        from runner.execution.isolation import drain

        started = time.perf_counter()
        async with self._pool_lock:
            host = self.host
            if host is not None:
                await drain(host)
                await self.reset_draft()
                engine = self.engine
                if engine is not None and engine.sleep_mode and \
                        not getattr(host, "_asleep", False):
                    await host.sleep()
            self.membership.free()
        return time.perf_counter() - started

    async def release(self) -> None:
        """`pool release`: the engine shut down; the caller then kills the actor."""
        await self.shutdown()

    async def exit_now(self) -> None:
        import ray

        ray.actor.exit_actor()

    # ---- the actor's own clock ----
    def _ensure_watch(self) -> None:
        import asyncio

        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        """A holder gone (its command killed) puts the engine back in the pool; ttl_s idle ends it. Where the
        holder's liveness cannot be checked, the engine stays held and the log says why (once per reason)."""
        import asyncio

        m = self.membership
        while True:
            await asyncio.sleep(min(WATCH_EVERY_S, max(0.5, m.entry.ttl_s / 4)))
            try:
                if m.holder is not None and not m.busy_calls:
                    await self._check_holder()
                elif m.holder is None and self.host is None:
                    print("runner: no engine and no command holding this actor: ending", flush=True)
                    await self._exit()
                    return
                elif m.expired():
                    print(f"runner: idle for {m.entry.ttl_s:g} s (execution.pool_ttl_s): ending", flush=True)
                    await self.shutdown()
                    await self._exit()
                    return
            except Exception as exc:  # the watcher must outlive a failed park
                print(f"runner: pool watcher: {exc!r}", flush=True)

    async def _check_holder(self) -> None:
        m = self.membership
        holder = m.holder
        check = await check_holder(m.holder_handle)
        if m.holder != holder or m.busy_calls:  # claimed or busy meanwhile
            return
        if check.liveness is Liveness.GONE:
            print(f"runner: the command holding this engine (Ray job {holder}) is gone: back in the pool", flush=True)
            await self.park()
        elif check.liveness is Liveness.UNKNOWN and check.reason != self._unknown_said:
            self._unknown_said = check.reason
            print(f"runner: cannot tell whether the command holding this engine (Ray job {holder}) still runs "
                  f"({check.reason}): it stays held (vllm-sweep pool release {m.entry.pool} frees it)", flush=True)

    async def _exit(self) -> None:
        import ray

        try:
            ray.get_runtime_context().current_actor.exit_now.remote()
        except Exception:
            import os

            os._exit(0)


def _pid() -> int:
    import os

    return os.getpid()


def _child_pids() -> list[int]:
    """This actor's processes below it (fork server, engine core, workers), from /proc."""
    import os

    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    below, frontier = [], [os.getpid()]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        below += children
        frontier += children
    return sorted(below)


def _log_size(path: str) -> int:
    import os

    try:
        return os.path.getsize(path)
    except OSError:
        return 0
