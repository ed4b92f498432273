"""Acceptance profile files, out and in: a run's measured per-position acceptance written as a file another tool
reads, and such a file read back as the rates synthetic acceptance forces. Written by write_profiles into
<run folder>/speculation_profiles/; read back by runner.config.profile_file.

The format is NVIDIA Model-Optimizer's proposed `speculation_profile.json`, schema 1.0, as its producer defines it
(examples/specdec_bench/specdec_bench/speculation_profile.py at commit MODELOPT_COMMIT, an open pull request): one
file per method and k, `marginal_accept_rates` (entry i: P(the first i + 1 drafts all accepted), vLLM's
synthetic_acceptance_rates convention and its per-position counters'), `conditional_accept_rates` (entry i: P(draft
i + 1 accepted | the first i were)), `mean_accept_length` = 1 + Σ marginal (per verify step), `per_category` and
`measurement_conditions`. What this project adds sits inside that schema: the workload, prompt set, sampling, chat
template and vLLM version in `measurement_conditions`, per-category marginals in `per_category`, each k measured in
`accept_length_by_k`. vLLM reports no per-step length histogram, so `acceptance_length_histogram` is null.

Rates from a file (runner.plan.spec_variants): its marginal rates; an engine drafting k takes the first k (a chain
drafter's first k positions are the same drafts). An acceptance length alone converts by vLLM's rule instead
(`synthetic_acceptance_length`, config/speculative.py): L − 1 accepted drafts as [1.0] × ⌊L − 1⌋, then the
fraction, then zeros (the least-variance schedule), which no measured drafter follows.

Only acceptance that is the model's own is written: real weights (not load_format=dummy, not the embedded model's
dummy weights) and no synthetic profile forced. `python -m runner.sinks.speculation_profiles <run folder>` writes
them for an earlier run.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

SCHEMA_VERSION = "1.0"
MODELOPT_COMMIT = "edf879d3daf7879acdeb2dab9f54a591837da7b0"
# Drafters whose k-token draft is the first k of their (k + 1)-token draft: one measurement serves every smaller k.
CHAIN_METHODS = frozenset({"mtp", "eagle", "eagle3", "draft_model", "ngram", "suffix"})
CONSISTENCY_TOLERANCE = 0.02
SAMPLING_KEYS = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "repetition_penalty")


def acceptance_length_rates(length: float, k: int) -> list[float]:
    """vLLM's rule for `synthetic_acceptance_length` (config/speculative.py): the least-variance marginals."""
    drafts = length - 1
    full = int(drafts)
    return ([1.0] * full + [drafts - full] + [0.0] * (k - full - 1))[:k]


@dataclass(kw_only=True)
class Tally:
    """Accepted drafts per position over verify steps (sums over trials or requests)."""

    accepted: list[float]
    steps: float = 0.0
    counter_accepted: float = 0.0  # vLLM's accepted-token counter, for the consistency check
    requests: int = 0

    def add(self, per_position: Iterable[float], steps: float) -> None:
        for i, value in enumerate(per_position):
            if i < len(self.accepted):
                self.accepted[i] += float(value)
        self.steps += steps

    def marginal(self) -> list[float]:
        out: list[float] = []
        for a in self.accepted:
            out.append(min([a / self.steps if self.steps else 0.0, *out[-1:]]))
        return out


def conditional(marginal: list[float]) -> list[float]:
    out, before = [], 1.0
    for m in marginal:
        out.append(m / before if before > 0 else 0.0)
        before = m
    return out


def _plain(value) -> Any:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def real_acceptance_rows(trials: Iterable[Mapping]) -> list[Mapping]:
    """Finished speculative trials at a static k with the model's own acceptance (no synthetic profile)."""
    return [t for t in trials if t.get("status") == "ok" and t.get("spec_method") not in (None, "off")
            and not _plain(t.get("spec_acceptance_profile")) and not _plain(t.get("spec_schedule"))
            and _plain(t.get("spec_num_drafts"))]


def _group_key(trial: Mapping) -> tuple:
    return trial["spec_method"], int(trial["num_speculative_tokens"]), trial["workload"], trial["workload_params_json"]


