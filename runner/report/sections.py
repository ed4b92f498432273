"""report.md sections for the deployment questions: latency targets, Pareto, cost, recommendation, race, outputs."""
from __future__ import annotations

import pandas as pd

from runner.report.answer import answerable_question, selector_text, side_arms
from runner.report.render import md_table, section
from runner.report.schedule_report import prediction_blocks


BLOCKING_TITLE = "Before you use this answer:"  # the blocking caveats' heading (report.html marks that block)


def _question(a):
    return answerable_question(a.results.configs[0] if a.results.configs else {}, a.engines)


def question_title(a) -> str:
    question = _question(a)
    return question.name if question else ""


def _answer_intro(a) -> tuple[str, str]:
    """The question (said before the table) and the rules (after it)."""
    question = _question(a)
    s = a.settings
    asked = ""
    if question:
        sides = {side: ", ".join(side_arms(a.engines, getattr(question, side))) or "no arm" for side in ("a", "b")}
        asked = (f"Question: **{question.name}** — a: {selector_text(question.a)} ({sides['a']}) against b: "
                 f"{selector_text(question.b)} ({sides['b']}); \"by how much\" states a against b per workload, "
                 f"even where another arm leads. ")
    rules = ("Deploy: per point the simplest arm tied for first (spec off before speculation, the smaller k, then "
             "the sweep's arm order); where the choice differs by load, per load and one setting for all (tied for "
             f"first at the most points). Tied: the 95% interval of leader / arm reaches into ±{s.tie_band:.0%}. "
             "Load points in a row with the same choice merge into a range (c=1–16); the matrix below has every "
             "point. Details, rules and every number further down.")
    return asked, rules


def answer_section(a) -> str:
    if not len(a.answer):
        return section("Answer", "No measured trials yet.")
    draft = ["**Draft count**", *a.draft_lines] if a.draft_lines else []
    if a.deficit_lines:
        draft += ["", "**Prefix-cache deficit** (cache hits of a speculative arm against spec off's)",
                  *a.deficit_lines]
    blocking = "\n".join([f"**{BLOCKING_TITLE}**", *(f"- {b}" for b in a.blocking)])
    asked, rules = _answer_intro(a)
    rates = "\n".join(f"- {line}" for line in a.rate_lines)
    if a.rate_lines:
        from runner.report.rate_answer import RULE

        rules = f"{RULE} {rules}"
    return section("Answer", blocking if a.blocking else "", asked, rates, md_table(a.answer), "\n".join(draft),
                   rules)


def answer_text(a) -> str:
    """The terminal's closing block: the same Answer table and draft-count lines as report.md."""
    title = question_title(a)
    lines = ["answer" + (f" — {title}" if title else "") + ":",
             *(f"! {b.replace('**', '')}" for b in a.blocking), *(x.replace("**", "") for x in a.rate_lines),
             md_table(a.answer)]
    if a.draft_lines:
        lines += ["draft count:", *(line.removeprefix("- ").replace("**", "") for line in a.draft_lines)]
    if a.deficit_lines:
        lines += ["prefix-cache deficit:", *(line.removeprefix("- ").replace("**", "") for line in a.deficit_lines)]
    return "\n".join(lines)


def slo_section(a) -> str:
    s = a.settings
    if not s.slo:
        return section("Under a latency target", "No SLO set (set one with slo.ttft=500 in the sweep, or "
                       "--slo ttft=500 here; targets in ms: ttft, tpot, e2el, at slo.percentile: 50, 90 or 99).")
    if not len(a.slo_choices) and a.rate_lines:
        return section("Under a latency target", f"SLO: {s.slo.text()}. This rate search answers it by each arm's "
                       "highest rate within it (the Answer, and \"Against offered rate\"), not by a choice per "
                       "offered rate.")
    choices = a.slo_choices.assign(point=a.point_text(a.slo_choices)).drop(columns=["workload_params_json",
                                                                                    "concurrency"])
    choices = choices[["workload", "point", "meeting", "choice", "tok/s per device", "next", "ratio", "verdict"]]
    reach = a.slo_reach.copy()
    reach["params"] = [a.params_text(w, p) for w, p in zip(reach.workload, reach.workload_params_json)]
    reach = reach.sort_values(["workload", "params", "arm_order"])[["workload", "params", "arm", "within the SLO",
                                                                    "measured"]]
    return section(
        "Under a latency target",
        f"SLO: {s.slo.text()}. A point meets it when the median over repeats of each targeted trial figure is "
        f"within its limit. Throughput per device = aggregate decode tok/s ÷ tensor_parallel_size; the choice is "
        f"the arm with the most of it among those that meet the SLO, against the next one (ratio of medians "
        f"[95% interval, as in the verdicts]; a tie when the interval reaches into ±{s.tie_band:.0%}).",
        md_table(choices),
        "Highest concurrency within the SLO per arm: linear interpolation between the last measured concurrency "
        "that meets it and the first that misses it (an estimate between measured points, not a measurement).",
        md_table(reach))


