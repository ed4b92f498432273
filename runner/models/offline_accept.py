"""Acceptance as PyTorch predicts it, without vLLM: greedy-decode with the body and count
how often the MTP layer's draft for token i+2 equals the body's greedy token i+2 (k=1).

Compared with what vLLM reports (`python -m runner.models.measure_acceptance`), it checks
that the training-time MTP forward matches vLLM's.
"""
from __future__ import annotations

from pathlib import Path


def load_trained(model_dir: Path):
    import json

    from safetensors.torch import load_file

    from runner.models.tiny_torch import Shape, TinyMiMo

    config = json.loads((Path(model_dir) / "config.json").read_text())
    model = TinyMiMo(Shape.from_config(config))
    model.load_state_dict(load_file(str(Path(model_dir) / "model.safetensors")))
    return model.eval()


def greedy_with_drafts(*, model, prompt: list[int], new_tokens: int) -> tuple[list[int], float]:
    """Greedy continuation of `prompt` and the share of k=1 MTP drafts that match it."""
    import torch

    tokens = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            x = torch.tensor([tokens])
            rope = model.rope(len(tokens), x.device)
            hidden = model.body_hidden(x, rope)
            tokens.append(int(model.lm_head(model.model.norm(hidden[:, -1])).argmax(-1)))
        x = torch.tensor([tokens])
        t = len(tokens)
        rope = model.rope(t, x.device)
        hidden = model.body_hidden(x, rope)
        nxt = torch.cat([model.model.embed_tokens(x[:, 1:]), torch.zeros_like(hidden[:, :1])], dim=1)
        out = model.model.mtp_layers[0].draft_steps(hidden=hidden, next_embeds=nxt,
                                                    positions=torch.arange(t), rope=rope, steps=1)[0]
        drafts = model.lm_head(out).argmax(-1)[0]
    # The draft made at position i (after token i+1 is known) guesses token i+2; score generated ones only.
    first = len(prompt) - 1
    hits = [int(drafts[i]) == tokens[i + 2] for i in range(first, t - 2)]
    return tokens[len(prompt):], sum(hits) / len(hits)


def offline_acceptance(*, model_dir: Path, prompts: list[list[int]], new_tokens: int = 48) -> float:
    model = load_trained(model_dir)
    rates = [greedy_with_drafts(model=model, prompt=p, new_tokens=new_tokens)[1] for p in prompts]
    return sum(rates) / len(rates)


if __name__ == "__main__":
    from runner.models.tiny import ensure_tiny_model, heldout_prompt_token_ids

    directory = ensure_tiny_model()
    print(f"offline k=1 acceptance: {offline_acceptance(model_dir=directory, prompts=heldout_prompt_token_ids(count=8, length=64, model_dir=directory)):.3f}")
