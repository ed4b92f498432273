"""Cold phase: does what second_request's cold request decodes move the repeat's figures?

    python bench/cold_phase.py [--blocks 4]

One real engine (the embedded model, spec off, prefix caching on, full warm-up) in a Ray actor runs second_request
points in blocks that alternate the cold request's decode: 1 token (the workload's) and the trial's output_len
(what it decoded before), each block in the other order than the last. Per point it prints the median repeat
TTFT p50 and repeat decode tok/s per session of each, the gap and the spread between repeats ("agree" when the
gap is within the spread), and the seconds the cold phase took. Figures, not asserts.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.order import start_engine  # noqa: E402
from runner.execution.actor import EngineActor  # noqa: E402

POINTS = [{"concurrency": 1, "input_len": 256}, {"concurrency": 4, "input_len": 256},
          {"concurrency": 1, "input_len": 896}]  # the engine of bench/order.py: max_model_len 1024
OUTPUT_LEN = 16


class ColdPhaseActor(EngineActor):
    def set_cold_tokens(self, tokens: int) -> None:
        from runner.measurement.workloads import second_request

        second_request.COLD_OUTPUT_TOKENS = tokens


def trial_of(engine, point: dict, repeat: int, tokens: int):
    from runner.plan.grid import Trial, parse_point

    params = {"input_len": point["input_len"], "output_len": OUTPUT_LEN}
    return Trial(trial_id=f"t-{point['concurrency']}-{point['input_len']}-{tokens}-{repeat}",
                 engine_id=engine.engine_id, workload="second_request", params=parse_point("second_request", params),
                 point=params, concurrency=point["concurrency"], repeat=repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=4, help="blocks of each cold decode, alternated")
    args = parser.parse_args()

    import ray

    from runner.scheduling.cluster import connect_ray

    connect_ray(address=None)
    engine, actor = start_engine(ray, warmup="full", actor_class=ColdPhaseActor,
                                 workloads={"second_request": {}})
    figures: dict[tuple, dict[str, list]] = {}
    modes = (1, OUTPUT_LEN)
    repeat = 0
    for block in range(2 * args.blocks):
        for tokens in (modes if block % 2 == 0 else modes[::-1]):
            ray.get(actor.set_cold_tokens.remote(tokens))
            for point in POINTS:
                row = ray.get(actor.run_trial.remote(trial=trial_of(engine, point, repeat, tokens)), timeout=600).trial
                repeat += 1
                if row.status != "ok":
                    raise SystemExit(f"{row.trial_id}: {row.failure_kind}: {row.failure_reason}")
                if block == 0:  # the first visit of each point followed its warm-up
                    continue
                seen = figures.setdefault((point["concurrency"], point["input_len"], tokens), {})
                seen.setdefault("ttft", []).append(row.ttft_p50_s)
                seen.setdefault("decode", []).append(row.decode_tok_s_per_session)
                seen.setdefault("cold_s", []).append(row.wall_s - row.duration_s)  # an ok row has both
    ray.get(actor.shutdown.remote(), timeout=120)
    ray.kill(actor)
    agree = total = 0
    for point in POINTS:
        key = (point["concurrency"], point["input_len"])
        one, full = figures[key + (1,)], figures[key + (OUTPUT_LEN,)]
        for name, unit in (("ttft", "s"), ("decode", "tok/s")):
            a, b = one[name], full[name]
            spread = max(max(a) - min(a), max(b) - min(b))
            gap = abs(statistics.median(a) - statistics.median(b))
            agree, total = agree + (gap <= spread), total + 1
            print(f"c={key[0]} in={key[1]} repeat {name}: cold 1 token {statistics.median(a):.4g} {unit} "
                  f"({min(a):.4g}–{max(a):.4g}), cold {OUTPUT_LEN} tokens {statistics.median(b):.4g} "
                  f"({min(b):.4g}–{max(b):.4g}); gap {gap:.3g}, spread {spread:.3g}: "
                  f"{'agree' if gap <= spread else 'DIFFER'}")
        cold = [statistics.median(one["cold_s"]), statistics.median(full["cold_s"])]
        print(f"c={key[0]} in={key[1]}: the run beyond its measured window {cold[0]:.3f} s (cold 1 token) "
              f"against {cold[1]:.3f} s (cold {OUTPUT_LEN} tokens)")
    print(f"figures agree within their spread on {agree} of {total}")
    ray.shutdown()


if __name__ == "__main__":
    main()