def build_profiles(*, trials: list[Mapping], requests: list[Mapping], model: Mapping, vllm_version: Optional[str],
                   prompt_digest=None) -> list[tuple[str, dict]]:
    """(file name, profile) per method, k, workload and workload params; `model`: name, checkpoint, load_format.
    `prompt_digest(path)`: a prompt file's sha256 (None: unreadable)."""
    groups: dict[tuple, list[Mapping]] = {}
    for t in real_acceptance_rows(trials):
        groups.setdefault(_group_key(t), []).append(t)
    by_trial: dict[str, list[Mapping]] = {}
    for r in requests:
        if r.get("phase", "measured") == "measured":
            by_trial.setdefault(r.get("trial_id"), []).append(r)
    lengths: dict[tuple, dict[str, float]] = {}
    built = []
    for (method, k, workload, params_json), rows in sorted(groups.items(), key=lambda kv: kv[0]):
        total = Tally(accepted=[0.0] * k)
        categories: dict[str, Tally] = {}
        for t in rows:
            drafts = float(t["spec_num_drafts"])
            total.add([float(p) * drafts for p in (t.get("spec_acceptance_per_position") or [])], drafts)
            total.counter_accepted += float(_plain(t.get("spec_num_accepted_tokens")) or 0)
            for r in by_trial.get(t["trial_id"], []):
                steps = _plain(r.get("spec_num_steps"))
                if r.get("category") and steps and r.get("spec_accepted_per_position") is not None:
                    tally = categories.setdefault(str(r["category"]), Tally(accepted=[0.0] * k))
                    tally.add(r["spec_accepted_per_position"], float(steps))
                    tally.requests += 1
        marginal = total.marginal()
        al = 1.0 + sum(marginal)
        lengths.setdefault((method, workload, params_json), {})[str(k)] = round(al, 6)
        params = _full_params(workload, params_json)
        profile = {
            "schema_version": SCHEMA_VERSION, "measured": True, "method": method, "draft_checkpoint": None,
            "target_model": dict(model), "num_speculative_tokens": k, "block_size": None, "max_supported_k": k,
            "verification_method": "longest_prefix",
            "conditional_accept_rates": [round(x, 6) for x in conditional(marginal)],
            "marginal_accept_rates": [round(x, 6) for x in marginal],
            "mean_accept_length": round(al, 6), "mean_accept_length_per_request": None,
            "accept_length_model": "chain_analytic" if method in CHAIN_METHODS else "measured_per_k",
            "accept_length_by_k": None, "acceptance_length_histogram": None,
            "per_category": {name: _category(tally) for name, tally in sorted(categories.items())} or None,
            "measurement_conditions": _conditions(workload=workload, params=params, rows=rows,
                                                  vllm_version=vllm_version, drafts=total.steps,
                                                  prompt_digest=prompt_digest),
            "validation": _validation(marginal, reported=1.0 + total.counter_accepted / total.steps),
        }
        built.append(((method, workload, params_json), f"{method}_k{k}_{workload}", profile))
    names: dict[str, int] = {}
    out = []
    for group, stem, profile in built:
        profile["accept_length_by_k"] = lengths[group]
        names[stem] = names.get(stem, 0) + 1
        out.append((f"{stem}{'' if names[stem] == 1 else '_' + str(names[stem])}.json", profile))
    return out


def _full_params(workload: str, params_json: str) -> dict:
    """The trial's workload params with the workload's defaults filled in (a trial's JSON omits defaults)."""
    import dataclasses

    from runner.measurement.workloads import workload_class

    raw = json.loads(params_json or "{}")
    try:
        parsed = workload_class(workload).parse_params(dict(raw))
    except (KeyError, TypeError, ValueError):
        return raw
    return {f.name: getattr(parsed, f.name) for f in dataclasses.fields(parsed) if not f.name.startswith("_")}


def _category(tally: Tally) -> dict:
    marginal = tally.marginal()
    return {"marginal_accept_rates": [round(x, 6) for x in marginal],
            "conditional_accept_rates": [round(x, 6) for x in conditional(marginal)],
            "mean_accept_length": round(1.0 + sum(marginal), 6), "verify_steps": int(tally.steps),
            "requests": tally.requests}


def _conditions(*, workload: str, params: dict, rows: list[Mapping], vllm_version: Optional[str], drafts: float,
                prompt_digest) -> dict:
    prompt_file = params.get("prompt_file")
    return {
        "producer": "runner", "engine": "vllm", "vllm_version": vllm_version, "workload": workload,
        "dataset": (Path(prompt_file).name if prompt_file else f"synthetic prompts ({params.get('prompt_source') or workload})"),
        "prompt_set": ({"file": Path(prompt_file).name, "format": params.get("prompt_format"),
                        "sha256": prompt_digest(prompt_file) if prompt_digest else None,
                        "num_sessions": params.get("num_sessions"), "max_turns": params.get("max_turns")}
                       if prompt_file else None),
        "chat_template": params.get("chat_template"),
        "prompt_rendering": "+".join(sorted({str(r.get("prompt_rendering")) for r in rows
                                             if r.get("prompt_rendering")})) or None,
        "sampling": {key: params.get(key) for key in SAMPLING_KEYS if params.get(key) is not None},
        "osl": params.get("output_len"), "concurrency": sorted({int(r["concurrency"]) for r in rows}),
        "trials": len(rows), "verify_steps": int(drafts), "run_ids": sorted({str(r.get("run_id")) for r in rows}),
    }