def pareto_section(a, plot_names: list[str]) -> str:
    p = a.pareto
    if not len(p):
        return ""
    front = p[p.on_front].copy()
    front["params"] = [a.params_text(w, q) for w, q in zip(front.workload, front.workload_params_json)]
    table = front.sort_values(["workload", "params", "per_device"])[
        ["workload", "params", "arm", "concurrency", "per_device", "per_session", "n"]].rename(
        columns={"per_device": "tok/s per device", "per_session": "tok/s per session", "n": "repeats"})
    pictures = "\n\n".join(f"![{n}]({n})" for n in plot_names)
    return section("Pareto: per-session speed against throughput per device",
                   "Medians over repeats per arm and concurrency: tok/s per session (1 / median TPOT) against "
                   "aggregate decode tok/s ÷ devices. On the front: no other point is at least as good on both "
                   "axes and better on one.", md_table(table), pictures)


def cost_section(a) -> str:
    if a.settings.gpu_hour_usd is None:
        return ""
    c = a.cost.assign(point=a.point_text(a.cost)).sort_values(["workload", "point", "arm_order"])
    table = c[["workload", "point", "arm", "devices", "aggregate tok/s", "$ per 1M output tokens",
               "J per output token", "n"]].rename(columns={"n": "repeats"})
    return section("Cost", f"At ${a.settings.gpu_hour_usd:g} per device-hour: $ per 1M output tokens = price × "
                   "devices ÷ (median aggregate decode tok/s × 3600). Decode throughput at that load only; idle "
                   "time and other phases are not priced. J per output token: the GPUs' median energy per output "
                   "token (section Energy; blank where not measured).", md_table(table))


def recommendation_section(a) -> str:
    """The answers' deploy lines (runner.report.study_answer), with the evidence recommendation.yaml keeps."""
    from runner.report.study_answer import RULES, measured_with_text

    rows = []
    for workload, answer in a.answers.items():
        entry = a.recommendation["workloads"].get(workload, {})
        evidence = entry.get("evidence") or {}
        ratio = evidence.get("ratio_where_won")
        if evidence:
            shown = (f"won {evidence.get('points_won')}, tied {evidence.get('points_tied_for_first')}"
                     + (f"; {ratio} [{evidence.get('interval_where_won')}] over {evidence.get('over')}"
                        if ratio else ""))
        else:
            shown = answer.by_how_much
        drafts = "; ".join(f"{d['method']}: {d['k_per_range']}"
                           + (f" (single k: {d['single_k']})" if d["single_k"] is not None else "")
                           for d in entry.get("draft_count", []))
        if not drafts and answer.draft_count is not None:
            drafts = f"k={answer.draft_count} (the deployed arm's)"
        deploy = answer.deploy
        serve = deploy.serve if deploy and deploy.serve else "–"
        beside = measured_with_text(deploy)
        rows.append({"workload": workload, "deploy": answer.choice or f"none: {answer.why_none}",
                     "answered by": answer.answerer.value, "evidence": shown, "draft count": drafts or "–",
                     "vllm serve": serve + (f" ({beside})" if beside else ""),
                     "caveats": "; ".join(c.text for c in answer.caveats) or "–"})
    rules = a.recommendation["rules"]
    used = "; ".join(f"{x.value}: {RULES[x]}" for x in dict.fromkeys(v.answerer for v in a.answers.values()))
    return section("Recommendation", f"Also in recommendation.yaml and answer.json (engine arguments, serve flags, "
                   f"every point). Answered by — {used}. Choice per point: {rules['choice']}. Winner: "
                   f"{rules['winner']}. Single k: {rules['single_k']}.", md_table(pd.DataFrame(rows)))


