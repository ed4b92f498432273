"""The report: analyse persisted Parquet (pure), then write report.md and PNGs and print the headline tables."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from runner.report import categories, flags, plots, rates, sections, study_plots, verdict
from runner.report.answer import answer_table, draft_count_lines
from runner.report.answering import answered_verdict, study_answers, worded
from runner.report.study_answer import Study, StudyKind, finite_or_none
from runner.report.blocking import blocking_caveats
from runner.report.cache_deficit import cache_deficit, deficit_lines, deficit_section
from runner.report.cost import cost_table
from runner.report.energy import energy_section
from runner.report.failed_run import nothing_measured, write_failed_run
from runner.report.html import to_html
from runner.report.load import Results, load_results
from runner.report.matrix import matrix_section
from runner.report.samples import deciding_metric, point_table, sample_values
from runner.report.pareto import pareto_points
from runner.report.frames import Frames, analysis_frames
from runner.report.acceptance_profile import acceptance_profile_section
from runner.report.schedule_report import (acceptance_predictions, derived_schedules, predicted_vs_measured,
                                           schedule_outcomes, schedule_recommendations)
from runner.report.race_report import race_stops
from runner.report.rate_answer import rate_search
from runner.report.repeats import repeats_section
from runner.report.run_sections import (bandwidth_section, capacity_section, detail_section, divergence_section,
                                         draft_section, engines_section, failures_section, metrics_section,
                                         params_text, point_text, sources_section)
from runner.report.shared_device import shared_device_section
from runner.report.recommend import recommendation
from runner.report.render import md_table, section
from runner.config.report import ReportSettings, parse_settings
from runner.slo import config_slo
from runner.report.latency_target import arm_point_figures, max_concurrency, slo_choices


ANSWER_FILE = "answer.json"  # the Answer table as records: the W&B sweep run shows it
HTML_FILE = "report.html"  # report.md as one self-contained page (runner.report.html)


@dataclass(kw_only=True)
class Analysis:
    """Every table the report shows, computed from the persisted files alone."""

    results: Results  # where the frames came from: its sources and configs (the sections read the frames)
    settings: ReportSettings
    frames: Frames
    engines: pd.DataFrame
    trials: pd.DataFrame
    requests: pd.DataFrame
    points: pd.DataFrame
    outcomes: pd.DataFrame
    verdict: pd.DataFrame
    crossovers: pd.DataFrame
    draft_choices: pd.DataFrame
    draft_summary: pd.DataFrame
    capacity: pd.DataFrame
    divergence: pd.DataFrame
    degenerate: pd.DataFrame
    failures: pd.DataFrame
    bandwidth: pd.DataFrame
    slo_choices: pd.DataFrame
    slo_reach: pd.DataFrame
    pareto: pd.DataFrame
    cost: pd.DataFrame
    race: pd.DataFrame
    recommendation: dict
    answer: pd.DataFrame
    answers: dict  # workload → runner.report.study_answer.WorkloadAnswer: what every output renders
    draft_lines: list[str]
    schedules: list = field(default_factory=list)  # runner.report.schedule_report.derived_schedules
    schedule_outcomes: pd.DataFrame = field(default_factory=pd.DataFrame)
    al_predictions: pd.DataFrame = field(default_factory=pd.DataFrame)
    speed_predictions: pd.DataFrame = field(default_factory=pd.DataFrame)  # schedule_report.predicted_vs_measured
    blocking: list[str] = field(default_factory=list)  # runner.report.blocking: said above the Answer
    rate_points: pd.DataFrame = field(default_factory=pd.DataFrame)  # runner.report.rate_answer.RateSearch's
    highest_rates: pd.DataFrame = field(default_factory=pd.DataFrame)
    rate_verdicts: list = field(default_factory=list)
    rate_lines: list[str] = field(default_factory=list)
    cache_deficit: pd.DataFrame = field(default_factory=pd.DataFrame)  # runner.report.cache_deficit
    deficit_lines: list[str] = field(default_factory=list)

    def point_text(self, frame: pd.DataFrame) -> list[str]:
        return point_text(frame, self.trials)

    def params_text(self, workload: str, params_json: str) -> str:
        """A workload's varying params (not concurrency) at one params value."""
        return params_text(self.trials, workload, params_json)


