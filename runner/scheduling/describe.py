"""The dry run's text and the run's opening lines: the plan, its lanes (the run's own assignment), its rounds."""
from __future__ import annotations

from typing import Optional

from runner.config.execution import Residency
from runner.plan.grid import EngineConfig, Plan
from runner.scheduling.device import policy_for
from runner.scheduling.order import assign_lanes, lane_count, lane_steps, lane_width
from runner.scheduling.settings import Capacity


def describe_plan(plan: Plan, *, done: set[str], parallel: int) -> str:
    from runner.labels import plan_labels

    labels = plan_labels(plan.engines)
    lines = [f"plan: {len(plan.engines)} engine configs, {len(plan.trials)} trials "
             f"({len(plan.trials) - len(done & {t.trial_id for t in plan.trials})} to run), "
             f"{parallel} engine(s) at a time"]
    for engine in plan.engines:
        trials = plan.trials_of(engine.engine_id)
        todo = sum(t.trial_id not in done for t in trials)
        lines.append(f"  {engine.engine_id} {labels[engine.engine_id]}: {len(trials)} trials, {todo} to run")
        forced = ((engine.vllm_args.as_dict() if engine.vllm_args else {}).get("speculative_config") or {}).get(
            "synthetic_acceptance_rates")
        if forced is not None:  # what vLLM is told, the engine's first k of the profile
            lines.append(f"      forces synthetic_acceptance_rates {forced} (rejection_sample_method: synthetic)")
        for t in trials[:50]:
            mark = "done" if t.trial_id in done else "todo"
            drafts = f" {t.draft.label} (set on this engine)" if t.draft else ""
            lines.append(f"      [{mark}] {t.trial_id} {t.workload} c={t.concurrency} r={t.repeat}{drafts} {t.params_json}")
    return "\n".join(lines)


def describe_rounds(plan: Plan, *, device: str, resident: Residency) -> list[str]:
    """The plan's lines about rounds and what switching engines costs."""
    repeats = len({t.repeat for t in plan.trials})
    engines = len(plan.engines)
    if repeats <= 1 or engines <= 1:
        return [f"rounds: {repeats}; engines load once each"]
    if resident is Residency.OFF:
        return [f"rounds: {repeats}, engines interleaved; resident engines off: every engine loads once per round "
                f"({engines * repeats} loads instead of {engines}; execution.resident=auto keeps them loaded)"]
    how = "asleep at level 1 between turns (sleep mode)" if policy_for(device).residents_sleep else \
        "loaded, idle between turns"
    return [f"rounds: {repeats}, engines interleaved and rotated per round, trials shuffled "
            f"(execution.order_seed); engines stay resident where memory allows, {how}; "
            f"where they do not fit, one load per engine per round"]


def describe_loads(plan: Plan, *, resident: Residency, held: frozenset[str] = frozenset(),
                   adaptive: bool = False) -> str:
    """How many engine loads the plan costs: one per engine (resident, or one round), or one per engine and round
    (execution.resident=off); `held`: engines an earlier stage of the command left loaded (woken, not loaded)."""
    engines = {e.engine_id for e in plan.engines}
    repeats = len({t.repeat for t in plan.trials})
    new = engines - held
    per_round = resident is Residency.OFF and repeats > 1 and len(engines) > 1
    loads = len(new) * (repeats if per_round else 1)
    line = f"loads: {loads} for {len(engines)} engines"
    if held & engines:
        line += f" ({len(held & engines)} loaded by an earlier stage, woken instead)"
    if adaptive:
        line += "; later stages wake the engines earlier stages loaded (one load per engine per command)"
    return line


def describe_devices(plan: Plan, *, device: str, capacity: Optional[Capacity], done: set[str],
                     seed: int = 0) -> list[str]:
    """The plan's lines about devices: lanes, what one engine occupies, each lane's engines as the run assigns
    them, and the trial each engine's first visit opens with (`seed`: execution.order_seed)."""
    policy = policy_for(device)
    tps = sorted({e.settings.tensor_parallel_size for e in plan.engines}) or [1]
    if policy.gpus_per_tp_rank:
        per = "one actor per GPU" if tps == [1] else f"one actor per TP group of {'/'.join(map(str, tps))} GPUs"
        if capacity is None:
            return [f"devices: cuda, {per}; as many engines side by side as the Ray cluster's GPUs allow "
                    f"(known once Ray starts)"]
        head = f"devices: {capacity.device_units} GPU(s), {per}"
        if capacity.engines_per_gpu > 1:
            n = capacity.engines_per_gpu
            head = (f"devices: {capacity.device_units // n} GPU(s), {n} engines side by side on each "
                    f"(cluster.engines_per_gpu={n}: one actor per 1/{n} GPU, engines not resident; their figures "
                    f"share the GPU)")
    else:
        if capacity is None:
            capacity = Capacity(device_units=1, max_parallel_engines=1)
        head = f"devices: cpu, {capacity.device_units} engine slot(s) (cluster.cpu_engine_slots)"
    lanes = lane_count(plan, policy=policy, units=capacity.device_units, max_parallel=capacity.max_parallel_engines)
    lines = [f"{head}, at most {capacity.max_parallel_engines} engine(s) at a time: {lanes} lane(s) of "
             f"{lane_width(plan, policy=policy)} unit(s), longest group first"]
    share = f" (1/{capacity.engines_per_gpu} GPU)" if policy.gpus_per_tp_rank and capacity.engines_per_gpu > 1 else ""
    for i, ids in enumerate(assign_lanes(plan, lanes=lanes, skip_trial_ids=done)):
        lines.append(f"  lane {i}{share}: {' -> '.join(ids) if ids else '(idle)'}")
    if share:
        from runner.scheduling.startup_order import start_order_line

        lines.append(start_order_line(engines_per_gpu=capacity.engines_per_gpu))
    steps = lane_steps(plan, policy=policy, units=capacity.device_units, max_parallel=capacity.max_parallel_engines,
                       seed=seed, skip_trial_ids=done)
    opening = {}
    for step in (step for lane in steps for step in lane):
        opening.setdefault(step.engine_id, step.trials[0])
    if opening:
        lines.append("each engine's first visit opens with (checked against its later rounds; run twice, the second "
                     "kept, unless execution.first_trial_twice=false):")
        lines += [f"  {engine_id}: {t.workload} c={t.concurrency} {t.params_json}" for engine_id, t in opening.items()]
    return lines


def engine_label(engine: EngineConfig, engines: Optional[list[EngineConfig]] = None) -> str:
    """The engine's id and label; with the plan's engines, the label names each setting in which they differ
    (runner.labels), else every setting."""
    from runner.labels import full_label, plan_labels

    label = plan_labels(engines).get(engine.engine_id) if engines else None
    return f"{engine.engine_id} {label or full_label(engine.settings)}"


def describe_converge(plan: Plan, *, converge: bool) -> list[str]:
    """The dry run's line about sweep.converge: up to how many repeats a point takes, and the least."""
    if not converge:
        return []
    from runner.numerics.race import MIN_ROUNDS

    repeats = len({t.repeat for t in plan.trials})
    if repeats <= MIN_ROUNDS:
        return [f"converge: on, but saves nothing with {repeats} repeat(s): a point stops only after {MIN_ROUNDS} "
                f"(fix: sweep.repeats={2 * MIN_ROUNDS})"]
    return [f"converge: each point takes {MIN_ROUNDS} to {repeats} repeats; it stops once its verdict is settled "
            f"(every interval against the leader clear of the tie band), all its arms at once"]