def race_section(a) -> str:
    r = a.race
    if not len(r):
        return ""
    total_trials, total_s = int(r["trials skipped"].sum()), float(r["device s saved (est.)"].sum())
    return section("Early elimination (race)",
                   f"{total_trials} trial(s) skipped, about {total_s:,.0f} device-seconds saved (each skipped "
                   "trial counted at the median device time of the same arm's trials at the same point — its "
                   "span on the timeline, warm-up included — × its devices).", md_table(r))


def degenerate_section(a) -> str:
    d = a.degenerate
    if "distinct_token_share" not in a.trials or a.trials.distinct_token_share.isna().all():
        return ""
    if not len(d):
        return section("Degenerate outputs", "None: every arm's median distinct-token share is ≥ 25%.")
    return section("Degenerate outputs", "These arms' outputs repeat a few tokens (median over trials of the "
                   "distinct token ids / output tokens, per request, < 25%): their speculative acceptance does not "
                   "represent real text.", md_table(d))


def device_time_section(a) -> str:
    """Per folder: where its wall time went (runner.report.timeline)."""
    from runner.report.timeline import device_time

    f = a.frames
    phases = f.phases
    if phases is None or not len(phases):
        return ""
    parts = []
    for source in a.results.sources:
        split = device_time(phases[phases.source == source], f.engines[f.engines.source == source],
                            f.ran[f.ran.source == source])
        if split is not None:
            parts += [f"**{source}**", md_table(pd.DataFrame(split.rows()))]
    if not parts:
        return ""
    return section("Where the device time went",
                   "From the driver's timeline (phases.parquet); across resumes the wall adds up each command's "
                   "own span, breaks between commands excluded. A switch is the "
                   "gap between two engines' trials on one device with no load in it; a load's runner overhead is "
                   "that gap less vLLM's own init (load_s).", *parts)


def schedule_section(a) -> str:
    """The draft count as vLLM deploys it: the derived schedule, the schedule arms' outcome, predicted AL."""
    parts = []
    for s in a.schedules:
        where = a.params_text(s["workload"], s["workload_params_json"])
        loads = pd.DataFrame([{"c": x["concurrency"], "requests per step": x["batch_size"],
                               "best k": "–" if x["best_k"] is None else x["best_k"],
                               "tied for first": "/".join(map(str, x["tied"]))} for x in s["loads"]])
        head = f"**{s['workload']}, {s['method']}** ({where}{', ' + s['family'] if s['family'] else ''})"
        if s["schedule"] is None:
            parts += [head + f": no schedule — {s.get('why_none')}.", md_table(loads)]
        else:
            parts += [head + f": `num_speculative_tokens_per_batch_size: {s['schedule'].as_list()}` "
                      f"({s['check']}; up to max_num_seqs={s['max_num_seqs']})", md_table(loads),
                      f"`vllm serve <model> {s['serve_flag']}` — a prediction from static arms: measure it as an "
                      f"arm before deploying it."]
    outcome = a.schedule_outcomes
    if len(outcome):
        shown = outcome.assign(point=a.point_text(outcome))[["workload", "point", "schedule arm", "static k chosen",
                                                             "vs static k", "vs off"]]
        parts += ["Schedule arms against the static k chosen at the same load and against spec off, each as it "
                  "ran (the decision rule on the two alone):", md_table(shown)]
    p = a.al_predictions
    if len(p):
        shown = p.assign(point=[f"c={c}" for c in p.concurrency])[["workload", "method", "acceptance", "point",
                                                                   "from k", "k", "predicted AL", "measured AL",
                                                                   "inside"]]
        parts += ["Acceptance length predicted for k from an engine drafting more (chain drafters: AL(k) = 1 + the "
                  "sum of the first k per-position rates), against AL measured at k (mean over repeats, 95% t "
                  "interval). With real acceptance a prediction is a contender to measure, not a result:",
                  md_table(shown)]
    parts += prediction_blocks(a.speed_predictions)
    if not parts:
        return ""
    return section("Draft count as vLLM deploys it",
                   "The best k per load (the smallest k tied for first; k = 0 where speculation loses), keyed on the "
                   "engine's measured requests per step, merged into vLLM's per-batch-size schedule "
                   "(speculative_config.num_speculative_tokens_per_batch_size).", *parts)


