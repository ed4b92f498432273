"""The embedded default model: a tiny Qwen2 body with one MiMo MTP layer.

Built locally (no model hub): a byte-level BPE tokenizer trained on the
Python standard library's sources, plus a `config.json` that vLLM maps to
`MiMoForCausalLM` and whose MTP layer `{"method": "mtp"}` accepts, plus
`model.safetensors` trained on the same sources by `runner.models.training`
(body and MTP layer). The project ships that folder as trained (`weights/tiny-mtp`): a first use copies it
into the cache instead of training for minutes; where the code's spec or recipe changed, or a cached folder's
tokenizer is not the shipped one, the first use trains. `weights="dummy"` skips the training
(for `load_format: dummy`).

A deterministic slice of the sources (by file name) is held out of the
tokenizer and the training: `heldout_texts()` / `heldout_prompt_token_ids()`
give prompts the model has not seen, so acceptance rates are not inflated.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from runner.cache import cache_root
from runner.models.corpus import HELDOUT_MODULUS, corpus_files, heldout_files, load_tokenizer
from runner.models.training import REPORT_FILE, WEIGHTS_FILE

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# The project's trained copy of the embedded model; `python -m runner.models.train --ship` refreshes it.
SHIPPED_DIR = Path(__file__).resolve().parent / "weights" / "tiny-mtp"
SHIPPED_FILES = ("config.json", "generation_config.json", "tiny_model_spec.json", "tokenizer.json",
                 "tokenizer_config.json", WEIGHTS_FILE, REPORT_FILE)


@dataclass(frozen=True, kw_only=True)
class TinyModelSpec:
    vocab_size: int = 2048
    # Small enough to train in minutes on two CPU cores; head_dim stays 64 (vLLM's attention kernels).
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    max_position_embeddings: int = 32768
    num_nextn_predict_layers: int = 1
    corpus_bytes: int = 4_000_000
    heldout_modulus: int = HELDOUT_MODULUS  # held out of tokenizer and training (runner.models.corpus)

    def fingerprint(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:10]


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
    _write_tokenizer_config(spec=spec, out_dir=out_dir)
    return special_ids


# ChatML, as Qwen2 models ship it (without a default system prompt): what a chat request to the embedded model
# is rendered with (runner.traffic.chat).
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'"
    " + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def tokenizer_config(spec: TinyModelSpec) -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": spec.max_position_embeddings,
        "bos_token": None,
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def _write_tokenizer_config(*, spec: TinyModelSpec, out_dir: Path) -> None:
    tmp = out_dir / ".tokenizer_config.json.tmp"
    tmp.write_text(json.dumps(tokenizer_config(spec), indent=2))
    os.replace(tmp, out_dir / "tokenizer_config.json")


def _tokenizer_config_current(*, spec: TinyModelSpec, out_dir: Path) -> bool:
    """The folder's tokenizer_config.json is this code's: a change to it (its chat template) rewrites that file
    in place, keeping the trained tokenizer and weights, whose cache key (the folder's name) it does not touch."""
    try:
        return json.loads((out_dir / "tokenizer_config.json").read_text()) == tokenizer_config(spec)
    except (OSError, ValueError):
        return False


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
    """$RUNNER_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/vllm-sweep (runner.cache)."""
    return cache_root()


def tiny_model_dir(*, cache_dir: Path | None = None, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    return root / "models" / f"tiny-mtp-{spec.fingerprint()}"


@contextmanager
def _file_lock(path: Path):
    """Exclusive across processes (Ray actors, parallel test runs): the second caller waits, then reuses."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_tiny_model(*, cache_dir: Path | None = None, spec: TinyModelSpec = TinyModelSpec(),
                      weights: str = "trained") -> Path:
    """The embedded model's folder, built on first use and cached.

    weights="trained" also provides `model.safetensors`: the shipped copy, or trained here (minutes, once per cache
    folder) where the code moved past it; weights="dummy" stops at tokenizer + config, for `load_format: dummy`.
    """
    if weights not in ("trained", "dummy"):
        raise ValueError(f"unknown weights {weights!r}; valid: trained, dummy (fix: model.weights=trained)")
    out_dir = tiny_model_dir(cache_dir=cache_dir, spec=spec)
    if tiny_model_ready(cache_dir=cache_dir, spec=spec, weights=weights):
        return out_dir
    with _file_lock(out_dir.parent / f".{out_dir.name}.lock"):
        if not (out_dir / "config.json").exists():
            if shipped_model_dir(spec) is not None:
                _copy_folder(SHIPPED_DIR, out_dir)
            else:
                build_tiny_model(out_dir=out_dir, spec=spec)
        if not _tokenizer_config_current(spec=spec, out_dir=out_dir):
            _write_tokenizer_config(spec=spec, out_dir=out_dir)
        if weights == "trained" and not _has_trained_weights(out_dir) and not _take_shipped_weights(out_dir, spec):
            from runner.models.training import train_in_child

            train_in_child(model_dir=out_dir)
    return out_dir


def shipped_model_dir(spec: TinyModelSpec = TinyModelSpec()) -> Path | None:
    """The shipped trained folder where it was built from `spec` and trained by the code's recipe; else None."""
    try:
        built = json.loads((SHIPPED_DIR / "tiny_model_spec.json").read_text())
    except (OSError, ValueError):
        return None
    if built != asdict(spec) or not _has_trained_weights(SHIPPED_DIR):
        return None
    return SHIPPED_DIR


def _copy_folder(source: Path, out_dir: Path) -> None:
    """The shipped files into `out_dir`, which appears whole or not at all."""
    staging = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    try:
        for name in SHIPPED_FILES:
            shutil.copyfile(source / name, staging / name)
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _take_shipped_weights(out_dir: Path, spec: TinyModelSpec) -> bool:
    """The shipped weights into a cached folder built here, where its tokenizer is the shipped one (the weights
    index its vocabulary: a tokenizer trained on another Python's standard library numbers tokens otherwise)."""
    shipped = shipped_model_dir(spec)
    if shipped is None or (out_dir / "tokenizer.json").read_bytes() != (shipped / "tokenizer.json").read_bytes():
        return False
    for name in (WEIGHTS_FILE, REPORT_FILE):  # the report last: it marks the weights current
        tmp = out_dir / f".{name}.tmp"
        shutil.copyfile(shipped / name, tmp)
        os.replace(tmp, out_dir / name)
    return True


def tiny_model_ready(*, cache_dir: Path | None = None, spec: TinyModelSpec = TinyModelSpec(),
                     weights: str = "trained") -> bool:
    """Whether `ensure_tiny_model` would return at once (nothing to build or train)."""
    out_dir = tiny_model_dir(cache_dir=cache_dir, spec=spec)
    return ((out_dir / "config.json").exists() and _tokenizer_config_current(spec=spec, out_dir=out_dir)
            and (weights == "dummy" or _has_trained_weights(out_dir)))


def _has_trained_weights(model_dir: Path) -> bool:
    from runner.models.training import weights_are_current

    return weights_are_current(model_dir=model_dir)


def heldout_text() -> str:
    """All held-out files, concatenated in name order."""
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in heldout_files())


def heldout_texts(*, count: int = 64, chars: int = 2000) -> list[str]:
    """`count` text slices of `chars` characters from the held-out files, evenly spread, the same everywhere."""
    text = heldout_text()
    if count * chars > len(text):
        raise ValueError(f"held-out text has {len(text)} characters, fewer than {count} x {chars}")
    stride = (len(text) - chars) // max(count - 1, 1)
    return [text[i * stride: i * stride + chars] for i in range(count)]


def heldout_prompt_token_ids(*, count: int, length: int, model_dir: Path | None = None) -> list[list[int]]:
    """`count` prompts of exactly `length` token ids cut from held-out text (never trained on).

    `model_dir` defaults to the embedded model (tokenizer only: no training needed).
    """
    model_dir = Path(model_dir) if model_dir else ensure_tiny_model(weights="dummy")
    tokenizer = load_tokenizer(model_dir)
    stream = tokenizer.encode(heldout_text()).ids
    if count * length > len(stream):
        raise ValueError(f"held-out text has {len(stream)} tokens, fewer than {count} x {length} "
                         "(fix: fewer requests or a shorter input_len)")
    stride = (len(stream) - length) // max(count - 1, 1)
    return [stream[i * stride: i * stride + length] for i in range(count)]


if __name__ == "__main__":
    print(ensure_tiny_model())
