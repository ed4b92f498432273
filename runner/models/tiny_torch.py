"""The tiny MiMo model (Qwen2 body + MTP layers) in plain PyTorch, for training.

Module names equal the checkpoint names vLLM's MiMo and MiMo-MTP loaders read
(`model.layers.N.self_attn.q_proj.weight`, `model.mtp_layers.0.input_proj.weight`,
...), so `state_dict()` is the checkpoint. The maths follow vLLM's forward
(`vllm/model_executor/models/{qwen2,mimo,mimo_mtp}.py`): a mismatch here would
not fail loudly, it would only lower the acceptance rate.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True, kw_only=True)
class Shape:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    num_nextn_predict_layers: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_config(cls, config: dict) -> "Shape":
        names = [f for f in cls.__dataclass_fields__ if f in config]
        return cls(**{n: config[n] for n in names})


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_tables(*, positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin for vLLM's default (neox-style, rotate-half) rotary embedding."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device) / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, shape: Shape):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = shape.num_attention_heads, shape.num_key_value_heads, shape.head_dim
        h = shape.hidden_size
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False)

    def qkv(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rope(q, *rope), apply_rope(k, *rope), v

    def attend(self, q, k, v, *, mask: torch.Tensor | None) -> torch.Tensor:
        """`mask=None` is plain causal attention; else a boolean [Tq, Tk] (True = may attend)."""
        b, _, t, _ = q.shape
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=self.heads != self.kv_heads
        )
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, shape: Shape):
        super().__init__()
        self.gate_proj = nn.Linear(shape.hidden_size, shape.intermediate_size, bias=False)
        self.up_proj = nn.Linear(shape.hidden_size, shape.intermediate_size, bias=False)
        self.down_proj = nn.Linear(shape.intermediate_size, shape.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Qwen2 pre-norm block; returns the residual stream (vLLM's `hidden + residual`)."""

    def __init__(self, shape: Shape):
        super().__init__()
        self.self_attn = Attention(shape)
        self.mlp = MLP(shape)
        self.input_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)

    def forward(self, x: torch.Tensor, rope) -> torch.Tensor:
        q, k, v = self.self_attn.qkv(self.input_layernorm(x), rope)
        x = x + self.self_attn.attend(q, k, v, mask=None)
        return x + self.mlp(self.post_attention_layernorm(x))


