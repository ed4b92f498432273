"""A MiMo-7B-shaped model folder (Qwen2 body + 1 MTP layer, 32K vocabulary) for `load_format: dummy`.

Real shapes give real speed and memory on a GPU without downloading weights:
    python -m runner.models.mimo7b .cache/models/mimo-7b-dummy
"""
from __future__ import annotations

import sys
from pathlib import Path

from runner.models.tiny import TinyModelSpec, build_tiny_model

MIMO_7B = TinyModelSpec(
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=11008,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    max_position_embeddings=32768,
    num_nextn_predict_layers=1,
    corpus_bytes=16_000_000,
)


def ensure_mimo7b(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    if not (out_dir / "config.json").exists():
        build_tiny_model(out_dir=out_dir, spec=MIMO_7B)
    return out_dir


if __name__ == "__main__":
    print(ensure_mimo7b(Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/models/mimo-7b-dummy")))
