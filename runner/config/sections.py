"""The run's configuration as typed values: the schema of conf/ (registered in Hydra's ConfigStore by
runner.config.store). Pure: no Hydra, no vLLM, no files.

Each section checks its own values when it is built (`OmegaConf.to_object` builds them once, in the CLI) and
raises ConfigError naming the override that fixes each problem. Checks that need the environment (the model's
folder, vLLM's engine-argument rules, the workloads' parameter classes) run in runner.plan.validate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from runner.config.acceptance import AcceptanceProfile, resolve_auto
from runner.config.checks import _fix, _g, _is_int, _problems, address_problem, plain_name_problem
from runner.config.execution import ExecutionSection
from runner.config.report import ReportSettings, ReportSettingsError, parse_settings as parse_report_settings
from runner.config.workload_keys import with_current_names, without_declared_defaults
from runner.numerics.stats import TIE_BAND
from runner.slo import SloError, SloSection, old_execution_slo, old_report_slo
from runner.spec_arm import DEFAULT_DRAFT_COUNT, SPEC_METHODS, method_name


@dataclass(kw_only=True)
class ModelSection:
    """conf/model/*.yaml: the checkpoint the engines load."""

    name: str = field(metadata=_fix("model.name=tiny-mtp"))  # the results' `model` column
    builtin: Optional[str] = None  # an embedded model built on first use: tiny_mtp | mimo_7b (null: path)
    weights: Optional[str] = None  # tiny_mtp: trained | dummy (null: trained unless load_format is dummy)
    path: Optional[str] = None  # a local folder or a hub id (when builtin is null)
    tokenizer: Optional[str] = None  # null: the model's own
    load_format: str = "auto"  # vLLM's load_format (dummy: random weights)
    max_model_len_limit: Optional[int] = field(default=None, metadata=_fix("model.max_model_len_limit=32768",
                                                                            "must be an integer or null"))
    prompt_token_low: int = field(default=0, metadata=_fix("model.prompt_token_low=3", "must be an integer"))
    prompt_token_high: Optional[int] = None  # random prompt tokens come from [low, high) (null: the vocabulary)


@dataclass(kw_only=True)
class EngineSection:
    """conf/engine/*.yaml: the device and the engine arguments every engine shares."""

    device: str = "cpu"  # cpu | cuda
    cpu_kvcache_space_gib: Optional[int] = field(default=None, metadata=_fix(
        "engine.cpu_kvcache_space_gib=1, or sweep.engine_axes.kv_cache_memory_bytes=[...] for less",
        "must be a whole number of GiB ≥ 1"))  # CPU: VLLM_CPU_KVCACHE_SPACE
    tensor_parallel_size: int = field(default=1, metadata=_fix("engine.tensor_parallel_size=1",
                                                                "must be an integer ≥ 1"))  # GPUs per engine
    # Any other vLLM engine argument (an open mapping: checked against vLLM's own fields by runner.plan.validate).
    args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        errors = []
        if self.device not in ("cpu", "cuda"):
            errors.append(f"engine.device={self.device!r} must be cpu or cuda (fix: engine=cpu or engine=gpu)")
        if not _is_int(self.tensor_parallel_size) or self.tensor_parallel_size < 1:
            errors.append(f"engine.tensor_parallel_size={self.tensor_parallel_size!r} must be an integer ≥ 1 "
                          f"(fix: engine.tensor_parallel_size=1)")
        kv = self.cpu_kvcache_space_gib
        if kv is not None and kv < 1:
            # vLLM reads VLLM_CPU_KVCACHE_SPACE as whole GiB; smaller KV goes through kv_cache_memory_bytes.
            errors.append(f"engine.cpu_kvcache_space_gib={kv!r} must be a whole number of GiB ≥ 1 "
                          f"(fix: engine.cpu_kvcache_space_gib=1, or sweep.engine_axes.kv_cache_memory_bytes=[...] "
                          f"for less)")
        _problems(errors)


@dataclass(kw_only=True)
class ClusterSection:
    """conf/cluster/*.yaml: where engines run and how many side by side."""

    address: Optional[str] = None  # null: a local Ray; "auto" or HOST:PORT of a running one
    max_parallel_engines: Optional[int] = field(default=None, metadata=_fix("cluster.max_parallel_engines=1",
                                                                            "must be an integer ≥ 1"))
    cpu_engine_slots: int = field(default=1, metadata=_fix("cluster.cpu_engine_slots=1", "must be an integer ≥ 1"))
    cpus_per_engine: float = field(default=1, metadata=_fix("cluster.cpus_per_engine=1", "must be > 0"))
    # Engines side by side on one GPU, each its own lane with 1/n of it (runner.plan.device_share): their figures
    # share the GPU's compute, so they answer which configuration fits, not how fast one runs alone.
    engines_per_gpu: int = field(default=1, metadata=_fix("cluster.engines_per_gpu=1", "must be an integer ≥ 1"))

    def __post_init__(self):
        errors = []
        for name in ("cpu_engine_slots", "max_parallel_engines", "engines_per_gpu"):
            value = getattr(self, name)
            if value is not None and value < 1:
                errors.append(f"cluster.{name}={value!r} must be an integer ≥ 1 (fix: cluster.{name}=1)")
        if self.cpus_per_engine <= 0:
            errors.append(f"cluster.cpus_per_engine={_g(self.cpus_per_engine)} must be > 0 "
                          f"(fix: cluster.cpus_per_engine=1)")
        problem = address_problem(self.address)
        if problem:
            errors.append(problem)
        _problems(errors)


@dataclass(kw_only=True)
class TrackingSection:
    """conf/tracking/*.yaml: W&B export of the results (Parquet stays the record)."""

    enabled: bool = False
    mode: str = "disabled"  # offline | online | disabled
    project: str = "vllm-sweeps"
    entity: Optional[str] = None
    init_timeout_s: float = 60  # how long wandb.init may take before the export gives up


# Grid axes that configure the engine (one engine load each), and those that vary the load through one engine.
ENGINE_AXES = ("spec_method", "num_speculative_tokens", "enable_prefix_caching", "gpu_memory_utilization",
               "max_model_len", "spec_acceptance_profile")
TRIAL_AXES = ("concurrency",)


@dataclass(kw_only=True)
class GridSection:
    """sweep.grid: every axis is a list of values; the plan is their product (spec off takes no k)."""

    # Speculative methods (keys of SPEC_METHODS); "off" runs without speculation.
    spec_method: list[Any] = field(default_factory=lambda: ["off"])
    # Draft tokens per step for every method other than off.
    num_speculative_tokens: list[int] = field(default_factory=lambda: [DEFAULT_DRAFT_COUNT], metadata=_fix(
        "sweep.grid.num_speculative_tokens=[1,2,3]", "must be an integer"))
    enable_prefix_caching: list[bool] = field(default_factory=lambda: [True], metadata=_fix(
        "sweep.grid.enable_prefix_caching=[true,false]", "must be true or false"))
    gpu_memory_utilization: list[float] = field(default_factory=lambda: [0.9], metadata=_fix(
        "sweep.grid.gpu_memory_utilization=[0.9]", "is outside (0, 1]"))
    max_model_len: list[int] = field(default_factory=lambda: [2048], metadata=_fix(
        "sweep.grid.max_model_len=[2048]", "must be an integer ≥ 16"))
    # Sessions driven at once through one engine (a workload may replace it with its own list).
    concurrency: list[int] = field(default_factory=lambda: [1], metadata=_fix(
        "sweep.grid.concurrency=[1,4]", "must be an integer ≥ 1"))
    # Acceptance per speculative engine: real (the model's own), a list of synthetic per-position unconditional
    # rates (vLLM's synthetic rejection; GPU only), or measured:<run folder> (the rates an earlier run measured).
    # auto (the default): real, except with model.load_format=dummy on a GPU: [0.86, 0.74, 0.64] (study B's level).
    spec_acceptance_profile: list[Any] = field(default_factory=lambda: ["auto"], metadata=_fix(
        "sweep.grid.spec_acceptance_profile=[real,[0.86,0.74,0.64]]", "must be a list of profiles"))

    def __post_init__(self):
        self.spec_method = [method_name(m) for m in self.spec_method]

    def values(self, axis: str) -> list:
        return list(getattr(self, axis))


@dataclass(kw_only=True)
class ArmSection:
    """One explicit engine arm (sweep.arms): the engine axes it names replace the grid's values of those axes."""

    spec_method: Any = None
    num_speculative_tokens: Optional[int] = field(default=None, metadata=_fix(
        "sweep.arms=[{spec_method:mtp,num_speculative_tokens:2}]", "must be an integer"))
    enable_prefix_caching: Optional[bool] = field(default=None, metadata=_fix(
        "sweep.arms=[{spec_method:off,enable_prefix_caching:true}]", "must be true or false"))
    gpu_memory_utilization: Optional[float] = None
    max_model_len: Optional[int] = None
    spec_acceptance_profile: Any = None  # one profile (real, [rates] or measured:<run folder>)
    # A draft-count schedule, vLLM's `num_speculative_tokens_per_batch_size`: [[start, end, k], ...] (k per engine
    # step from the requests in that step); the arm's k is the schedule's largest.
    num_speculative_tokens_per_batch_size: Any = None

    def __post_init__(self):
        if self.spec_method is False:  # a bare YAML `off`
            self.spec_method = "off"

    def axes(self) -> dict[str, Any]:
        """The axes this arm names, name → one value."""
        return {name: getattr(self, name) for name in ENGINE_AXES if getattr(self, name) is not None}


@dataclass(kw_only=True)
class QuestionSection:
    """The question a sweep exists for (sweep.question): two arms, each named by the engine axes it sets (e.g.
    MTP without caching against caching without MTP); the report's Answer table states that comparison per
    workload even where a third arm leads. A side that matches several arms is represented at each point by
    its best one."""

    a: ArmSection
    b: ArmSection
    name: Optional[str] = None  # how the report titles the question

    def __post_init__(self):
        for side in ("a", "b"):
            if not getattr(self, side).axes():
                _problems([f"sweep.question.{side} must name at least one engine axis (fix: "
                           f"sweep.question={{a:{{spec_method:mtp,enable_prefix_caching:false}},"
                           f"b:{{spec_method:off,enable_prefix_caching:true}}}})"])


def check_grid(grid: GridSection, arms: list[ArmSection] = ()) -> list[str]:
    """The grid's values (with those the explicit arms add), each problem with its fix."""
    values = {axis: grid.values(axis) for axis in (*ENGINE_AXES, *TRIAL_AXES)}
    for arm in arms:
        for name, value in arm.axes().items():
            values[name] += [value] if value not in values[name] else []
    errors = []
    for axis, vs in values.items():
        if not vs:
            errors.append(f"grid axis {axis!r} has no values (fix: sweep.grid.{axis}=[...] with at least one value)")
    methods = values["spec_method"] or ["off"]
    for m in methods:
        if m not in SPEC_METHODS:
            errors.append(f"unknown speculative method {m!r}; valid: {', '.join(SPEC_METHODS)} "
                          f"(fix: sweep.grid.spec_method=[off,mtp])")
    ks = values["num_speculative_tokens"] or [DEFAULT_DRAFT_COUNT]
    for m in methods:
        spec = SPEC_METHODS.get(m)
        if spec is None or m == "off":
            continue
        for k in ks:
            if not spec.accepts(k):
                errors.append(f"num_speculative_tokens={k!r} is outside 1..{spec.max_k} for {m!r} "
                              f"(fix: sweep.grid.num_speculative_tokens=[1,2,3])")
    for c in values["concurrency"]:
        if c < 1:
            errors.append(f"concurrency={c!r} must be an integer ≥ 1 (fix: sweep.grid.concurrency=[1,4])")
    for u in values["gpu_memory_utilization"]:
        if not 0 < u <= 1:
            errors.append(f"gpu_memory_utilization={u:g} is outside (0, 1] "
                          f"(fix: sweep.grid.gpu_memory_utilization=[0.9])")
    for n in values["max_model_len"]:
        if n < 16:
            errors.append(f"max_model_len={n!r} must be an integer ≥ 16 (fix: sweep.grid.max_model_len=[2048])")
    for profile in values["spec_acceptance_profile"]:
        try:
            AcceptanceProfile.parse(resolve_auto(profile, dummy_weights=False, cuda=False))
        except ValueError as exc:
            errors.append(f"spec_acceptance_profile {exc} (fix: sweep.grid.spec_acceptance_profile=[real,"
                          f"[0.86,0.74,0.64]], or measured:<run folder>)")
    return errors


@dataclass(kw_only=True)
class RateSearchSection:
    """sweep.rate_search: the highest rate meeting report.slo, searched per arm (sweep.adaptive=rate_search)."""

    # Stop when the bracket [last rate meeting the SLO, first missing it] is at most this share of its lower end.
    precision: float = field(default=0.1, metadata=_fix("sweep.rate_search.precision=0.1", "must be a number > 0"))
    # Stages at most, saturation included (each stage is one round of engine loads).
    max_stages: int = field(default=6, metadata=_fix("sweep.rate_search.max_stages=6", "must be an integer ≥ 2"))
    # New rates per arm and stage inside its bracket (1: bisection; more: fewer stages, more trials).
    rates_per_stage: int = field(default=1, metadata=_fix("sweep.rate_search.rates_per_stage=1",
                                                          "must be an integer ≥ 1"))
    # The low rate, once the rates just under saturation's throughput miss: this share of that throughput.
    low_fraction: float = field(default=0.1, metadata=_fix("sweep.rate_search.low_fraction=0.1",
                                                           "must be a number in (0, 1)"))
    # Every arm of a workload point measures each rate any of them asks for: more trials, but the arms compare at
    # every rate (the Answer table's points); false: each arm only its own bracket's rates.
    shared_rates: bool = field(default=False, metadata=_fix("sweep.rate_search.shared_rates=false",
                                                            "must be true or false"))
    # A probe below saturation sends for at most this many seconds: min(num_requests, max(50, rate × probe_s))
    # requests (50: a p99 between a repeat's two slowest); null: every probe sends num_requests.
    probe_s: Optional[float] = field(default=15.0, metadata=_fix("sweep.rate_search.probe_s=15",
                                                                 "must be a number of seconds > 0 or null"))

    def __post_init__(self):
        errors = []
        if not self.precision > 0:
            errors.append(f"sweep.rate_search.precision={_g(self.precision)} must be > 0 (a share of the bracket's "
                          f"lower end) (fix: sweep.rate_search.precision=0.1)")
        if self.max_stages < 2:
            errors.append(f"sweep.rate_search.max_stages={self.max_stages!r} must be ≥ 2: saturation, then a rate "
                          f"below it (fix: sweep.rate_search.max_stages=6)")
        if self.rates_per_stage < 1:
            errors.append(f"sweep.rate_search.rates_per_stage={self.rates_per_stage!r} must be ≥ 1 "
                          f"(fix: sweep.rate_search.rates_per_stage=1)")
        if not 0 < self.low_fraction < 1:
            errors.append(f"sweep.rate_search.low_fraction={_g(self.low_fraction)} must be in (0, 1) "
                          f"(fix: sweep.rate_search.low_fraction=0.1)")
        if self.probe_s is not None and not self.probe_s > 0:
            errors.append(f"sweep.rate_search.probe_s={_g(self.probe_s)} must be > 0 seconds, or null for no cap "
                          f"(fix: sweep.rate_search.probe_s=15)")
        _problems(errors)


@dataclass(kw_only=True)
class SweepSection:
    """conf/sweep/*.yaml (with conf/sweep_defaults.yaml): what to run."""

    name: str  # results go to <output_root>/<name>/<run>
    description: str = ""  # one line: what the study answers (`vllm-sweep --help` lists it)
    grid: GridSection = field(default_factory=GridSection)
    # Explicit engine arms instead of the grid's full product (null: the product).
    arms: Optional[list[ArmSection]] = field(default=None, metadata=_fix(
        "sweep.arms=[{spec_method:off},{spec_method:mtp,num_speculative_tokens:2}]", "must be a list of engine arms or null"))
    # Extra engine-argument axes, argument → values (an open mapping of vLLM's arguments, checked against vLLM).
    # Untyped in the schema so that `sweep.engine_axes={...}` may replace its null (a typed dict refuses new
    # keys); a dict after __post_init__.
    engine_axes: Any = None
    repeats: int = field(default=1, metadata=_fix("sweep.repeats=1", "must be an integer ≥ 1"))
    race: bool = field(default=False, metadata=_fix("sweep.race=false", "must be true or false"))
    race_tie_band: float = TIE_BAND  # arms within this band of the best are not eliminated
    # A point stops taking repeats once its decision is settled (runner.numerics.converge), at sweep.repeats at
    # the latest and never before the verdict's minimum.
    converge: bool = field(default=False, metadata=_fix("sweep.converge=false", "must be true or false"))
    question: Optional[QuestionSection] = None
    # An adaptive study (runner.plan.stages.STUDIES): stages planned from the ones before; null: the fixed grid.
    adaptive: Optional[str] = None
    # The rate search's stop rule and step (read by sweep.adaptive=rate_search only).
    rate_search: RateSearchSection = field(default_factory=RateSearchSection)
    preset: Optional[str] = None  # the name of one of `presets`, applied over the config before it is typed
    # Named overlays in the root's shape (sweep/workload/engine/model), chosen by sweep.preset.
    presets: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        errors = []
        if self.engine_axes is not None and not isinstance(self.engine_axes, dict):
            errors.append(f"sweep.engine_axes={self.engine_axes!r} must be a dict of engine argument → values "
                          f"(fix: sweep.engine_axes={{kv_cache_dtype:[auto,fp8]}})")
        self.engine_axes = dict(self.engine_axes) if isinstance(self.engine_axes, dict) else {}
        for name, values in self.engine_axes.items():
            if isinstance(values, dict):
                errors.append(f"sweep.engine_axes.{name} must be a list of values, got a dict "
                              f"(fix: sweep.engine_axes={{{name}:[<value>,<value>]}})")
        for i, arm in enumerate(self.arms or []):
            if not arm.axes() and arm.num_speculative_tokens_per_batch_size is None:
                errors.append(f"sweep.arms[{i}] must be a non-empty dict of engine axes "
                              f"(fix: sweep.arms=[{{spec_method: 'off', enable_prefix_caching: true}}])")
        if self.repeats < 1:
            errors.append(f"sweep.repeats={self.repeats!r} must be an integer ≥ 1 (fix: sweep.repeats=1)")
        problem = plain_name_problem(self.name, where="sweep.name", example="my_sweep")
        if problem:
            errors.append(problem)
        errors += check_grid(self.grid, self.arms or [])
        _problems(errors)


@dataclass(kw_only=True)
class RunConfig:
    """The root: conf/config.yaml with its groups, as the plan and the executor receive it."""

    model: ModelSection
    engine: EngineSection = field(default_factory=EngineSection)
    # spec.<method>: extra speculative_config keys per method (an open mapping: vLLM's speculative_config).
    spec: dict[str, Any] = field(default_factory=dict)
    # workload.<name>: the selected workloads' parameters (list values are axes); each point is parsed by the
    # workload's own parameter class (runner.measurement.workloads), so here they stay an open mapping.
    workload: dict[str, Any] = field(default_factory=dict)
    cluster: ClusterSection = field(default_factory=ClusterSection)
    tracking: TrackingSection = field(default_factory=TrackingSection)
    sweep: SweepSection
    execution: ExecutionSection = field(default_factory=ExecutionSection)
    # Latency targets (runner.slo): the block as written; after build the typed Slo, older blocks' targets included.
    slo: SloSection = field(default_factory=SloSection)
    run: str = "default"  # the run's name: the same name resumes
    output_root: str = "outputs"
    dry_run: bool = False  # print the plan, start nothing
    retry_failed: bool = False  # re-run trials that failed in an earlier attempt of this run
    # The report's settings: true/false or a block as written (untyped, so that `report=false` may replace the
    # block); after build the typed ReportSettings (runner.config.report).
    report: Any = True

    def __post_init__(self):
        problem = plain_name_problem(self.run, where="run", example="run-1")
        errors = [problem] if problem else []
        for method, extra in self.spec.items():
            if extra is not None and not isinstance(extra, dict):
                errors.append(f"spec.{method} must be a dict of speculative_config keys, got {extra!r} "
                              f"(fix: spec.{method}={{}})")
        self.spec = {m: dict(extra or {}) for m, extra in self.spec.items() if extra is None or isinstance(extra, dict)}
        # Older key names read as their names now; keys conf/workload/ declares at their closed-loop values stay
        # out of the points (and the trial ids).
        self.workload = {name: without_declared_defaults(name, with_current_names(name, dict(params or {})))
                         for name, params in self.workload.items()}
        try:  # typed once; dataclasses.replace() passes the typed values back in
            if isinstance(self.slo, SloSection):
                old_report = self.report.get("slo") if isinstance(self.report, dict) else None
                older = old_report_slo(old_report).over(old_execution_slo(vars(self.execution.slo)))
                self.slo = self.slo.value().over(older)
            if not isinstance(self.report, ReportSettings):
                self.report = parse_report_settings(self.report, slo=self.slo)
        except (SloError, ReportSettingsError) as exc:
            errors.append(str(exc))
        _problems(errors)

    @property
    def spec_methods(self) -> list[str]:
        """Every method the grid and the arms name."""
        methods = list(self.sweep.grid.spec_method)
        for arm in self.sweep.arms or []:
            if arm.spec_method is not None and arm.spec_method not in methods:
                methods.append(arm.spec_method)
        return methods or ["off"]


def run_config(*, sweep_name: str, model: str, grid: dict, workloads: dict, engine_args: Optional[dict] = None,
               engine_axes: Optional[dict] = None, spec_extra: Optional[dict] = None, repeats: int = 1,
               arms: Optional[list[dict]] = None, tensor_parallel_size: int = 1) -> RunConfig:
    """A config built in code (benchmarks, tests) rather than composed from conf/: the same typed objects."""
    return RunConfig(model=ModelSection(name=model),
                     engine=EngineSection(args=dict(engine_args or {}), tensor_parallel_size=tensor_parallel_size),
                     spec=dict(spec_extra or {}), workload=dict(workloads),
                     sweep=SweepSection(name=sweep_name, grid=GridSection(**grid), repeats=repeats,
                                        engine_axes=engine_axes,
                                        arms=None if arms is None else [ArmSection(**a) for a in arms]))
