"""A pooled engine's identity (pure): what must be equal for a later command to wake an engine instead of
loading it, and the Ray names derived from it.

The identity is the engine's settings (its plan id, and the arguments its start hands vLLM: the plan's, completed for
the start, sleep mode included),
the model (name, source, weights, load format), the device, the vLLM version and the environment variables that
change an engine. The actor's name is a hash of it; the actor also reports the identity itself, so a match is
checked against the whole value, never the hash alone.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from runner.plan.grid import EngineConfig, engine_identity, stable_hash

NAMESPACE_PREFIX = "vllm-sweep-pool-"
ACTOR_PREFIX = "engine-"
# Environment variables of an actor that change its engine (the rest: paths, logging, NCCL switches).
ENGINE_ENV_PREFIXES = ("VLLM_", "OMP_NUM_THREADS")
ENGINE_ENV_SKIPPED = ("VLLM_LOGGING_LEVEL",)
MODEL_FIELDS = ("name", "builtin", "weights", "path", "tokenizer", "load_format")


def pool_namespace(pool: str) -> str:
    return f"{NAMESPACE_PREFIX}{pool}"


def pool_of_namespace(namespace: Optional[str]) -> Optional[str]:
    """The pool a Ray namespace holds, or None for any other namespace."""
    if namespace and namespace.startswith(NAMESPACE_PREFIX) and len(namespace) > len(NAMESPACE_PREFIX):
        return namespace[len(NAMESPACE_PREFIX):]
    return None


@dataclass(frozen=True, kw_only=True)
class PoolIdentity:
    engine_id: str
    settings: dict  # runner.plan.grid.engine_identity, the speculative extras and the api
    vllm_args: dict  # what its start hands vLLM (runner.plan.vllm_args.VllmArgs.for_start): sleep mode included
    model: dict
    device: str
    vllm_version: str
    env: dict

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def key(self) -> str:
        return stable_hash(self.as_dict(), length=16)

    @property
    def actor_name(self) -> str:
        return f"{ACTOR_PREFIX}{self.key}"

    def matches(self, reported: Optional[dict]) -> bool:
        """An actor's reported identity is this one (JSON-normalised: tuples and lists compare equal)."""
        return reported is not None and stable_hash(reported, length=64) == stable_hash(self.as_dict(), length=64)


def engine_env(env: dict) -> dict:
    """The part of an actor's environment that changes its engine (None: removed on the node)."""
    return {k: v for k, v in sorted(env.items())
            if k.startswith(ENGINE_ENV_PREFIXES) and k not in ENGINE_ENV_SKIPPED}


def identity_of(engine: EngineConfig, *, model, device: str, vllm_version: str, env: dict) -> PoolIdentity:
    """`engine` as its start runs it (EngineConfig.for_start), `model` a ModelSection."""
    settings = {"identity": engine_identity(engine.settings), "spec_extra": engine.spec_extra, "api": engine.api}
    args = engine.vllm_args.as_dict() if engine.vllm_args is not None else {}
    return PoolIdentity(engine_id=engine.engine_id, settings=settings, vllm_args=args,
                        model={name: getattr(model, name, None) for name in MODEL_FIELDS}, device=device,
                        vllm_version=vllm_version, env=engine_env(env))


def summary_of(engine: EngineConfig) -> str:
    """The engine in words for `pool list`: its id, arm and settings."""
    from runner.labels import full_label

    return f"{engine.engine_id} {full_label(engine.settings)}"


def adoptable(wanted: dict[str, PoolIdentity], found: dict[str, Optional[dict]]) -> dict[str, str]:
    """engine_id → actor name, for each wanted engine whose pooled actor (`found`: name → its reported identity)
    is the same engine."""
    out = {}
    for engine_id, identity in wanted.items():
        if identity.matches(found.get(identity.actor_name)):
            out[engine_id] = identity.actor_name
    return out
