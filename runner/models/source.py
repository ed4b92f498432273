"""Resolve a model config to a folder on the machine that loads it."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from runner.config.sections import ModelSection


@dataclass(kw_only=True)
class ModelSource:
    """Where the weights and tokenizer come from, resolved on the machine that loads them."""

    path: str
    tokenizer: Optional[str] = None
    load_format: str = "auto"
    vocab_size: int = 0
    first_token_id: int = 0


def tiny_weights(model_cfg: ModelSection) -> str:
    """Trained weights unless told otherwise; dummy weights need no training (and no file)."""
    return model_cfg.weights or ("dummy" if model_cfg.load_format == "dummy" else "trained")


def driver_tokenizer(model_cfg: ModelSection):
    """The model's tokenizer (with its chat template) on the driver, which measures prompts before any engine
    starts; the embedded model's needs no trained weights."""
    from runner.traffic.chat import load_tokenizer

    if model_cfg.builtin == "tiny_mtp":
        from runner.models.tiny import ensure_tiny_model

        return load_tokenizer(str(ensure_tiny_model(weights="dummy")))
    if model_cfg.builtin == "mimo_7b":
        from runner.models.tiny import default_cache_dir

        return load_tokenizer(str(default_cache_dir() / "models" / "mimo-7b-dummy"))
    return load_tokenizer(model_cfg.tokenizer or model_cfg.path)


def resolve_model_source(model_cfg: ModelSection) -> ModelSource:
    builtin = model_cfg.builtin
    load_format = model_cfg.load_format
    if builtin == "tiny_mtp":
        from runner.models.tiny import ensure_tiny_model

        weights = tiny_weights(model_cfg)
        if weights == "dummy":
            load_format = "dummy"
        path = str(ensure_tiny_model(weights=weights))
    elif builtin == "mimo_7b":
        from runner.models.mimo7b import ensure_mimo7b
        from runner.models.tiny import default_cache_dir

        path = str(ensure_mimo7b(default_cache_dir() / "models" / "mimo-7b-dummy"))
    elif builtin:
        raise ValueError(f"unknown builtin model {builtin!r}; valid: tiny_mtp, mimo_7b "
                         f"(fix: model.builtin=tiny_mtp or model.path=...)")
    else:
        path = model_cfg.path
    vocab = 0
    config_file = Path(path) / "config.json"
    if config_file.exists():
        vocab = int(json.loads(config_file.read_text()).get("vocab_size", 0))
    return ModelSource(
        path=path,
        tokenizer=model_cfg.tokenizer,
        load_format=load_format,
        vocab_size=int(model_cfg.prompt_token_high or vocab),
        first_token_id=int(model_cfg.prompt_token_low),
    )
