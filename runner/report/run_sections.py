"""The report's sections about the run itself: the points' sources, the metrics, per-point detail, engines, KV
capacity, divergent outputs, failures, bandwidth and the best draft count (markdown from the one Analysis)."""
from __future__ import annotations

import pandas as pd

from runner.report import flags, verdict
from runner.report.arms import describe_point, fixed_params, point_axes, point_coords
from runner.report.render import md_table, percent, section
from runner.report.samples import deciding_metric


def params_text(trials: pd.DataFrame, workload: str, params_json: str) -> str:
    axes = [x for x in point_axes(trials[trials.workload == workload]) if x != "concurrency"]
    return describe_point(point_coords({"workload_params_json": params_json, "concurrency": 0}), axes)


def point_text(frame: pd.DataFrame, trials: pd.DataFrame) -> list[str]:
    axes_of = {w: point_axes(trials[trials.workload == w]) for w in frame.workload.unique()}
    return [describe_point(point_coords(r), axes_of[r["workload"]]) for r in frame.to_dict("records")]


def sources_section(a) -> str:
    rows = []
    for source in a.results.sources:
        t = a.frames.ran[a.frames.ran.source == source]  # as persisted: spec off once, not per profile
        e = a.engines[a.engines.source == source]
        rows.append({"folder": source, "sweep": ", ".join(map(str, t.sweep.unique())) or "–",
                     "run": ", ".join(map(str, t.run_id.unique())) or "–",
                     "trials ok/failed": f"{int((t.status == 'ok').sum())}/{int((t.status != 'ok').sum())}",
                     "engines ok/failed": f"{int((e.status == 'ok').sum())}/{int((e.status != 'ok').sum())}",
                     "device": ", ".join(map(str, e.device_name.dropna().unique())) or "–",
                     "vLLM": ", ".join(map(str, e.vllm_version.dropna().unique())) or "–"})
    return section("Sources", md_table(pd.DataFrame(rows)))


def metrics_section(a) -> str:
    used = list(dict.fromkeys(a.trials.workload)) if len(a.trials) else []
    rows = [{"workload": w, "decided by": deciding_metric(w).heading
             + (f"; requests: {deciding_metric(w).requests.description}" if deciding_metric(w).requests else "")
             } for w in used]
    s = a.settings
    return section("What decides each workload", md_table(pd.DataFrame(rows)),
                   "Each workload declares its figure in the workload registry. Values are medians over repeats "
                   "(one sample per trial, i.e. per repeat; fixed_task: per measured run). \"By how much\" is the "
                   "ratio of medians, leader over runner-up (> 1: the leader is better); its 95% interval is a "
                   f"seeded percentile bootstrap (seed {s.seed}) of the ratio of medians, each arm's repeats "
                   "resampled independently, widened where they are wider to Welch's t interval on log values "
                   "and to the distribution-free interval of the pairwise ratios (with few repeats a bootstrap "
                   "alone is too narrow; with 3 against 3 the pairwise range covers only 90 %). A winner is named "
                   f"only when that interval lies wholly above 1 + {s.tie_band:g} (the tie band) and every arm has ≥ {s.min_repeats} repeats; otherwise "
                   "\"tie within noise\" or \"not enough repeats\", with the numbers. At a point where any arm "
                   "is at the KV capacity wall the outcome is \"neither: KV capacity limit\".")


def detail_section(a) -> str:
    blocks = []
    for workload in dict.fromkeys(a.points.workload):
        metric = deciding_metric(workload)
        mine = a.points[a.points.workload == workload].copy()
        mine["point"] = point_text(mine, a.trials)
        mine["cell"] = [(f"{metric.display(m)} [{metric.display(lo)}–{metric.display(hi)}] (n={n})" if n > 1 else
                         f"{metric.display(m)} (n={n})") if n else
                        (f"skipped ({k})" if k and not f else f"failed ({f})")
                        for m, lo, hi, n, f, k in zip(mine["median"], mine.ci_lo, mine.ci_hi, mine.n, mine.n_failed,
                                                      mine.n_skipped)]
        order = mine.sort_values("arm_order").arm.unique()
        table = mine.pivot_table(index="point", columns="arm", values="cell", aggfunc="first", sort=False)
        table = table[[c for c in order if c in table.columns]].reset_index()
        outcome = a.outcomes[a.outcomes.workload == workload].copy()
        outcome["point"] = point_text(outcome, a.trials)
        table = table.merge(outcome[["point", "outcome"]], on="point", how="left")
        fixed = fixed_params(a.trials[a.trials.workload == workload])
        fixed_text = ", ".join(f"{k}={v}" for k, v in fixed.items() if not (isinstance(v, float) and v != v))
        blocks.append(f"### {workload}\n\n{metric.heading}; fixed: {fixed_text or '–'}\n\n{md_table(table)}")
    return section("Per workload", *blocks) if blocks else ""