@dataclass(kw_only=True)
class Report:
    path: Path
    plots: list[Path] = field(default_factory=list)
    analysis: Analysis | None = None
    recommendation_path: Path | None = None


def settings_of(results: Results) -> ReportSettings:
    """The first folder's persisted `report` settings (defaults when it has none)."""
    config = results.configs[0] if results.configs else {}
    return parse_settings(config.get("report"), slo=config_slo(config))


def analyse(results: Results, *, bandwidth: float | None = None, settings: ReportSettings | None = None) -> Analysis:
    s = settings or settings_of(results)
    frames = analysis_frames(results, s.slo)
    trials, requests, engines = frames.trials, frames.requests, frames.engines
    points = point_table(trials, sample_values(trials, requests), seed=s.seed)
    capacity = flags.capacity_flags(trials, requests, engines)
    rule = dict(tie_band=s.tie_band, min_repeats=s.min_repeats, seed=s.seed)
    outcomes = verdict.point_outcomes(points, walled=flags.walled_points(capacity), **rule)
    divergence = flags.divergence_flags(trials, requests)
    choices = verdict.draft_count_choices(points, **rule)
    summary = verdict.draft_count_summary(choices, trials, min_repeats=s.min_repeats)
    degenerate = flags.degenerate_flags(trials)
    failures = flags.failures(engines, trials)
    race = race_stops(trials, frames.phases)
    config = results.configs[0] if results.configs else {}
    study = Study.of(config)
    by_rate = rate_search(trials, requests, s.slo, seed=s.seed, params_text=lambda w, p: params_text(trials, w, p),
                          answers=study.kind is StudyKind.RATE_SEARCH)
    # A rate search's arms never met at one offered rate: no flips between its points.
    crossings = verdict.crossovers(outcomes[~outcomes.workload.isin(by_rate.answered)], trials)
    answers = study_answers(study=study, outcomes=outcomes, rate_verdicts=by_rate.verdicts, rate_rows=by_rate.rows,
                            engines=engines, trials=trials, config=config, degenerate=degenerate,
                            divergence=divergence, failures=failures, stops=race, min_repeats=s.min_repeats)
    per_point = outcomes[~outcomes.workload.isin(by_rate.answered)]
    # Choices per offered rate are not a rate search's answer: its SLO is answered by the highest rate.
    figures = arm_point_figures(trials[~trials.workload.isin(by_rate.answered)], s.slo) if s.slo else None
    answer = answer_table(answers=answers, outcomes=per_point, points=points, engines=engines, trials=trials,
                          crossovers=crossings, config=config, **rule)
    answers = worded(answers, answer)
    recommended = recommendation(
        answers=answers, outcomes=per_point, trials=trials, draft_summary=summary,
        point_text=point_text(per_point, trials),
        metric_heading={w: deciding_metric(w).heading for w in per_point.workload.unique()},
        tie_band=s.tie_band, min_repeats=s.min_repeats, sources=results.sources)
    # A rate search's points are offered rates, not batch sizes: no schedule is derived from them.
    schedules = derived_schedules(choices, trials, engines, config) if not by_rate.answered else []
    recommended["draft_schedule"] = schedule_recommendations(
        schedules, lambda w, p: params_text(trials, w, p)) if schedules else {}
    deficit = cache_deficit(trials, requests)
    for w, block in by_rate.recommendation.items():
        recommended["workloads"].setdefault(w, {})["highest_rate_within_slo"] = block
    return Analysis(
        results=results, settings=s, frames=frames, engines=engines, trials=trials, requests=requests, points=points,
        outcomes=outcomes,
        verdict=answered_verdict(verdict.verdict_table(per_point, trials, capacity=capacity, divergence=divergence,
                                                       min_repeats=s.min_repeats), answers),
        crossovers=crossings, draft_choices=_without(choices, by_rate.answered),
        draft_summary=_without(summary, by_rate.answered),
        capacity=capacity, divergence=divergence, degenerate=degenerate, failures=failures,
        bandwidth=flags.bandwidth_shares(points, engines, bandwidth_override=bandwidth),
        slo_choices=slo_choices(figures, **rule) if figures is not None else pd.DataFrame(),
        slo_reach=max_concurrency(figures, s.slo) if figures is not None else pd.DataFrame(),
        pareto=pareto_points(trials) if len(trials) else pd.DataFrame(),
        cost=cost_table(trials, gpu_hour_usd=s.gpu_hour_usd) if s.gpu_hour_usd else pd.DataFrame(),
        race=race, recommendation=recommended, answer=answer, answers=answers,
        # A rate search's draft count is its verdict against rate, not a choice per offered rate.
        # A rate search's draft count is its deployed arm's, not a choice per offered rate.
        draft_lines=draft_count_lines(_without(summary, by_rate.answered), choices, trials),
        schedules=schedules, schedule_outcomes=schedule_outcomes(points, choices, **rule),
        al_predictions=acceptance_predictions(frames.ran), speed_predictions=predicted_vs_measured(frames.ran),
        rate_points=by_rate.points, highest_rates=by_rate.best, rate_verdicts=by_rate.verdicts, rate_lines=by_rate.lines,
        cache_deficit=deficit, deficit_lines=deficit_lines(deficit),
        blocking=blocking_caveats(config=config, engines=engines, trials=trials, outcomes=per_point,
                                  degenerate=degenerate, divergence=divergence, min_repeats=s.min_repeats))


