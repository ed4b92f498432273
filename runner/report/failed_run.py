"""The report of a run that measured nothing: which engines failed to start and why, in place of an Answer. Pure.

A run whose every engine failed (another process holding the device, a model that does not fit) has no trial to
analyse; its report says so, names each engine with its failure and the fix its reason suggests, and the command
exits cleanly, as the sweep itself did.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from runner.report.load import Results
from runner.report.render import md_table, section
from runner.schema import EngineStatus, TrialStatus


def nothing_measured(results: Results) -> bool:
    """True when no engine started and no trial finished: there is nothing to compare."""
    engines, trials = results.engines, results.trials
    started = len(engines) and (engines.status == EngineStatus.OK).any()
    measured = len(trials) and (trials.status == TrialStatus.OK).any()
    return bool(len(engines)) and not started and not measured


def failed_engines(results: Results) -> pd.DataFrame:
    """One row per engine that failed: its arm as the plan labels it, where it ran, its failure and reason."""
    from runner.report.arms import add_arms

    engines, _ = add_arms(results.engines, results.trials.iloc[0:0] if len(results.trials) else results.trials)
    rows = []
    for e in engines.to_dict("records"):
        numbers = json.loads(e["failure_numbers_json"]) if isinstance(e.get("failure_numbers_json"), str) else {}
        rows.append({"arm": e["arm"], "engine": e["engine_id"], "folder": e["source"],
                     "status": str(e["status"]), "kind": e.get("failure_kind") or "–",
                     "reason": e.get("failure_reason") or "–",
                     "numbers": ", ".join(f"{k}={v}" for k, v in numbers.items()) or "–"})
    return pd.DataFrame(rows, columns=["arm", "engine", "folder", "status", "kind", "reason", "numbers"])


def headline(table: pd.DataFrame) -> str:
    kinds = ", ".join(f"{k} ({n})" for k, n in table.kind.value_counts().items())
    return (f"No answer: all {len(table)} engine(s) failed to start ({kinds}), so nothing was measured. "
            "Fix what the reasons below name (e.g. free the device another process holds, or lower "
            "engine.gpu_memory_utilization / max_model_len) and run it again.")


def failed_run_markdown(results: Results) -> str:
    table = failed_engines(results)
    title = "# Sweep report: " + ", ".join(results.sources)
    return "\n\n".join([title, section("Answer", headline(table)),
                        section("Failed engines", md_table(table))]) + "\n"


def failed_run_text(results: Results) -> str:
    """The terminal's closing block for such a run."""
    table = failed_engines(results)
    return "answer:\n! " + headline(table) + "\n" + md_table(table[["arm", "engine", "kind", "reason"]])


def write_failed_run(results: Results, out_dir: Path, *, write, echo: bool) -> tuple[Path, Path]:
    """report.md, report.html, recommendation.yaml and answer.json of such a run (`write(path, text)`: atomic);
    (report.md, recommendation.yaml)."""
    import yaml

    from runner.report.html import to_html

    markdown = failed_run_markdown(results)
    path = out_dir / "report.md"
    write(path, markdown)
    write(out_dir / "report.html", to_html(markdown, out_dir, title=markdown.splitlines()[0].lstrip("# ")))
    failed = failed_engines(results)
    recommendation_path = out_dir / "recommendation.yaml"
    write(recommendation_path, yaml.safe_dump({"workloads": {}, "no_answer": headline(failed)}, sort_keys=False,
                                              allow_unicode=True, width=120))
    write(out_dir / "answer.json", json.dumps({"question": "", "blocking": [headline(failed)], "answer": [],
                                               "failed_engines": failed.to_dict("records")}, indent=1))
    if echo:
        print(f"\nreport: {path}\n\n" + failed_run_text(results))
    return path, recommendation_path
