"""The embedded tiny MTP model: checkpoint names, held-out split, training maths. Its real engine is in
tests/engine/test_tiny_model_engine.py."""
from __future__ import annotations

from runner.models.corpus import corpus_files, heldout_files
from runner.models.tiny import TinyModelSpec, heldout_texts, model_config


def _expected_checkpoint_names(spec: TinyModelSpec) -> set[str]:
    """What vLLM's MiMoForCausalLM (Qwen2 names) and MiMoMTP (`model.mtp_layers.N.*`, block flat) read."""
    block = [f"self_attn.{p}_proj.{w}" for p in "qkv" for w in ("weight", "bias")] + [
        "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
        "input_layernorm.weight", "post_attention_layernorm.weight"]
    names = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    names |= {f"model.layers.{i}.{b}" for i in range(spec.num_hidden_layers) for b in block}
    mtp = block + ["token_layernorm.weight", "hidden_layernorm.weight", "input_proj.weight", "final_layernorm.weight"]
    names |= {f"model.mtp_layers.{i}.{b}" for i in range(spec.num_nextn_predict_layers) for b in mtp}
    return names


def _torch_model(spec: TinyModelSpec):
    from runner.models.tiny_torch import Shape, TinyMiMo

    return TinyMiMo(Shape.from_config(model_config(spec=spec, eos_token_id=0)))


def test_checkpoint_names_are_what_vllm_mimo_loaders_read():
    from vllm.model_executor.models.mimo import MiMoForCausalLM

    from runner.models.training import checkpoint_tensors

    spec = TinyModelSpec()
    tensors = checkpoint_tensors(_torch_model(spec))
    assert set(tensors) == _expected_checkpoint_names(spec)
    # The main model's own mapper drops exactly the MTP layers (the drafter loads those).
    kept = {n for n in tensors if MiMoForCausalLM.hf_to_vllm_mapper.map_name(n) is not None}
    assert kept == {n for n in tensors if not n.startswith("model.mtp_layers.")}
    h, head = spec.hidden_size, spec.hidden_size // spec.num_attention_heads
    assert tensors["model.mtp_layers.0.input_proj.weight"].shape == (h, 2 * h)
    assert tensors["model.layers.0.self_attn.k_proj.weight"].shape == (spec.num_key_value_heads * head, h)
    assert head == 64


def test_heldout_files_are_not_in_the_training_corpus():
    held = set(heldout_files())
    train = set(corpus_files(max_bytes=TinyModelSpec().corpus_bytes))
    assert held and train and not held & train
    texts = heldout_texts(count=8, chars=500)
    assert len(texts) == 8 and all(len(t) == 500 for t in texts)
    assert texts == heldout_texts(count=8, chars=500)


def test_mtp_chain_mask_matches_the_drafter_kv_cache():
    from runner.models.tiny_torch import chain_mask

    mask = chain_mask(step=2, length=6, device="cpu")
    # Step 2's query at position 5: step-0 keys at positions <= 3, step-1 key at 4, its own key at 5.
    row = mask[5].view(3, 6)
    assert row[0].tolist() == [True, True, True, True, False, False]
    assert row[1].tolist() == [False, False, False, False, True, False]
    assert row[2].tolist() == [False, False, False, False, False, True]


def test_training_is_deterministic_under_a_seed(tmp_path):
    import torch

    from runner.models.tiny import build_tiny_model
    from runner.models.training import TrainRecipe, checkpoint_tensors, train

    spec = TinyModelSpec(hidden_size=128, num_attention_heads=2, num_key_value_heads=1, intermediate_size=128,
                         vocab_size=512, corpus_bytes=200_000)
    model_dir = build_tiny_model(out_dir=tmp_path / "m", spec=spec)
    recipe = TrainRecipe(steps=2, batch_size=2, seq_len=32, warmup_steps=1, eval_batches=1)
    runs = [train(model_dir=model_dir, recipe=recipe, log=lambda *_: None) for _ in range(2)]
    a, b = (checkpoint_tensors(model) for model, _ in runs)
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert runs[0][1]["heldout_losses"] == runs[1][1]["heldout_losses"]
    assert len(runs[0][1]["heldout_losses"]) == 1 + recipe.mtp_steps


def test_the_shipped_model_is_the_codes():
    """A change to the model's spec, its tokenizer config or the training recipe leaves the shipped copy behind: a
    first use would then train for minutes. Fix: python -m runner.models.train --force --ship, and commit it."""
    import json

    from runner.models.tiny import SHIPPED_DIR, SHIPPED_FILES, shipped_model_dir, tokenizer_config

    assert shipped_model_dir(TinyModelSpec()) == SHIPPED_DIR, "fix: python -m runner.models.train --force --ship"
    assert json.loads((SHIPPED_DIR / "tokenizer_config.json").read_text()) == tokenizer_config(TinyModelSpec())
    assert all((SHIPPED_DIR / name).is_file() for name in SHIPPED_FILES)


def _no_training(monkeypatch):
    import runner.models.training as training

    def refuse(**_):
        raise AssertionError("trained where the shipped weights serve")
    monkeypatch.setattr(training, "train_in_child", refuse)


def test_a_first_use_copies_the_shipped_model_and_trains_nothing(tmp_path, monkeypatch):
    from runner.models.tiny import SHIPPED_DIR, ensure_tiny_model, tiny_model_ready

    _no_training(monkeypatch)
    folder = ensure_tiny_model(cache_dir=tmp_path)
    assert tiny_model_ready(cache_dir=tmp_path)
    assert (folder / "model.safetensors").read_bytes() == (SHIPPED_DIR / "model.safetensors").read_bytes()
    assert [p.name for p in tmp_path.joinpath("models").iterdir() if not p.name.startswith(".")] == [folder.name]


def test_a_folder_built_here_takes_the_shipped_weights_only_with_the_shipped_tokenizer(tmp_path, monkeypatch):
    import shutil

    import runner.models.training as training
    from runner.models.tiny import SHIPPED_DIR, ensure_tiny_model, tiny_model_dir

    folder = tiny_model_dir(cache_dir=tmp_path)
    folder.mkdir(parents=True)
    for name in ("config.json", "generation_config.json", "tiny_model_spec.json", "tokenizer.json"):
        shutil.copyfile(SHIPPED_DIR / name, folder / name)
    _no_training(monkeypatch)
    ensure_tiny_model(cache_dir=tmp_path)  # the same tokenizer: the shipped weights
    assert training.weights_are_current(model_dir=folder)

    (folder / "model.safetensors").unlink()
    (folder / "tokenizer.json").write_text((SHIPPED_DIR / "tokenizer.json").read_text().replace('"<|im_end|>"',
                                                                                                 '"<|im_stop|>"'))
    trained = []
    monkeypatch.setattr(training, "train_in_child", lambda *, model_dir: trained.append(model_dir))
    ensure_tiny_model(cache_dir=tmp_path)  # another tokenizer: trains its own
    assert trained == [folder]