def _without(frame: pd.DataFrame, workloads: list[str]) -> pd.DataFrame:
    return frame[~frame.workload.isin(workloads)] if len(frame) else frame


def render_markdown(a: Analysis, *, plot_files: list[Path]) -> str:
    title = "# Sweep report: " + ", ".join(a.results.sources)
    names = [p.name for p in plot_files]
    parts = [title, shared_device_section(a.trials), sections.answer_section(a), matrix_section(a), sources_section(a), section("Verdict", md_table(a.verdict)),
             metrics_section(a),
             sections.recommendation_section(a), sections.slo_section(a),
             sections.pareto_section(a, [n for n in names if n.endswith("_pareto.png")]), sections.cost_section(a),
             energy_section(a), sections.race_section(a), repeats_section(a.trials), sections.degenerate_section(a),
             section("Crossovers", md_table(a.crossovers) if len(a.crossovers) else
                     "None: the outcome does not change along any axis."),
             draft_section(a), deficit_section(a), sections.schedule_section(a), acceptance_profile_section(a.trials),
             capacity_section(a), divergence_section(a), failures_section(a),
             bandwidth_section(a), detail_section(a), engines_section(a), sections.first_trial_section(a),
             sections.agreement_section(a), sections.device_time_section(a)]
    parts += [rates.rate_section(a), categories.category_section(a)]
    if plot_files:
        parts.append(section("Plots", "\n\n".join(f"![{p.stem}]({p.name})" for p in plot_files)))
    return "\n\n".join(p for p in parts if p) + "\n"


