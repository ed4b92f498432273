"""The embedded default model: a tiny Qwen2 body with one MiMo MTP layer.

Built locally (no model hub): a byte-level BPE tokenizer trained on the
Python standard library's sources, plus a `config.json` that vLLM maps to
`MiMoForCausalLM` and whose MTP layer `{"method": "mtp"}` accepts. Weights are
random (`load_format: dummy`) unless a trained checkpoint is present.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sysconfig
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@dataclass(frozen=True, kw_only=True)
class TinyModelSpec:
    vocab_size: int = 2048
    hidden_size: int = 256
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 32768
    num_nextn_predict_layers: int = 1
    corpus_bytes: int = 4_000_000

    def fingerprint(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:10]


def corpus_files(*, max_bytes: int) -> list[Path]:
    """Deterministic slice of the standard library's sources: the local text."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files, total = [], 0
    for path in sorted(root.glob("*.py")):
        size = path.stat().st_size
        if total + size > max_bytes:
            break
        files.append(path)
        total += size
    return files


def _train_tokenizer(*, spec: TinyModelSpec, out_dir: Path) -> dict[str, int]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    files = [str(p) for p in corpus_files(max_bytes=spec.corpus_bytes)]
    tokenizer.train(files, trainer)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    special_ids = {t: tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
    (out_dir / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": spec.max_position_embeddings,
        "bos_token": None,
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "clean_up_tokenization_spaces": False,
    }, indent=2))
    return special_ids


def model_config(*, spec: TinyModelSpec, eos_token_id: int) -> dict:
    return {
        "architectures": ["MiMoForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "max_position_embeddings": spec.max_position_embeddings,
        "max_window_layers": spec.num_hidden_layers,
        "num_nextn_predict_layers": spec.num_nextn_predict_layers,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "sliding_window": None,
        "attention_dropout": 0.0,
        "torch_dtype": "bfloat16",
        "bos_token_id": eos_token_id,
        "eos_token_id": eos_token_id,
    }


def build_tiny_model(*, out_dir: Path, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Writes tokenizer and config into `out_dir` (atomically) and returns it."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    try:
        special = _train_tokenizer(spec=spec, out_dir=staging)
        eos = special["<|endoftext|>"]
        (staging / "config.json").write_text(json.dumps(model_config(spec=spec, eos_token_id=eos), indent=2))
        (staging / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}))
        (staging / "tiny_model_spec.json").write_text(json.dumps(asdict(spec), indent=2))
        if out_dir.exists():
            shutil.rmtree(staging)
        else:
            os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def default_cache_dir() -> Path:
    env = os.environ.get("RUNNER_CACHE_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".cache"


def ensure_tiny_model(*, cache_dir: Path | None = None, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """The embedded model's folder, built on first use and cached."""
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    out_dir = root / "models" / f"tiny-mtp-{spec.fingerprint()}"
    if not (out_dir / "config.json").exists():
        build_tiny_model(out_dir=out_dir, spec=spec)
    return out_dir


if __name__ == "__main__":
    print(ensure_tiny_model())
