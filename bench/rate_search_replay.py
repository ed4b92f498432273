"""The rate search's policy replayed on CPU over a model of recorded probes: per policy (this tree's and a base
revision's), the probes, stages, simulated wall and each arm's final bracket and answer.

Each policy's own planner (runner.plan.rate_search, imported from its tree) plans every stage of the documented
search (`sweep=rate_search slo.ttft=500`: two arms, precision 0.1, 3 repeats, 400 requests, 15 s probes) from the
simulated rows of the stages before; each probe is simulated request by request (Poisson arrivals at its rate,
each request's TTFT from the model) and judged by that tree's own stop rule (runner.numerics.rate_probe) every
50 ms, as the driver does, so a probe stops where the real one would and a "met" needs its 299 answered requests.

The model per arm, fitted to a recorded rate search's probes (default: the committed H100 run): TTFT p50 and p99
linear in the load (offered rate over saturation's throughput), lognormal between them, plus a queue's wait that
puts the p99 on the target at `--crossing` of the saturation throughput (where that is, the recorded probes do not
say: they stop at 93 % of it, p99 0.19–0.31 s; every scenario is printed) and grows without bound past it; each
request's decode time (E2E − TTFT) from the recorded probes, times `--decode-scale` (the H200 decodes faster
than the recorded H100: 0.5 brings the old policy's windows near the H200's measured 228 s). Saturation: every
request at once, TTFTs spread evenly up to the recorded p99, throughput `--card`'s. Wall: the measured windows
plus, from the H200 run of the old policy (349 s: loads 37.5 s, 14 probes 268 s of which windows 228 s), 2.86 s a
probe and 81 s for the rest.

    python bench/rate_search_replay.py                  # this tree against main, the H200's saturation figures
    python bench/rate_search_replay.py --card recorded --crossing 0.97 --seeds 5
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "docs" / "results" / "h100-2026-12-05" / "rs1"
TARGET_S = 0.5
# Saturation throughput (req/s) per arm on the H200 with vLLM 0.26.0, and the answers' intervals there (old policy).
H200 = {"mtp:3": 27.1, "off": 23.4}
H200_INTERVALS = {"mtp:3": (25.2, 27.1), "off": (21.7, 23.4)}
FIXED_S = 37.5 + (349.0 - 268.0 - 37.5)  # loads and everything outside the probes, H200 run at 349 s
PER_PROBE_S = (268.0 - 228.0) / 14  # a probe's time outside its measured window
TICK_S = 0.05
DECODE_SCALE = [1.0]  # set from --decode-scale


def arm_label(spec_method: str, k) -> str:
    return "off" if spec_method == "off" else f"{spec_method}:{int(k)}"


# ---------------------------------------------------------------- the model, fitted to the recorded probes


def fit(folder: Path) -> dict:
    import numpy as np
    import pandas as pd

    trials = pd.read_parquet(folder / "trials.parquet")
    trials = trials[trials.status == "ok"]
    models = {}
    for (method, k), rows in trials.groupby(["spec_method", trials.num_speculative_tokens.fillna(0)]):
        rate = rows.workload_params_json.map(lambda s: float(json.loads(s)["request_rate"]))
        sat = rows[rate == math.inf]
        x_sat = float(sat.request_throughput_req_s.median())
        probes = rows[rate < math.inf]
        load = (rate[rate < math.inf] / x_sat).to_numpy()

        def line(column):
            slope, intercept = np.polyfit(load, column.to_numpy(), 1)
            return [float(intercept), float(slope)]

        models[arm_label(method, k)] = {
            "x_recorded": x_sat, "p50": line(probes.ttft_p50_s), "p99": line(probes.ttft_p99_s),
            "decode": line(probes.e2e_p50_s - probes.ttft_p50_s), "sat_p99": float(sat.ttft_p99_s.median()),
            "probes": [[float(a), float(b)] for a, b in zip(load, probes.ttft_p99_s)]}
    return models


def _at(line, load):
    return line[0] + line[1] * load


def ttfts(model: dict, *, load: float, arrivals, crossing: float, rng):
    """Each request's TTFT (s) at `load` of saturation's throughput, arriving at `arrivals` (s)."""
    import numpy as np

    p50 = max(_at(model["p50"], min(load, 1.0)), 1e-3)
    p99 = max(_at(model["p99"], min(load, 1.0)), p50 * 1.01)
    sigma = math.log(p99 / p50) / 2.326
    base = p50 * np.exp(sigma * rng.standard_normal(len(arrivals)))
    # The queue's mean wait m0·u/(1−u), m0 such that the p99 reaches the target at `crossing`.
    p99_cross = max(_at(model["p99"], crossing), 1e-3)
    m0 = max(TARGET_S - p99_cross, 1e-3) / math.log(100) * (1 - crossing) / crossing
    u = min(load, 0.999)
    wait = rng.exponential(m0 * u / (1 - u), len(arrivals))
    backlog = max(load - 1.0, 0.0) * np.asarray(arrivals)  # past saturation the queue grows with time
    return base + wait + backlog


# ---------------------------------------------------------------- one probe, judged as the driver judges it


def simulate_probe(model: dict, *, rate: float, planned: int, stop: bool, x_sat: float, crossing: float, rng):
    """(row figures, window s) of one probe."""
    import numpy as np
    from runner.numerics.rate_probe import StopRule

    rule = StopRule(target_s=TARGET_S, percentile=99.0, planned=planned, min_requests=min(50, planned))
    decode = max(_at(model["decode"], min(rate / x_sat, 1.0)), 0.1) * DECODE_SCALE[0]
    if math.isinf(rate):
        ttft = np.sort(rng.uniform(0, model["sat_p99"] / 0.99, planned))
        verdict = rule.judge(list(ttft))
        throughput = x_sat * (1 + 0.01 * rng.standard_normal())
        window = planned / throughput
        return {"ttft_p99_s": float(np.percentile(ttft, 99)), "probe_verdict": str(verdict.decision),
                "request_throughput_req_s": throughput, "sent": planned}, window
    arrivals = np.cumsum(rng.exponential(1.0 / rate, planned))
    arrivals -= arrivals[0]
    first = arrivals + ttfts(model, load=rate / x_sat, arrivals=arrivals, crossing=crossing, rng=rng)
    sent = planned
    if stop:
        now = TICK_S
        while now < arrivals[-1] + TICK_S:
            n = int(np.searchsorted(arrivals, now, side="right"))
            answered = first[:n][first[:n] <= now] - arrivals[:n][first[:n] <= now]
            waiting = now - arrivals[:n][first[:n] > now]
            if rule.judge(list(answered), list(waiting)).decided:
                sent = n
                break
            now += TICK_S
    ttft = first[:sent] - arrivals[:sent]
    verdict = rule.judge(list(ttft))
    window = float(np.max(first[:sent] + decode))
    return {"ttft_p99_s": float(np.percentile(ttft, 99)), "probe_verdict": str(verdict.decision),
            "request_throughput_req_s": sent / window, "sent": sent}, window


# ---------------------------------------------------------------- one search with this interpreter's runner


def search(models: dict, *, card: dict, crossing: float, seed: int) -> dict:
    import numpy as np
    from runner.config.store import load_config
    from runner.numerics.rate_bracket import bracket, crossing as crossing_at, ordered
    from runner.plan.rate_search import line_points
    from runner.plan.stages import adaptive_study
    from runner.slo import Metric, Slo, Target

    config = load_config(["tracking=none", "sweep=rate_search", f"slo.ttft={TARGET_S * 1000:g}"])
    study = adaptive_study(config.sweep.adaptive)
    slo = Slo(targets=(Target(metric=Metric.TTFT, ms=TARGET_S * 1000),))
    rows, stages, windows, probes, arms = [], [], [], [], {}
    while (stage := study.stage(len(stages), config=config, rows=rows)) is not None:
        stages.append(stage.name)
        engines = {e.engine_id: arm_label(e.settings.spec_method, e.settings.num_speculative_tokens or 0)
                   for e in stage.plan.engines}
        for t in stage.plan.trials:
            arm = engines[t.engine_id]
            arms[t.engine_id] = arm
            rate = float(t.params.request_rate)
            rng = np.random.default_rng([seed, zlib.crc32(t.trial_id.encode())])
            figures, window = simulate_probe(models[arm], rate=rate, planned=t.params.arrivals(),
                                             stop=bool(getattr(t.params, "stop_when_decided", False)),
                                             x_sat=card[arm], crossing=crossing, rng=rng)
            windows.append(window)
            probes.append({"stage": stage.name, "arm": arm, "rate": rate, "repeat": t.repeat,
                           "planned": t.params.arrivals(), "window_s": round(window, 2), **figures})
            rows.append({"trial_id": t.trial_id, "engine_id": t.engine_id, "workload": t.workload,
                         "workload_params_json": t.params_json, "repeat": t.repeat, "status": "ok", **figures})
    answers = {}
    for key, points in line_points(rows, slo).items():
        b = bracket(points, slo, precision=config.sweep.rate_search.precision)
        line = ordered(points)
        estimate, _ = crossing_at([p.x for p in line], [{n: p.median(n) for n in slo.limits} for p in line], slo)
        answers[arms[key[0]]] = {"estimate": estimate, "low": b.low.x if b.low else math.nan,
                                 "high": b.high.x if b.high else math.nan, "state": str(b.state)}
    return {"stages": stages, "probes": probes, "windows_s": sum(windows), "answers": answers,
            "wall_s": FIXED_S + sum(windows) + PER_PROBE_S * len(probes)}


# ---------------------------------------------------------------- driver: each policy in its own interpreter


def _tree(base: str, into: Path) -> Path:
    """The base revision's runner/ and configs (git archive), importable from `into`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", base, "runner", "conf", "sweeps"], check=True,
                             capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def _run_policy(tree: Path, args, crossing: float) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, __file__, "--one", "--card", args.card, "--crossing", str(crossing),
           "--seeds", str(args.seeds), "--recorded", str(args.recorded), "--decode-scale", str(args.decode_scale)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=str(ROOT))
    return json.loads(out.stdout.strip().splitlines()[-1])