def engines_section(a) -> str:
    e = a.engines.sort_values("arm_order")
    if not len(e):
        return ""
    table = pd.DataFrame({
        "arm": e.arm, "status": e.status, "KV tokens": e.kv_capacity_tokens, "KV blocks": e.num_kv_blocks,
        "block": e.block_size, "max conc. at max len": e.max_concurrency_at_max_len,
        "weights GiB": e.weights_gib, "KV GiB": e.kv_budget_gib, "load s": e.load_s, "memory source": e.memory_source})
    return section("Engines: memory and KV capacity", md_table(table))


def capacity_section(a) -> str:
    c = a.capacity
    if not len(c):
        return section("Capacity-wall flags", f"None: no trial's live KV demand (sessions × context) reached "
                                              f"{flags.CAPACITY_WALL_SHARE:.0%} of its engine's KV pool, and no "
                                              f"preemptions.")
    table = pd.DataFrame({"workload": c.workload, "point": point_text(c, a.trials), "repeat": c.repeat,
                          "arm": c.arm, "live KV demand": c.demand_tokens, "KV pool": c.pool_tokens,
                          "demand/pool": [percent(v) for v in c.demand_share], "preemptions": c.num_preemptions,
                          "KV peak": [percent(v) for v in c.kv_usage_peak], "why": c.why})
    return section("Capacity-wall flags", "These points measure the KV pool, not the configuration: the verdict "
                   "calls them \"neither: KV capacity limit\".", md_table(table))


def divergence_section(a) -> str:
    d = a.divergence
    if not len(d):
        return section("Output divergence", "None: at every point, arms generated the same tokens as the reference "
                                            "arm (trial output hashes equal).")
    table = pd.DataFrame({"workload": d.workload, "point": point_text(d, a.trials), "repeat": d.repeat,
                          "arm": d.arm, "reference": d.reference,
                          "requests differing": [f"{x}/{y}" for x, y in zip(d.requests_differing, d.requests_compared)]})
    return section("Output divergence", "These arms generated different tokens from the reference at the same "
                   "point (greedy decoding): their speed is not a like-for-like comparison.", md_table(table))


def failures_section(a) -> str:
    if not len(a.failures):
        return section("Failed configurations", "None.")
    return section("Failed configurations", "A configuration that did not start is a result: its reason is below.",
                   md_table(a.failures))


def bandwidth_section(a) -> str:
    b = a.bandwidth
    if not len(b):
        return ""
    known = b[b.bound_tok_s.notna()]
    if not len(known):
        devices = ", ".join(map(str, b.device.dropna().unique())) or "unknown"
        return section("Decode against the memory-bandwidth bound",
                       f"Device bandwidth not known for: {devices} (known: "
                       f"{', '.join(p for p, _ in flags.KNOWN_BANDWIDTH)}; fix: --bandwidth-tbs=<TB/s>).")
    table = pd.DataFrame({"workload": known.workload, "point": point_text(known, a.trials), "arm": known.arm,
                          "device": known.device, "TB/s": known.bandwidth_tb_s, "weights GiB": known.weights_gib,
                          "tok/s/session": known.tok_s, "bound tok/s": known.bound_tok_s,
                          "share": [percent(v) for v in known.share]})
    return section("Decode against the memory-bandwidth bound",
                   "Bound = bandwidth / weight bytes (every decode step reads all weights once). Speculative "
                   "decoding emits several tokens per read, so its share can pass 100%.", md_table(table))


def draft_section(a) -> str:
    if not len(a.draft_summary):
        return section("Best draft count", "No speculative arms in these results.")
    detail = a.draft_choices.copy()
    detail["point"] = point_text(detail, a.trials)
    detail["tied"] = ["/".join(map(str, t)) for t in detail.tied]
    detail["best_k"] = [("–" if pd.isna(k) else int(k)) if k is not None else "–" for k in detail.best_k]
    detail_table = detail[["workload", "method", "point", "best_k", "tied", "scores"]].rename(
        columns={"best_k": "best k", "tied": "tied with the best",
                 "scores": "median [95% interval] per k"})
    return section("Best draft count",
                   "Per point, the k with the best median leads; every k whose ratio interval against it reaches "
                   f"into the ±{a.settings.tie_band:.0%} tie band ties with it, and the smallest tied k is chosen; "
                   f"k=0 is spec off. Fewer than {a.settings.min_repeats} repeats: no choice, said as such. "
                   f"Single k: {verdict.SINGLE_K_RULE}.",
                   md_table(a.draft_summary), md_table(detail_table))
