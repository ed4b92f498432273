"""An engine actor's membership of an engine pool (execution.keep_engines): who holds it, since when it is idle,
when it ends itself. The actor side only; the driver's side is runner.scheduling.engine_pool."""
from __future__ import annotations

import dataclasses
import enum
import time
from dataclasses import dataclass, field
from typing import Optional

# How often a pooled actor looks at its holder and its idle time.
WATCH_EVERY_S = 5.0


class PoolState(enum.StrEnum):
    """What `pool list` shows of one pooled engine."""

    LOADING = "loading"  # no engine (yet): its load is in progress or failed
    BUSY = "busy"  # held by a running command
    AWAKE = "awake"  # loaded and idle, not asleep (CPU engines: vLLM's CPU build has no sleep mode)
    ASLEEP = "asleep"  # vLLM sleep mode level 1: weights in host RAM, KV dropped


@dataclass(frozen=True, kw_only=True)
class PoolEntry:
    """What the driver tells a pooled actor at its creation."""

    pool: str
    name: str  # the actor's Ray name, derived from `identity`
    identity: dict  # runner.scheduling.pool_identity.PoolIdentity, as a dict
    summary: str  # the engine in words, for `pool list`
    ttl_s: float  # idle seconds before it ends itself
    holder: Optional[str] = None  # the command that creates it holds it from the start (its load may be long)
    bundle: Optional[str] = None  # its lane's placement-group bundle (CUDA: group id:index), where it has one


@dataclass(kw_only=True)
class Membership:
    """The pooled actor's lease and idle clock (pure: the actor reads the clock and the job table)."""

    entry: PoolEntry
    holder: Optional[str] = None  # the Ray job id (hex) of the command that holds it
    idle_since: float = field(default_factory=time.monotonic)
    busy_calls: int = 0  # calls of its holder in progress (a trial): never idle meanwhile

    def touch(self) -> None:
        self.idle_since = time.monotonic()

    def idle_s(self, now: Optional[float] = None) -> float:
        return 0.0 if self.busy_calls else max(0.0, (now or time.monotonic()) - self.idle_since)

    def ttl_left_s(self, now: Optional[float] = None) -> float:
        return max(0.0, self.entry.ttl_s - self.idle_s(now)) if self.holder is None else self.entry.ttl_s

    def expired(self, now: Optional[float] = None) -> bool:
        """A held engine never expires (its holder may come back to it); a free one after ttl_s idle."""
        return self.holder is None and not self.busy_calls and self.idle_s(now) >= self.entry.ttl_s

    def may_claim(self, holder: str, *, holder_alive: bool) -> bool:
        """Free, already this holder's, or held by a command that is gone."""
        return self.holder is None or self.holder == holder or not holder_alive


def job_alive(job_id: Optional[str]) -> bool:
    """Whether Ray's job `job_id` (hex) is still running: a pooled engine's holder. Unknown: alive."""
    if not job_id:
        return False
    try:
        import ray._private.state as ray_state

        for job in ray_state.jobs():
            if job.get("JobID") == job_id:
                return not job.get("IsDead", False)
    except Exception:
        return True
    return False