def _validation(marginal: list[float], *, reported: float) -> dict:
    implied = 1.0 + sum(marginal)
    delta = abs(implied - reported)
    return {"mean_consistency": {"implied_mean_accept_length": round(implied, 6),
                                 "reported_mean_accept_length": round(reported, 6), "abs_delta": round(delta, 6),
                                 "tolerance": CONSISTENCY_TOLERANCE, "passed": delta <= CONSISTENCY_TOLERANCE},
            "marginal_monotonicity": {"passed": True, "violations": []}}  # made non-increasing in Tally.marginal


def file_digest(path: str) -> Optional[str]:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None




FOLDER = "speculation_profiles"
REQUEST_COLUMNS = ["trial_id", "phase", "category", "spec_num_steps", "spec_accepted_per_position"]


@dataclass(kw_only=True)
class Written:
    paths: list[Path] = field(default_factory=list)
    reason: Optional[str] = None  # why none was written

    def lines(self) -> list[str]:
        if self.paths:
            return [f"acceptance profiles ({len(self.paths)}): {self.paths[0].parent}"]
        return [f"acceptance profiles: none ({self.reason})"] if self.reason else []


def _config(run_dir: Path) -> dict:
    from omegaconf import OmegaConf

    path = run_dir / "config.yaml"
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False) if path.exists() else {}


def _load_format(engine: dict) -> str:
    try:
        return json.loads(engine.get("vllm_args_json") or "{}").get("load_format") or "auto"
    except ValueError:
        return "auto"


def _dummy_reason(model: dict, engines: list[dict]) -> Optional[str]:
    formats = {_load_format(e) for e in engines if e.get("status") == "ok"}
    if "dummy" in formats or model.get("load_format") == "dummy":
        return "the model's weights are random (load_format=dummy): its acceptance is no model's"
    if model.get("weights") == "dummy":
        return "the embedded model ran with dummy weights (model.weights=dummy)"
    return None


def write_profiles(run_dir: Path) -> Written:
    from runner.sinks.parquet import has_table, read_rows

    run_dir = Path(run_dir)
    if not has_table(run_dir, "trials"):
        return Written(reason=f"no trials in {run_dir}")
    model = dict(_config(run_dir).get("model") or {})
    engines = read_rows(run_dir, "engines") if has_table(run_dir, "engines") else []
    trials = read_rows(run_dir, "trials")
    ran = {t.get("engine_id") for t in real_acceptance_rows(trials)}
    if not ran:
        return Written(reason="no speculative trial ran at a static k with the model's own acceptance")
    dummy = _dummy_reason(model, [e for e in engines if e.get("engine_id") in ran])
    if dummy:
        return Written(reason=dummy)
    requests = read_rows(run_dir, "requests", REQUEST_COLUMNS) if has_table(run_dir, "requests") else []
    versions = sorted({str(e["vllm_version"]) for e in engines if e.get("engine_id") in ran and e.get("vllm_version")})
    target = {"name": model.get("name") or next((t.get("model") for t in trials if t.get("model")), None),
              "checkpoint": model.get("path") or (f"builtin:{model['builtin']}" if model.get("builtin") else None),
              "weights": model.get("weights"), "load_format": model.get("load_format", "auto")}
    profiles = build_profiles(trials=trials, requests=requests, model=target,
                              vllm_version="+".join(versions) or None, prompt_digest=file_digest)
    folder = run_dir / FOLDER
    folder.mkdir(exist_ok=True)
    paths = []
    for name, profile in profiles:
        path = folder / name
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(profile, indent=2) + "\n")
        tmp.replace(path)
        paths.append(path)
    return Written(paths=paths)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m runner.sinks.speculation_profiles <run folder>", file=sys.stderr)
        return 2
    written = write_profiles(Path(args[0]))
    for line in written.lines():
        print(line)
    for path in written.paths:
        print(f"  {path.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
