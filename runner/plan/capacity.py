"""Trials the engine cannot hold at once, estimated before any engine starts from the model's config.json and the
KV pool's size: warned, still run (a capacity wall is a result to measure)."""
from __future__ import annotations

import os
from typing import Optional

from runner.config.checks import _is_int
from runner.config.sections import EngineSection, ModelSection

_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}


def model_shape(model: ModelSection) -> Optional[dict]:
    """The model's config.json as a dict (builtin models from their spec), None where it cannot be read here."""
    import json

    builtin = model.builtin
    if builtin in ("tiny_mtp", "mimo_7b"):
        from runner.models.tiny import TinyModelSpec, model_config

        spec = TinyModelSpec()
        if builtin == "mimo_7b":
            from runner.models.mimo7b import MIMO_7B as spec
        return model_config(spec=spec, eos_token_id=0)
    path = model.path
    config = os.path.join(os.path.expanduser(path), "config.json") if path else None
    if config and os.path.exists(config):
        try:
            with open(config) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    return None


def kv_bytes_per_token(*, shape: dict, engine_args: dict, spec_method: str) -> Optional[int]:
    """2 (K and V) × layers × KV heads × head dim × element bytes; MTP layers count when MTP runs."""
    layers = shape.get("num_hidden_layers")
    heads = shape.get("num_key_value_heads") or shape.get("num_attention_heads")
    head_dim = shape.get("head_dim") or (shape["hidden_size"] // shape["num_attention_heads"]
                                         if shape.get("hidden_size") and shape.get("num_attention_heads") else None)
    if not (_is_int(layers) and _is_int(heads) and _is_int(head_dim)):
        return None
    if spec_method == "mtp":
        layers += int(shape.get("num_nextn_predict_layers") or 0)
    kv_dtype = str(engine_args.get("kv_cache_dtype") or "auto")
    if kv_dtype.startswith("fp8") or kv_dtype.startswith("int8"):
        size = 1
    else:
        dtype = str(engine_args.get("dtype") or "auto")
        size = _DTYPE_BYTES.get(dtype if dtype != "auto" else str(shape.get("torch_dtype") or "bfloat16"), 2)
    return 2 * layers * heads * head_dim * size


def kv_pool_bytes(*, engine: EngineSection, engine_args: dict) -> Optional[int]:
    if _is_int(engine_args.get("kv_cache_memory_bytes")):
        return engine_args["kv_cache_memory_bytes"]
    if engine.device == "cpu" and _is_int(engine.cpu_kvcache_space_gib):
        return engine.cpu_kvcache_space_gib * 2**30
    return None


def capacity_warnings(plan, *, model: ModelSection, engine: EngineSection) -> list[str]:
    """Trials whose concurrency × sequence length the engine's KV pool cannot hold, or whose concurrency is
    above max_num_seqs. Estimates from config.json; prefix sharing is not counted (an upper bound)."""
    import json

    from runner.labels import plan_labels

    shape = model_shape(model)
    labels = plan_labels(plan.engines)
    warnings, seen, unknown = [], set(), []
    for e in plan.engines:
        args = json.loads(e.settings.engine_args_json or "{}")
        per_token = kv_bytes_per_token(shape=shape, engine_args=args, spec_method=e.settings.spec_method) \
            if shape else None
        pool = kv_pool_bytes(engine=engine, engine_args=args)
        max_seqs = args.get("max_num_seqs")
        for t in plan.trials_of(e.engine_id):
            key = (e.engine_id, t.workload, t.params_json, t.concurrency)
            if key in seen:
                continue
            seen.add(key)
            try:
                seq = min(t.params.max_sequence_tokens(), e.settings.max_model_len)
            except Exception:
                continue
            where = f"engine {e.engine_id} ({labels[e.engine_id]}), {t.workload} c={t.concurrency}"
            if _is_int(max_seqs) and t.concurrency > max_seqs:
                warnings.append(f"warning: {where}: concurrency {t.concurrency} > max_num_seqs={max_seqs}; at most "
                                f"{max_seqs} run at once, the rest queue (fix, if not meant: "
                                f"engine.args.max_num_seqs={t.concurrency} or a lower sweep.grid.concurrency)")
            need = t.concurrency * seq
            if pool is None or per_token is None:
                unknown.append(need)
                continue
            tokens = pool // per_token
            if need > tokens:
                warnings.append(f"warning: {where}: {t.concurrency} × {seq} tokens = {need} tokens, above the KV "
                                f"pool's ~{tokens} tokens ({pool / 2**30:.3g} GiB / {per_token} B per token); "
                                f"the trial runs as a capacity wall (preemption or queueing expected)")
    if unknown:
        warnings.append(f"note: KV pool unknown before start for {len(unknown)} trial shape(s) (largest needs "
                        f"{max(unknown)} tokens); set sweep.engine_axes={{kv_cache_memory_bytes:[<bytes>]}} "
                        f"to check it before start")
    return warnings