class PoolMember:
    """The pooled side of runner.execution.actor.EngineActor (a mixin: it reads the actor's host, engine, keys,
    warm-up settings and log)."""

    membership: Optional[Membership]

    def memory(self) -> dict:
        """The node's memory figures (the actor's `prepare` answer): an adopted engine's lane is planned from them."""
        raise NotImplementedError

    def _pool_setup(self, entry: Optional[PoolEntry]) -> None:
        import asyncio

        self.membership = Membership(entry=entry, holder=entry.holder) if entry is not None else None
        self.start_columns: dict = {}  # the load's engine-row columns, for a later command's row
        self.log_offset = 0  # a later command's log starts where the earlier one's ended
        self._pool_lock = asyncio.Lock()  # park and adopt never interleave (a sleep and a wake)
        self._watcher = None

    # ---- calls of the driver ----
    async def pool_status(self) -> dict:
        m = self.membership
        host = getattr(self, "host", None)
        if host is None:
            state = PoolState.LOADING
        elif m is not None and m.holder is not None:
            state = PoolState.BUSY
        elif getattr(host, "_asleep", False):
            state = PoolState.ASLEEP
        else:
            state = PoolState.AWAKE
        return {"pool": m.entry.pool if m else None, "name": m.entry.name if m else None,
                "identity": m.entry.identity if m else None, "summary": m.entry.summary if m else None,
                "state": str(state), "holder": m.holder if m else None, "idle_s": m.idle_s() if m else 0.0,
                "ttl_left_s": m.ttl_left_s() if m else None, "pid": _pid(), "engine_pids": _child_pids(),
                "warm_shapes": len(getattr(self, "warm_shapes", ())), "bundle": m.entry.bundle if m else None,
                # Host RAM its sleeps hold (the weights' pinned backups stay allocated once made).
                "weights_gib": float((getattr(self, "start_columns", None) or {}).get("weights_gib") or 0.0)}

    async def claim(self, *, holder: str) -> dict:
        """A command takes this engine for its run: refused while another running command holds it."""
        self._ensure_watch()
        m = self.membership
        if m is None:
            return {"ok": False, "reason": "not a pooled engine"}
        if getattr(self, "host", None) is None:
            return {"ok": False, "reason": "no engine loaded"}
        if not m.may_claim(holder, holder_alive=m.holder is not None and job_alive(m.holder)):
            return {"ok": False, "reason": f"held by the running command of Ray job {m.holder}"}
        m.holder = holder
        m.touch()
        return {"ok": True, "reason": ""}

    async def adopt(self, *, holder: str, keys, slo, warmup, warmup_output_cap, first: bool,
                    ttl_s: Optional[float] = None, first_trial_twice: bool = True):
        """Woken for `holder`'s run (CUDA: out of sleep mode; CPU: it never slept), with that run's keys and
        warm-up settings and time-to-live; its warm shapes stay warm. Returns the engine row's columns (`first`: the command's
        first use of it, so its row says `reused_from_pool`) and the node's memory."""
        from runner.config.execution import Warmup
        from runner.execution.results import StartResult

        async with self._pool_lock:
            host = getattr(self, "host", None)
            if host is None:
                return StartResult(ok=False, failure_kind="pool_engine_gone", failure_reason="no engine loaded")
            if getattr(host, "_asleep", False):
                await host.wake_up()
            self.keys, self.slo, self.warmup = keys, slo, Warmup.on_engine(warmup)
            self.warmup_output_cap = warmup_output_cap
            self.first_trial_twice = first_trial_twice
            self.first_run_due = first_trial_twice and first  # a new command's first trial on it runs twice too
            if self.membership is not None:
                if ttl_s is not None:
                    self.membership.entry = dataclasses.replace(self.membership.entry, ttl_s=float(ttl_s))
                self.membership.holder = holder
                self.membership.touch()
            if first:
                self.log_offset = _log_size(self.log_path)
            columns = {**self.start_columns, "load_s": None, "reused_from_pool": bool(first)}
            return StartResult(ok=True, columns=columns, memory=self.memory())

    async def park(self) -> float:
        """Back into the pool: what runs is aborted, the engine sleeps (where it has sleep mode), no holder."""
        from runner.execution.isolation import drain

        started = time.perf_counter()
        async with self._pool_lock:
            host = getattr(self, "host", None)
            if host is not None:
                await drain(host)
                engine = getattr(self, "engine", None)
                if engine is not None and engine.engine_args.get("enable_sleep_mode") and \
                        not getattr(host, "_asleep", False):
                    await host.sleep()
            if self.membership is not None:
                self.membership.holder = None
                self.membership.touch()
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

        if self.membership is not None and self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        """A holder gone (its command killed) puts the engine back in the pool; ttl_s idle ends it."""
        import asyncio

        m = self.membership
        while True:
            await asyncio.sleep(min(WATCH_EVERY_S, max(0.5, m.entry.ttl_s / 4)))
            try:
                if m.holder is not None and not m.busy_calls and not job_alive(m.holder):
                    print(f"runner: the command holding this engine (Ray job {m.holder}) is gone: back in the pool",
                          flush=True)
                    await self.park()
                elif m.holder is None and getattr(self, "host", None) is None:
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
