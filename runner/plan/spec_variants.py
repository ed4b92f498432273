"""Speculative engines beyond method × k: a draft-count schedule on an arm, and acceptance profiles.

The plan's side (pure, apart from reading an earlier run's trials for a `measured:` profile): each arm's schedule
parsed against vLLM's rules, each profile resolved to rates and fitted to the engine's k, and the checks that
refuse before start what no engine could run (synthetic acceptance on vLLM's CPU build). Each message names the
override that fixes it.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from runner.config.acceptance import SYNTHETIC_KEYS, AcceptanceProfile, ProfileKind, profile_of_text
from runner.config.checks import ConfigError
from runner.config.sections import RunConfig
from runner.numerics.draft_schedule import DraftSchedule, ScheduleError
from runner.schema import EngineSettings
from runner.spec_arm import SPEC_METHODS, SpecArm
from runner.vllm import spec_config
from runner.vllm.spec_config import SCHEDULE_KEY

AUTO = "auto"
DEFAULT_MAX_NUM_SEQS = 256  # vLLM's default where engine.args does not set max_num_seqs
SCHEDULE_FIX = "sweep.arms=[{spec_method:mtp,num_speculative_tokens_per_batch_size:[[1,1,3],[2,8,1]]}]"
PROFILE_FIX = "sweep.grid.spec_acceptance_profile=[real,[0.86,0.74,0.64]]"
# What vLLM's CPU build says when an engine asks for synthetic acceptance (it asserts at start).
CPU_SYNTHETIC_REASON = "Synthetic acceptance not supported with CPU sampling"


class SpecVariantError(ConfigError):
    """A schedule or profile the plan cannot give an engine; the message names the fix."""


def speculative_config(settings: EngineSettings, extra: Optional[dict] = None) -> Optional[dict]:
    """vLLM's `speculative_config` of an engine's settings: the arm's, with its schedule and synthetic acceptance."""
    arm = settings.spec
    if arm.off:
        return None
    schedule = json.loads(settings.spec_schedule) if isinstance(settings.spec_schedule, str) and \
        settings.spec_schedule else None
    profile = settings.spec_acceptance_profile if isinstance(settings.spec_acceptance_profile, str) else None
    return spec_config.speculative_config(arm, extra=extra, schedule=schedule,
                                          acceptance=profile_of_text(profile).speculative_keys(arm.k))


def arm_schedule(arm, *, index: int, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS) -> Optional[DraftSchedule]:
    """The arm's schedule (None without one), checked by vLLM's rules and against the arm's method and k;
    `auto:<run folder>` derived from that run's best k per batch size."""
    raw = getattr(arm, "num_speculative_tokens_per_batch_size", None) if arm is not None else None
    if raw is None:
        return None
    where = f"sweep.arms[{index}]"
    if isinstance(raw, str) and raw.startswith(AUTO):
        return _auto_schedule(raw, arm=arm, where=where, max_num_seqs=max_num_seqs)
    try:
        schedule = DraftSchedule.parse(raw)
    except ScheduleError as exc:
        raise SpecVariantError(f"{where}.num_speculative_tokens_per_batch_size: {exc} (fix: {SCHEDULE_FIX})") from None
    method = SpecArm.of(arm.spec_method, 1).method if arm.spec_method is not None else None
    if method in (None, "off"):
        raise SpecVariantError(f"{where} carries a draft-count schedule but names no speculative method "
                               f"(fix: {SCHEDULE_FIX})")
    limit = SPEC_METHODS.get(method)
    if limit is not None and not limit.accepts(schedule.max_k):  # the rule a static arm's k follows
        raise SpecVariantError(f"{where}.num_speculative_tokens_per_batch_size={schedule.as_list()}: its largest k "
                               f"({schedule.max_k}), vLLM's num_speculative_tokens, is outside 1..{limit.max_k} for "
                               f"{method!r}, as a static arm's k would be (fix: k ≤ {limit.max_k} in every range, "
                               f"e.g. {SCHEDULE_FIX})")
    k = arm.num_speculative_tokens
    if k is not None and k != schedule.max_k:
        raise SpecVariantError(f"{where}.num_speculative_tokens={k} differs from its schedule's largest k "
                               f"({schedule.max_k}), which vLLM takes as num_speculative_tokens (fix: remove "
                               f"{where}.num_speculative_tokens)")
    return schedule


