"""The model and tokenizer as vLLM will read them, checked before any engine starts: a folder with a parseable
config.json naming an architecture vLLM can load, and a tokenizer where vLLM will look (a hub id is read where the
engine runs). Each message names the override that fixes it."""
from __future__ import annotations

import os
from typing import Optional

from runner.config.sections import ModelSection


def _looks_like_hub_id(path: str) -> bool:
    return path.count("/") == 1 and not path.startswith((".", "/", "~"))


def check_model(model: ModelSection, *, spec=None, engine_args: Optional[dict] = None) -> list[str]:
    """The model as vLLM will read it: a folder here (or a hub id, read where the engine runs); `spec`: vLLM's
    rules (EngineArgSpec) for the architecture check."""
    if model.builtin:
        return []
    path = model.path
    if not path:
        return ["no model given (fix: model=tiny_mtp, or model.path=/path/to/model)"]
    errors = []
    if not os.path.exists(os.path.expanduser(path)):
        if not _looks_like_hub_id(path):
            errors.append(f"model path {path!r} does not exist (fix: model.path=<an existing folder>)")
    else:
        errors += check_model_folder(path, spec=spec, engine_args=engine_args or {})
    return errors + check_tokenizer(model, engine_args=engine_args or {})


# Files any of vLLM's tokenizer modes reads (Hugging Face fast or slow, SentencePiece, Mistral's tekken).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "spiece.model", "tekken.json")


def _has_tokenizer(folder: str) -> bool:
    return any(os.path.isfile(os.path.join(folder, name)) for name in TOKENIZER_FILES) or any(
        name.endswith(".tiktoken") for name in os.listdir(folder))


def check_tokenizer(model: ModelSection, *, engine_args: dict) -> list[str]:
    """A tokenizer where vLLM will look: model.tokenizer, else the model's folder."""
    if engine_args.get("skip_tokenizer_init") is True:
        return []
    if model.tokenizer:
        folder = os.path.expanduser(model.tokenizer)
        if not os.path.exists(folder):
            return [] if _looks_like_hub_id(model.tokenizer) else [
                f"model.tokenizer={model.tokenizer!r} does not exist (fix: model.tokenizer=<a tokenizer folder or "
                f"hub id>, or model.tokenizer=null for the model's own)"]
        if os.path.isdir(folder) and not _has_tokenizer(folder):
            return [f"model.tokenizer={model.tokenizer!r} holds no tokenizer ({', '.join(TOKENIZER_FILES[:3])}, …) "
                    f"(fix: model.tokenizer=<a tokenizer folder or hub id>)"]
        return []
    folder = os.path.expanduser(model.path or "")
    if os.path.isdir(folder) and not _has_tokenizer(folder):
        return [f"model folder {model.path!r} holds no tokenizer ({', '.join(TOKENIZER_FILES[:3])}, …) "
                f"(fix: model.tokenizer=<a tokenizer folder or hub id>)"]
    return []


def check_model_folder(path: str, *, spec=None, engine_args: dict) -> list[str]:
    """What vLLM reads first from a local model: config.json, parseable, naming architectures it can load."""
    import json

    folder = os.path.expanduser(path)
    if os.path.isfile(folder):
        return [] if folder.endswith(".gguf") else [
            f"model.path={path!r} is a file; vLLM loads a model folder (config.json, weights, tokenizer) "
            f"(fix: model.path=<the model's folder>)"]
    config = os.path.join(folder, "config.json")
    if not os.path.isfile(config):
        if os.path.isfile(os.path.join(folder, "params.json")) or engine_args.get("config_format") == "mistral":
            return []  # Mistral's own format: vLLM reads params.json
        return [f"model folder {path!r} has no config.json (vLLM reads the model's architecture and sizes from it) "
                f"(fix: model.path=<a folder with config.json>)"]
    try:
        with open(config, encoding="utf-8") as f:
            data = json.load(f)
    except ValueError as exc:
        return [f"{config} does not parse as JSON: {exc} (fix: repair that file, or model.path=<another folder>)"]
    except OSError as exc:
        return [f"{config} cannot be read: {exc.strerror} (fix: model.path=<a folder you can read>)"]
    if not isinstance(data, dict):
        return [f"{config} is not a JSON object (fix: repair that file, or model.path=<another folder>)"]
    architectures = data.get("architectures")
    if not (isinstance(architectures, list) and architectures and all(isinstance(a, str) for a in architectures)):
        return [f"{config} names no architectures (a list such as [\"Qwen2ForCausalLM\"]; vLLM picks the model "
                f"class by it) (fix: add \"architectures\" to that file, or model.path=<another folder>)"]
    if data.get("auto_map") or spec is None or not hasattr(spec, "knows_architecture"):
        return []  # custom code (trust_remote_code) resolves its own class
    if any(spec.knows_architecture(a) is not False for a in architectures):
        return []
    import difflib

    close = difflib.get_close_matches(architectures[0], sorted(spec.architectures), n=3, cutoff=0.7)
    hint = f"; closest: {', '.join(close)}" if close else ""
    return [f"{config} names architectures {architectures}, which vLLM {spec.vllm_version} cannot load (not in its "
            f"model registry nor in Transformers){hint} (fix: model.path=<a model vLLM supports>, or a vLLM that "
            f"supports it)"]
