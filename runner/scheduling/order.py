"""The order trials run in (pure): engines onto lanes, rounds of repeats, trials shuffled within an engine, an
engine's first visit opening with a trial its first-trial check can judge."""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Iterable, Sequence

from runner.plan.grid import EngineConfig, Plan, Trial
from runner.scheduling.device import DevicePolicy


@dataclass(frozen=True, kw_only=True)
class Step:
    """One engine's trials of one round, in the order they run."""

    round: int
    engine_id: str
    trials: tuple


@dataclass(frozen=True, kw_only=True)
class Group:
    engine: EngineConfig
    trials: tuple[Trial, ...]


def pending_groups(plan: Plan, *, skip_trial_ids: Iterable[str] = frozenset()) -> list[Group]:
    """Engine groups with trials left, longest first so no device idles at the end while one long group runs."""
    skip = set(skip_trial_ids)
    groups = []
    for engine in plan.engines:
        todo = tuple(t for t in plan.trials_of(engine.engine_id) if t.trial_id not in skip)
        if todo:
            groups.append(Group(engine=engine, trials=todo))
    return sorted(groups, key=lambda g: -len(g.trials))  # stable: plan order among equals


def lane_count(plan: Plan, *, policy: DevicePolicy, units: int, max_parallel: int) -> int:
    """Lanes side by side: as many of the widest engine as the device units hold, at most max_parallel."""
    width = lane_width(plan, policy=policy)
    return max(1, min(units // width if units >= width else 1, max_parallel))


def lane_width(plan: Plan, *, policy: DevicePolicy) -> int:
    """Device units one lane holds: the widest engine's."""
    return max([policy.units_needed(e) for e in plan.engines] or [1])


def assign_lanes(plan: Plan, *, lanes: int, skip_trial_ids: Iterable[str] = frozenset()) -> list[list[str]]:
    """Engines onto lanes, longest group first onto the least loaded lane; the run and the dry run both use it."""
    load = [[0, i, []] for i in range(max(1, lanes))]
    for group in pending_groups(plan, skip_trial_ids=skip_trial_ids):
        chosen = min(load, key=lambda s: (s[0], s[1]))
        chosen[0] += len(group.trials)
        chosen[2].append(group.engine.engine_id)
    return [ids for _, _, ids in load]


def round_steps(plan: Plan, *, engine_ids: list[str], skip_trial_ids: Iterable[str] = frozenset(), seed: int = 0,
                lane: int = 0) -> list[Step]:
    """Round r holds repeat r of every engine's trials. Engines rotate from round to round from a seeded
    start; trials within an engine are shuffled (seeded), and an engine's first visit opens with its opening
    trial (opening_first). Finished trials drop out, so a resume continues the interrupted round."""
    skip = set(skip_trial_ids)
    rounds = sorted({t.repeat for e in engine_ids for t in plan.trials_of(e)})
    if not engine_ids:
        return []
    offset = random.Random(f"{seed}:{lane}:rotation").randrange(len(engine_ids))
    steps = []
    visited: set[str] = set()
    for index, r in enumerate(rounds):
        shift = (offset + index) % len(engine_ids)
        for engine_id in engine_ids[shift:] + engine_ids[:shift]:
            todo = [t for t in plan.trials_of(engine_id) if t.repeat == r and t.trial_id not in skip]
            random.Random(f"{seed}:{engine_id}:{r}").shuffle(todo)
            if todo:
                if engine_id not in visited:
                    todo = opening_first(todo)
                    visited.add(engine_id)
                steps.append(Step(round=r, engine_id=engine_id, trials=tuple(todo)))
    return merge_adjacent(steps)


# Sessions whose requests make an opening trial's figure: one request's TTFT moves by more than the first-trial
# check's 10 % from prompt to prompt on its own (docs/benchmarks.md), a median over this many much less.
JUDGED_SESSIONS = 8


def opening_first(trials: list[Trial]) -> list[Trial]:
    """The trial a load or a pool wake opens with runs twice (execution.first_trial_twice) and is checked against
    its point in later rounds (the report's "First trials"): the cheapest of those with the most sessions, up to
    JUDGED_SESSIONS, so that the check can be judged and the discarded run costs little; the rest keep their
    shuffled order."""
    if not trials:
        return trials
    first = min(range(len(trials)), key=lambda i: (-judged_sessions(trials[i]), run_cost(trials[i]), i))
    return [trials[first], *trials[:first], *trials[first + 1:]]


def judged_sessions(trial: Trial) -> int:
    return min(max(1, trial.concurrency), JUDGED_SESSIONS)


def run_cost(trial: Trial) -> tuple[int, int]:
    """How long a trial's run takes, as a key: the output tokens a session decodes one after another (a decode
    step costs as much as hundreds of prefill tokens on a GPU), then the tokens its sessions may hold at once."""
    try:
        in_turn = int(trial.params.tokens_decoded_in_turn())
        tokens = int(trial.params.max_sequence_tokens())
    except (NotImplementedError, AttributeError, TypeError, ValueError):
        return (1 << 30, 1 << 30)  # no estimate: never preferred over one that has one
    return in_turn, max(1, trial.concurrency) * tokens


def merge_adjacent(steps: list[Step]) -> list[Step]:
    """A resume may leave one engine twice in a row (end of one round, start of the next): one visit."""
    out: list[Step] = []
    for step in steps:
        if out and out[-1].engine_id == step.engine_id and out[-1].round == step.round:
            out[-1] = dataclasses.replace(out[-1], trials=out[-1].trials + step.trials)
        else:
            out.append(step)
    return out


def lane_steps(plan: Plan, *, policy: DevicePolicy, units: int, max_parallel: int, seed: int,
               skip_trial_ids: Iterable[str] = frozenset()) -> list[list[Step]]:
    """Each lane's steps in the order it runs them (a lane with nothing left has none)."""
    lanes = lane_count(plan, policy=policy, units=units, max_parallel=max_parallel)
    assignment = assign_lanes(plan, lanes=lanes, skip_trial_ids=skip_trial_ids)
    return [round_steps(plan, engine_ids=ids, skip_trial_ids=skip_trial_ids, seed=seed, lane=i)
            for i, ids in enumerate(assignment)]


def least_soon_needed(residents: list, steps: Sequence[Step]) -> object:
    """The resident engine whose next turn is furthest away (never again: first)."""
    order = [st.engine_id for st in steps]

    def next_turn(resident) -> int:
        try:
            return order.index(resident.engine.engine_id)
        except ValueError:
            return len(order) + 1
    return max(residents, key=next_turn)


def next_position(trial_rows: list[dict]) -> int:
    """Positions continue across resumes: one past the largest on disk."""
    positions = [r.get("position") for r in trial_rows if r.get("position") is not None]
    return max(positions) + 1 if positions else 0