def _auto_schedule(raw: str, *, arm, where: str, max_num_seqs: int) -> DraftSchedule:
    from runner.sinks.measured_acceptance import measured_schedule

    folder = raw[len(AUTO) + 1:].strip() if raw.startswith(AUTO + ":") else ""
    if not folder:
        raise SpecVariantError(f"{where}.num_speculative_tokens_per_batch_size={raw!r}: auto is derived from "
                               f"measurements (fix: sweep.adaptive=predict_schedule derives it in this run, or "
                               f"auto:<run folder> from an earlier run)")
    method = SpecArm.of(arm.spec_method, 1).method if arm.spec_method is not None else "off"
    profile = arm.spec_acceptance_profile
    text = AcceptanceProfile.parse(profile).text() if profile is not None and not (
        isinstance(profile, str) and profile.startswith("measured:")) else None
    try:
        schedule = measured_schedule(folder, method=method, profile=text, max_num_seqs=max_num_seqs)
    except (OSError, ValueError) as exc:
        raise SpecVariantError(f"{where}.num_speculative_tokens_per_batch_size={raw}: {exc} (fix: auto:<a run "
                               f"folder where {method} ran at a static k beside spec off>)") from None
    if schedule is None:
        raise SpecVariantError(f"{where}.num_speculative_tokens_per_batch_size={raw}: spec off wins at every load "
                               f"that run measured, so there is no schedule (fix: drop the arm; deploy spec off)")
    return schedule


def parse_profile(value: Any, *, where: str) -> AcceptanceProfile:
    try:
        return AcceptanceProfile.parse(value)
    except ValueError as exc:
        raise SpecVariantError(f"{where}.spec_acceptance_profile: {exc} (fix: {PROFILE_FIX})") from None


def engine_profile(profile: AcceptanceProfile, *, arm: SpecArm, where: str, resolved: dict) -> AcceptanceProfile:
    """The profile an engine of this arm runs with: real for spec off; a measured one read (once per run folder
    and method) from that run's trials; refused where it has fewer rates than the engine drafts."""
    if arm.off or profile.kind is ProfileKind.REAL:
        return AcceptanceProfile()
    if profile.kind is ProfileKind.MEASURED:
        key = (profile.source, arm.method)
        if key not in resolved:
            resolved[key] = _measured(profile.source, method=arm.method, where=where)
        profile = resolved[key]
    if len(profile.rates) < arm.k:
        raise SpecVariantError(f"{where}.spec_acceptance_profile {list(profile.rates)} has {len(profile.rates)} "
                               f"rates, fewer than {arm.label} drafts (fix: one rate per draft position, e.g. "
                               f"{PROFILE_FIX})")
    return profile


def _measured(folder: str, *, method: str, where: str) -> AcceptanceProfile:
    from runner.config.profile_file import is_profile_file
    from runner.sinks.measured_acceptance import measured_rates

    if is_profile_file(folder):
        return _from_file(folder, method=method, where=where)
    try:
        rates = measured_rates(folder, method=method)
    except FileNotFoundError as exc:
        raise SpecVariantError(f"{where}.spec_acceptance_profile=measured:{folder}: {exc} (fix: "
                               f"measured:<a run folder with trials.parquet>)") from None
    if not rates:
        raise SpecVariantError(f"{where}.spec_acceptance_profile=measured:{folder}: that run has no {method} trial "
                               f"with acceptance counters (fix: measured:<a run folder where {method} ran>)")
    return AcceptanceProfile(kind=ProfileKind.SYNTHETIC, rates=tuple(rates), source=folder)


