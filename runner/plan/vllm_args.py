"""vLLM's engine arguments of one engine, built once, at plan time, by one pure function (`vllm_args`).

Each engine of the plan carries its arguments (EngineConfig.vllm_args); a start completes them once with what its
host chose (`VllmArgs.for_start`: the executor for TP, sleep mode), and an engine pool's identity is taken from that
result; the actor hands them to vLLM as they are, with the one fact only its node knows put in: where the model's
folder is there (`VllmArgs.located`).
The engines table keeps what the engine ran (engines.vllm_args_json) and the recommendation reads it back
(`deployment`). The keys this function sets are the runner's (RUNNER_KEYS): passed through engine.args or
sweep.engine_axes, one is refused before start (runner.plan.validate), naming the override that sets it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from runner.config.acceptance import SYNTHETIC_KEYS
from runner.config.sections import ModelSection
from runner.schema import EngineSettings

# Each key the runner sets, and what sets it (a refusal's fix: "use <this>"). {values}: the refused values.
RUNNER_KEYS: dict[str, str] = {
    "model": "model.path=<folder or hub id>, or model=<option>",
    "tokenizer": "model.tokenizer=<path>",
    "load_format": "model.load_format=<format>",
    "max_model_len": "sweep.grid.max_model_len={values}",
    "gpu_memory_utilization": "sweep.grid.gpu_memory_utilization={values}",
    "enable_prefix_caching": "sweep.grid.enable_prefix_caching={values}",
    "tensor_parallel_size": "engine.tensor_parallel_size={value}",
    "speculative_config": "sweep.grid.spec_method=[mtp] sweep.grid.num_speculative_tokens=[2] "
                          "(method extras: spec.<method>.<key>)",
    "disable_log_stats": "nothing else: the runner's counters need vLLM's stats",
    "worker_extension_cls": "nothing else: the runner reads weights and KV memory through its own worker extension",
}
# vLLM 0.32's shortcuts into speculative_config: a runner key under another name.
SHORTCUTS: dict[str, str] = {
    "spec_method": "sweep.grid.spec_method={values}",
    "spec_tokens": "sweep.grid.num_speculative_tokens={values}",
    "spec_model": "+spec.<method>.model=<draft model path>",
}
OWNED: dict[str, str] = {**RUNNER_KEYS, **SHORTCUTS}
# Grid axes that reach vLLM, and the engine argument whose rules their values follow (off and its k=0 are the
# runner's own, never passed).
GRID_TO_VLLM = {"enable_prefix_caching": "enable_prefix_caching", "gpu_memory_utilization": "gpu_memory_utilization",
                "max_model_len": "max_model_len", "spec_method": "spec_method", "num_speculative_tokens": "spec_tokens"}

WORKER_EXTENSION = "runner.vllm.worker_probe.MemoryProbe"
PER_REQUEST_METRICS = "per_request_spec_decode_metrics"
# What the runner adds to host and measure an engine, with the value it adds: a deployment leaves these out.
HOSTING: dict[str, Any] = {"disable_log_stats": False, "worker_extension_cls": WORKER_EXTENSION,
                           PER_REQUEST_METRICS: "summary", "enable_sleep_mode": True,
                           "distributed_executor_backend": "mp"}
# The order of the recommendation's arguments (the rest follow in theirs).
DEPLOY_ORDER = ("model", "speculative_config", "enable_prefix_caching", "gpu_memory_utilization", "max_model_len",
                "tensor_parallel_size", "load_format")


@dataclass(frozen=True, kw_only=True)
class Target:
    """What the machines the engines run on add to their arguments."""

    cuda: bool  # engine.device: a draft-count schedule gets PIECEWISE CUDA graphs there (runner.vllm.spec_compat)
    per_request_metrics: bool  # the installed vLLM takes per_request_spec_decode_metrics (0.32 does, 0.26 not)

    @classmethod
    def of(cls, device: str) -> "Target":
        from runner.plan.engine_args import installed_takes

        return cls(cuda=device == "cuda", per_request_metrics=bool(installed_takes(PER_REQUEST_METRICS)))


def _canonical(args: Mapping) -> str:
    return json.dumps(dict(args), sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class VllmArgs:
    """One engine's complete vLLM arguments (`AsyncEngineArgs(**args.as_dict())`), frozen as canonical JSON."""

    json: str = "{}"
    # The arguments the runner added for the installed vLLM (JSON; None: none): engines.added_engine_args_json.
    added_json: Optional[str] = None

    @classmethod
    def of(cls, args: Mapping, *, added: Optional[Mapping] = None) -> "VllmArgs":
        return cls(json=_canonical(args), added_json=_canonical(added) if added else None)

    def as_dict(self) -> dict:
        return json.loads(self.json)

    @property
    def sleep_mode(self) -> bool:
        return bool(self.as_dict().get("enable_sleep_mode"))

    def for_start(self, *, sleep_mode: bool) -> "VllmArgs":
        """These arguments completed for one start, where they set none of it (the user's pass-through wins): TP > 1
        inside one actor needs vLLM's multiprocessing executor (Ray's would nest a second cluster); an engine that
        may sleep (between turns, or in its pool) needs vLLM's sleep mode (its cumem allocator) from the start."""
        args = self.as_dict()
        hosting = {}
        if int(args.get("tensor_parallel_size") or 1) > 1:
            hosting["distributed_executor_backend"] = HOSTING["distributed_executor_backend"]
        if sleep_mode:
            hosting["enable_sleep_mode"] = HOSTING["enable_sleep_mode"]
        if all(key in args for key in hosting):
            return self
        return VllmArgs(json=_canonical({**hosting, **args}), added_json=self.added_json)

    def located(self, *, path: str, tokenizer: Optional[str], load_format: str) -> "VllmArgs":
        """The model's folder on the node that loads it (an embedded model is built there)."""
        args = {**self.as_dict(), "model": path, "tokenizer": tokenizer or path, "load_format": load_format}
        return VllmArgs(json=_canonical(args), added_json=self.added_json)