class MTPLayer(DecoderLayer):
    """vLLM's `MiMoMultiTokenPredictorLayer`; the checkpoint stores its block flat (no `mtp_block.`).

    Input at position i: the body's pre-norm hidden state h_i and the embedding of
    token i+1 (zeroed at position 0, as vLLM does); output predicts token i+2.
    """

    def __init__(self, shape: Shape):
        super().__init__(shape)
        h = shape.hidden_size
        self.token_layernorm = RMSNorm(h, shape.rms_norm_eps)
        self.hidden_layernorm = RMSNorm(h, shape.rms_norm_eps)
        self.input_proj = nn.Linear(2 * h, h, bias=False)
        self.final_layernorm = RMSNorm(h, shape.rms_norm_eps)

    def project(self, *, hidden: torch.Tensor, embeds: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        embeds = torch.where(positions[None, :, None] == 0, torch.zeros_like(embeds), embeds)
        return self.input_proj(torch.cat([self.hidden_layernorm(hidden), self.token_layernorm(embeds)], dim=-1))

    def draft_steps(self, *, hidden: torch.Tensor, next_embeds: torch.Tensor, positions: torch.Tensor, rope,
                    steps: int) -> list[torch.Tensor]:
        """Runs draft steps 0..steps-1 as vLLM's proposer does; returns each step's final-normed output.

        Every step's query at position i reads the embedding of token i+1 and predicts
        token i+2; step 0 reads the body's h_i, step s>0 the previous step's output at
        i-1 (vLLM feeds each step's output state forward). Its attention sees what the
        drafter's KV cache holds then: step-0 keys at positions <= i-s (from the pass
        over verified tokens) and step-j keys at position i-s+j, 1 <= j <= s.
        Outputs of step s are meaningful at positions i >= s only.
        """
        keys, values, outs = [], [], []
        for s in range(steps):
            x = self.project(hidden=hidden, embeds=next_embeds, positions=positions)
            q, k, v = self.self_attn.qkv(self.input_layernorm(x), rope)
            keys.append(k)
            values.append(v)
            mask = None if s == 0 else chain_mask(step=s, length=positions.shape[0], device=x.device)
            x = x + self.self_attn.attend(q, torch.cat(keys, dim=2), torch.cat(values, dim=2), mask=mask)
            x = x + self.mlp(self.post_attention_layernorm(x))
            outs.append(self.final_layernorm(x))
            hidden = _shift_right(outs[-1], 1)
        return outs


def chain_mask(*, step: int, length: int, device) -> torch.Tensor:
    """Boolean [length, (step+1)*length]: the keys (step j, position p) step `step`'s query i sees."""
    i = torch.arange(length, device=device)[:, None]
    p = torch.arange(length, device=device)[None, :]
    blocks = [p <= i - step] + [p == i - step + j for j in range(1, step + 1)]
    return torch.cat(blocks, dim=1)


class Body(nn.Module):
    def __init__(self, shape: Shape):
        super().__init__()
        self.embed_tokens = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(shape) for _ in range(shape.num_hidden_layers))
        self.norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.mtp_layers = nn.ModuleList(MTPLayer(shape) for _ in range(shape.num_nextn_predict_layers))


class TinyMiMo(nn.Module):
    def __init__(self, shape: Shape):
        super().__init__()
        self.shape = shape
        self.model = Body(shape)
        self.lm_head = nn.Linear(shape.hidden_size, shape.vocab_size, bias=False)
        self.apply(_init_weights)

    def rope(self, length: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(length, device=device)
        return rope_tables(positions=positions, head_dim=self.shape.head_dim, theta=self.shape.rope_theta)

    def body_hidden(self, tokens: torch.Tensor, rope) -> torch.Tensor:
        """The pre-norm hidden states vLLM's MiMoModel returns (and hands to the MTP layer)."""
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x, rope)
        return x

    def losses(self, tokens: torch.Tensor, *, mtp_steps: int) -> list[torch.Tensor]:
        """[next-token loss, MTP loss of draft step 0, of step 1, ...] on a [B, T] batch."""
        t = tokens.shape[1]
        rope = self.rope(t, tokens.device)
        positions = torch.arange(t, device=tokens.device)
        hidden = self.body_hidden(tokens, rope)
        # Slice before the head: the gradient of a slice of the [B, T, vocab] logits costs a full-size fill.
        logits = self.lm_head(self.model.norm(hidden[:, :-1]))
        losses = [F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())]
        if not mtp_steps:
            return losses
        mtp = self.model.mtp_layers[0]
        next_embeds = _shift_left(self.model.embed_tokens(tokens), 1)
        outs = mtp.draft_steps(hidden=hidden, next_embeds=next_embeds, positions=positions, rope=rope,
                               steps=mtp_steps)
        for s, out in enumerate(outs):
            step_logits = self.lm_head(out[:, s: t - 2])
            losses.append(F.cross_entropy(step_logits.flatten(0, 1), tokens[:, s + 2:].flatten()))
        return losses


def _shift_left(x: torch.Tensor, n: int) -> torch.Tensor:
    """x[:, i] <- x[:, i+n], zero-padded at the end."""
    return torch.cat([x[:, n:], torch.zeros_like(x[:, :n])], dim=1)


def _shift_right(x: torch.Tensor, n: int) -> torch.Tensor:
    """x[:, i] <- x[:, i-n], zero-padded at the start."""
    return torch.cat([torch.zeros_like(x[:, :n]), x[:, :-n]], dim=1)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