def _draw(a: Analysis, out_dir: Path) -> list[Path]:
    """Plots; one that fails is reported and skipped (the tables are the report)."""
    # Open-loop workloads are drawn against offered rate (rates.plot_rates), not against concurrency.
    open_loop = set(a.rate_points.workload) if len(a.rate_points) else set()
    workloads = [w for w in dict.fromkeys(a.points.workload) if w not in open_loop]
    jobs = [lambda w=w: plots.plot_vs_concurrency(a.points, a.trials, w, out_dir) for w in workloads]
    jobs += [lambda w=w: study_plots.plot_throughput(a.trials, w, out_dir) for w in workloads]
    jobs += [lambda w=w: study_plots.plot_speedup(a.points, a.trials, w, out_dir) for w in workloads]
    jobs += [lambda w=w: study_plots.plot_best_k_by_batch(a.schedules, a.trials, w, out_dir,
                                                          params_text=a.params_text) for w in workloads]
    jobs += [lambda: plots.plot_acceptance_per_position(a.trials, out_dir),
             lambda: plots.plot_kv_capacity(a.engines, out_dir)]
    jobs += [lambda: rates.plot_rates(a, out_dir)]
    jobs += [lambda w=w: plots.plot_pareto(a.pareto, w, out_dir, params_text=a.params_text)
             for w in dict.fromkeys(a.pareto.workload if len(a.pareto) else []) if w not in open_loop]
    written = []
    for job in jobs:
        try:
            path = job()
        except Exception as exc:  # a broken plot must not cost the tables
            print(f"warning: a plot failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if path:
            written.append(Path(path))
    return written


def echo_headlines(a: Analysis, path: Path, plot_files: list[Path]) -> None:
    """The terminal's view: failures and best k first, the verdict table last (the answer ends the output)."""
    print(f"\nreport: {path}")
    if plot_files:
        print("plots: " + ", ".join(p.name for p in plot_files))
    if len(a.failures):
        print("\nfailed configurations:\n" + md_table(a.failures))
    if len(a.capacity):
        print(f"\ncapacity-wall flags: {len(a.capacity)} trial(s) at the KV pool (see report.md)")
    if len(a.divergence):
        print(f"\noutput divergence: {len(a.divergence)} arm/point pair(s) generated different tokens (see report.md)")
    if len(a.crossovers):
        print("\ncrossovers:\n" + md_table(a.crossovers))
    if len(a.race):
        print(f"\nrace: {int(a.race['trials skipped'].sum())} trial(s) skipped, ~"
              f"{a.race['device s saved (est.)'].sum():,.0f} device-s saved:\n"
              + md_table(a.race.drop(columns=["reason"])))
    if len(a.slo_choices):
        print(f"\nunder the SLO ({a.settings.slo.text()}):\n" + md_table(
            a.slo_choices.assign(point=a.point_text(a.slo_choices))[
                ["workload", "point", "choice", "tok/s per device", "ratio", "verdict"]]))
    print("\n" + sections.answer_text(a))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_report(*, run_dirs: list[Path], out_dir: Path | None = None, echo: bool = False,
                 bandwidth: float | None = None, overrides: dict | None = None, question: dict | None = None) -> Report:
    """Reads the folders' persisted files and writes report.md and report.html, recommendation.yaml and PNGs into
    out_dir (default: the first folder). `overrides` (tie_band, slo, gpu_hour_usd, seed) replace the persisted report settings;
    `question` ({a, b, name}) replaces the persisted sweep.question."""
    import yaml

    from runner.config.report import with_overrides

    run_dirs = [Path(d) for d in run_dirs]
    out_dir = Path(out_dir or run_dirs[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    results = load_results(run_dirs)
    if nothing_measured(results):
        path, recommendation_path = write_failed_run(results, out_dir, write=_write_atomic, echo=echo)
        return Report(path=path, recommendation_path=recommendation_path)
    if question is not None and results.configs:
        results.configs[0].setdefault("sweep", {})["question"] = question
    settings = with_overrides(settings_of(results), **(overrides or {}))
    a = analyse(results, bandwidth=bandwidth, settings=settings)
    plot_files = _draw(a, out_dir)
    path = out_dir / "report.md"
    markdown = render_markdown(a, plot_files=plot_files)
    _write_atomic(path, markdown)
    _write_atomic(out_dir / HTML_FILE, to_html(markdown, out_dir, title=markdown.splitlines()[0].lstrip("# ")))
    recommendation_path = out_dir / "recommendation.yaml"
    _write_atomic(recommendation_path, yaml.safe_dump(finite_or_none(a.recommendation), sort_keys=False,
                                                      allow_unicode=True, width=120))
    _write_atomic(out_dir / ANSWER_FILE, json.dumps(finite_or_none({
        "question": sections.question_title(a), "blocking": [b.replace("**", "") for b in a.blocking],
        "answer": a.answer.to_dict("records"), "deploy": {w: x.record() for w, x in a.answers.items()},
        "highest_rate": [x.replace("**", "") for x in a.rate_lines], "draft_count": a.draft_lines,
        "prefix_cache_deficit": [x.removeprefix("- ").replace("**", "") for x in a.deficit_lines]}),
        indent=1, allow_nan=False))
    if echo:
        echo_headlines(a, path, plot_files)
    return Report(path=path, plots=plot_files, analysis=a, recommendation_path=recommendation_path)