def agreement_section(a) -> str:
    """Folders that ran the same points: each later one against the first (runner.report.agreement)."""
    from runner.report.agreement import BAND, agreement_line, agreement_rows
    from runner.report.samples import sample_values

    f = a.frames
    rows = agreement_rows(f.ran, sample_values(f.ran, f.ran_requests), a.results.sources)
    if not len(rows):
        return ""
    lines, tables = [], []
    for _, mine in rows.groupby("source", sort=False):
        lines.append(agreement_line(mine) + ".")
        by = mine.groupby("workload").agg(points=("ratio", "size"),
                                          within=("ratio", lambda x: int(((x - 1).abs() <= BAND).sum())),
                                          median_ratio=("ratio", "median"), inside=("inside", "sum")).reset_index()
        tables.append(md_table(by.assign(source=mine.source.iloc[0])[["source", "workload", "points", "within",
                                                                      "median_ratio", "inside"]].round(3)))
    return section("Agreement between runs", "The same points (engine, workload, params, concurrency) in several "
                   "folders, each later folder against the first, on the deciding figure: " + " ".join(lines),
                   *tables)


def _warmup_modes(trials) -> str:
    """' (light)' from the trials' `warmup` column; nothing for folders written before it."""
    if "warmup" not in getattr(trials, "columns", ()):
        return ""
    modes = sorted(str(m) for m in trials.warmup.dropna().unique())
    return f" ({', '.join(modes)})" if modes else ""


def first_trial_section(a) -> str:
    """Each load's first trial: its two runs side by side, and each load's and wake's first trial against the same
    point in later rounds (runner.report.first_trials)."""
    from runner.report.first_trials import (BAND, first_at_point_checks, first_run_checks, first_run_line,
                                            first_trial_checks, point_line, summary_line)
    from runner.report.samples import sample_values

    r = a.frames
    samples = sample_values(r.ran, r.ran_requests)
    first_runs = r.first_runs
    twice = first_run_checks(r.ran, samples, first_runs, sample_values(first_runs, r.first_run_requests)
                             if first_runs is not None and len(first_runs) else samples.iloc[0:0], r.engines)
    checks = first_trial_checks(r.ran, samples, r.phases)
    at_points = first_at_point_checks(r.ran, samples)
    points = point_line(at_points)
    if not len(checks) and not points and not len(twice):
        return ""
    parts = []
    if len(twice):
        parts.append(md_table(twice.drop(columns=["source"]).round({"first": 4, "kept": 4, "ratio": 3})))
    outside = checks[(checks.ratio - 1).abs() > BAND]
    if len(outside):
        parts += ["Against later rounds, outside the band:", md_table(outside.drop(columns=["source"]).round(
            {"first": 4, "later_median": 4, "later_spread": 3, "ratio": 3}))]
    worse = at_points[at_points.ratio < 1 - BAND]
    if len(worse):
        parts += [f"Points whose first measurement ran worse than their later repeats by more than {BAND:.0%}:",
                  md_table(worse.drop(columns=["source"]).round({"first": 4, "later_median": 4, "ratio": 3}))]
    twice_text = (f"Each engine's first trial after a load or a pool wake ran twice with the same prompts and keeps "
                  f"the second: {first_run_line(twice)}. ") if len(twice) else ""
    return section("First trials", f"Warm-up{_warmup_modes(r.ran)} keeps first-use costs out of the figures; this "
                   f"checks it on the deciding figure (ratio > 1: the first run was better). {twice_text}Against the "
                   "median of the same point (engine, workload, params, concurrency) in other rounds, which send "
                   "other prompts and so carry "
                   f"their own spread too: {summary_line(checks) or 'no load or wake is followed by a repeated point'}. "
                   f"{points + '.' if points else ''}", *parts)