def _from_file(path: str, *, method: str, where: str) -> AcceptanceProfile:
    """A speculation_profile.json's marginal rates (runner.config.profile_file), for its own method."""
    from runner.config.profile_file import read_profile

    try:
        profile = read_profile(path)
    except ValueError as exc:
        raise SpecVariantError(f"{where}.spec_acceptance_profile=measured:{path}: {exc} (fix: measured:<a "
                               f"speculation_profiles/*.json file of a run, or a run folder>)") from None
    if profile.method is not None and profile.method != method:
        raise SpecVariantError(f"{where}.spec_acceptance_profile=measured:{path} was measured for "
                               f"{profile.method!r}, not {method!r} (fix: a profile file of {method}, or "
                               f"sweep.grid.spec_method=[off,{profile.method}])")
    return AcceptanceProfile(kind=ProfileKind.SYNTHETIC, rates=profile.rates, source=path)


def _profile_files(config: RunConfig) -> list[str]:
    values = list(config.sweep.grid.spec_acceptance_profile or [])
    values += [a.spec_acceptance_profile for a in config.sweep.arms or [] if a.spec_acceptance_profile is not None]
    files = []
    for value in values:
        try:
            parsed = AcceptanceProfile.parse(value)
        except ValueError:
            continue  # said by the grid's own checks
        if parsed.kind is ProfileKind.MEASURED and parsed.source not in files:
            from runner.config.profile_file import is_profile_file

            if is_profile_file(parsed.source):
                files.append(parsed.source)
    return files


def profile_warnings(config: RunConfig) -> list[str]:
    """A profile file measured on another model than the run's: its rates may not be this model's."""
    from runner.config.profile_file import read_profile

    out = []
    for path in _profile_files(config):
        try:
            profile = read_profile(path)
        except ValueError:
            continue  # refused with its reason when the plan resolves it
        if profile.model != config.model.name:
            out.append(f"warning: spec_acceptance_profile=measured:{path} was measured on model "
                       f"{profile.model or '(unnamed)'!r}, not this run's {config.model.name!r}: its rates "
                       f"{list(profile.rates)} are forced as they are (fix: a profile measured on "
                       f"{config.model.name}, or model= the profile's model)")
    return out


def check_spec_variants(config: RunConfig) -> list[str]:
    """Before anything starts: synthetic acceptance on CPU (vLLM's CPU build refuses it at start), and
    speculative_config keys in spec.<method> that a profile or a schedule owns."""
    errors = []
    profiles = list(config.sweep.grid.spec_acceptance_profile)
    profiles += [a.spec_acceptance_profile for a in config.sweep.arms or [] if a.spec_acceptance_profile is not None]
    synthetic = []
    for value in profiles:
        try:
            if AcceptanceProfile.parse(value).synthetic:
                synthetic.append(value)
        except ValueError:
            pass  # said by the grid's own checks
    if synthetic and config.engine.device == "cpu":
        errors.append(f"spec_acceptance_profile {synthetic[0]!r} sets synthetic acceptance (rejection_sample_method: "
                      f"synthetic), which vLLM's CPU build refuses at start (\"{CPU_SYNTHETIC_REASON}\") (fix: "
                      f"sweep.grid.spec_acceptance_profile=[real], or engine=gpu on a GPU machine)")
    for method, extra in (config.spec or {}).items():
        for key in (*SYNTHETIC_KEYS, SCHEDULE_KEY):
            if key in (extra or {}):
                fix = SCHEDULE_FIX if key == SCHEDULE_KEY else PROFILE_FIX
                errors.append(f"spec.{method}.{key} is set by the runner per engine, and its rows record it (fix: "
                              f"remove spec.{method}.{key}; use {fix})")
    return errors