def vllm_args(*, settings: EngineSettings, engine_args: Mapping, spec_extra: Mapping, model: ModelSection,
              target: Target) -> VllmArgs:
    """The one builder: the arguments passed through (engine.args and sweep.engine_axes), then the runner's keys
    from the engine's settings, then what the installed vLLM and the device need added."""
    from runner.plan.spec_variants import speculative_config
    from runner.vllm.spec_compat import schedule_graph_args

    location = model.path or model.name
    args = dict(engine_args)
    args.update(model=location, tokenizer=model.tokenizer or location, load_format=_load_format(model),
                max_model_len=settings.max_model_len, gpu_memory_utilization=settings.gpu_memory_utilization,
                enable_prefix_caching=settings.enable_prefix_caching,
                tensor_parallel_size=settings.tensor_parallel_size, disable_log_stats=False,
                worker_extension_cls=WORKER_EXTENSION)
    spec = speculative_config(settings, dict(spec_extra))
    if spec is not None:
        args["speculative_config"] = spec
        if target.per_request_metrics:
            args.setdefault(PER_REQUEST_METRICS, HOSTING[PER_REQUEST_METRICS])
    added = schedule_graph_args(args, cuda=target.cuda)
    return VllmArgs.of({**args, **added}, added=added)


def _load_format(model: ModelSection) -> str:
    from runner.models.source import tiny_weights

    if model.builtin == "tiny_mtp" and tiny_weights(model) == "dummy":
        return "dummy"
    return model.load_format


def deployment(args: Mapping, *, model: Optional[str] = None) -> dict[str, Any]:
    """The arguments an engine ran, as a deployment takes them: without what the runner added to host and measure
    it, the tokenizer where it is the model's own, the load format where it is vLLM's default; `model`: the
    model's path to put in (the folder the run loaded is a machine's own)."""
    args = {k: v for k, v in args.items() if not (k in HOSTING and v == HOSTING[k])}
    if args.get("tokenizer") in (None, args.get("model")):
        args.pop("tokenizer", None)
    if model:
        args["model"] = model
    if args.get("load_format") in (None, "auto"):
        args.pop("load_format", None)
    ordered = {k: args[k] for k in DEPLOY_ORDER if k in args}
    ordered.update({k: v for k, v in args.items() if k not in ordered})
    return ordered


# Settings that exist only to benchmark: a deployment never runs them (forced acceptance, random weights).
BENCHMARK_ONLY_SPEC_KEYS = SYNTHETIC_KEYS
BENCHMARK_ONLY_LOAD_FORMATS = ("dummy",)


def production(args: Mapping) -> tuple[dict[str, Any], dict[str, Any]]:
    """A deployment's arguments split in two: what production runs, and the benchmark-only settings the
    measurement used on top of them (speculative_config's synthetic acceptance, load_format dummy), by the key
    that carried them."""
    kept = dict(args)
    measured_with: dict[str, Any] = {}
    spec = kept.get("speculative_config")
    if isinstance(spec, Mapping):
        forced = {k: v for k, v in spec.items() if k in BENCHMARK_ONLY_SPEC_KEYS}
        if forced:
            kept["speculative_config"] = {k: v for k, v in spec.items() if k not in forced}
            measured_with.update({f"speculative_config.{k}": v for k, v in forced.items()})
    if kept.get("load_format") in BENCHMARK_ONLY_LOAD_FORMATS:
        measured_with["load_format"] = kept.pop("load_format")
    return kept, measured_with


def read_args(text: Any) -> Optional[dict]:
    """engines.vllm_args_json read back (None: a row without it, e.g. an engine that did not start)."""
    if not isinstance(text, str) or not text:
        return None
    return json.loads(text)