def _card(args, models) -> dict:
    return dict(H200) if args.card == "h200" else {arm: m["x_recorded"] for arm, m in models.items()}


def _summary(label: str, crossing: float, runs: list[dict], card: str) -> list[str]:
    walls = [r["wall_s"] for r in runs]
    lines = [f"{label:>6} crossing {crossing:.2f}: probes {statistics.median(len(r['probes']) for r in runs):.0f}, "
             f"stages {statistics.median(len(r['stages']) for r in runs):.0f}, windows "
             f"{statistics.median(r['windows_s'] for r in runs):.0f} s, wall {statistics.median(walls):.0f} s "
             f"[{min(walls):.0f}–{max(walls):.0f}] over {len(runs)} seeds"]
    for arm in sorted(runs[0]["answers"]):
        cells = []
        for r in runs:
            a = r["answers"][arm]
            inside = ""
            if card == "h200":
                lo, hi = H200_INTERVALS[arm]
                inside = " in" if lo <= a["estimate"] <= hi else " OUT"
            cells.append(f"{a['estimate']:.3g} [{a['low']:.3g}–{a['high']:.3g}]{inside}")
        lines.append(f"        {arm:>6}: " + "; ".join(cells))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the revision whose policy is the 'old' one")
    parser.add_argument("--card", choices=("h200", "recorded"), default="h200",
                        help="saturation throughputs: the H200's (27.1, 23.4 req/s) or the recorded run's")
    parser.add_argument("--crossing", type=float, nargs="+", default=[0.99, 0.97, 0.95, 0.94, 0.90, 0.60],
                        help="where TTFT p99 reaches the target, as a share of the saturation throughput")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--decode-scale", type=float, default=0.5, help="each request's decode time, × the recorded")
    parser.add_argument("--recorded", type=Path, default=RECORDED)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one policy: JSON runs to stdout
    parser.add_argument("--probes", action="store_true", help="print each probe of the first seed")
    args = parser.parse_args()
    models = fit(args.recorded)
    DECODE_SCALE[0] = args.decode_scale
    if args.one:
        # Each tree's own conf/ and sweeps/ (an editable install would map the configs to its checkout's).
        sys.meta_path[:] = [f for f in sys.meta_path if "_EditableFinder" not in repr(f)]
        crossing = args.crossing[0]
        print(json.dumps([search(models, card=_card(args, models), crossing=crossing, seed=s)
                          for s in range(args.seeds)]))
        return
    shown = args.recorded.relative_to(ROOT) if args.recorded.is_relative_to(ROOT) else args.recorded
    print(f"model fitted to {shown}:")
    for arm, m in models.items():
        print(f"  {arm}: recorded saturation {m['x_recorded']:.2f} req/s; TTFT p99 ≈ {m['p99'][0]:.3f} + "
              f"{m['p99'][1]:.3f}·load s below the knee (recorded at load/p99: "
              + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in sorted(m["probes"])) + ")")
    print(f"saturation throughput used ({args.card}): {_card(args, models)}; wall = {FIXED_S:.1f} s + windows + "
          f"{PER_PROBE_S:.2f} s a probe; decode × {args.decode_scale:g}")
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"old": _tree(args.base, Path(tmp)), "new": ROOT}
        for crossing in args.crossing:
            for label, tree in trees.items():
                runs = _run_policy(tree, args, crossing)
                print("\n".join(_summary(label, crossing, runs, args.card)))
                if args.probes:
                    for p in runs[0]["probes"]:
                        print(f"          {p['stage']:>10} {p['arm']:>6} rate {p['rate']:<6g} r{p['repeat']} "
                              f"planned {p['planned']:>3} sent {p['sent']:>3} window {p['window_s']:>5} s "
                              f"p99 {p['ttft_p99_s']:.3f} s {p['probe_verdict']}")
            print()


if __name__ == "__main__":
    main()
