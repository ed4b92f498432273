"""Trains the embedded tiny model (Qwen2 body + its MTP layer) on CPU, deterministically.

`runner.models.tiny.ensure_tiny_model` calls this on first use (in a child process: `train_in_child`);
`python -m runner.models.train` is the CLI.
Corpus: the standard library's sources minus the held-out files (see `runner.models.corpus`).
Losses: next token for the body, token i+2 for the MTP layer at draft step 0 and, with
`mtp_steps` > 1, at the later draft steps as vLLM chains them (the layer is reused for k > 1).
Writes `model.safetensors` (the checkpoint names vLLM's MiMo loaders read) and
`train_report.json` (recipe, losses, seconds) into the model folder.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

WEIGHTS_FILE = "model.safetensors"
REPORT_FILE = "train_report.json"


@dataclass(frozen=True, kw_only=True)
class TrainRecipe:
    """Sized for about three minutes on two otherwise idle cores."""

    seed: int = 0
    steps: int = 140
    batch_size: int = 8
    seq_len: int = 256
    lr: float = 3e-3
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    # Draft steps trained: 1 = token i+2 from the body's state only; 2 also trains vLLM's reuse of
    # the layer at k >= 2. 2 costs ~30% more and did not raise acceptance in a trial: 1.
    mtp_steps: int = 1
    mtp_loss_weight: float = 1.0
    threads: int = 2  # fixed, so that results do not depend on the machine's core count
    eval_batches: int = 4
    version: int = 1  # bump when the training code changes what it produces

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]


def weights_are_current(*, model_dir: Path, recipe: TrainRecipe = TrainRecipe()) -> bool:
    report = Path(model_dir) / REPORT_FILE
    if not (Path(model_dir) / WEIGHTS_FILE).exists() or not report.exists():
        return False
    return json.loads(report.read_text()).get("recipe_fingerprint") == recipe.fingerprint()


def token_stream(*, model_dir: Path, files: list[Path]):
    """One long int64 tensor: the files' tokens, each file followed by end-of-text."""
    import torch

    from runner.models.corpus import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    eos = tokenizer.token_to_id("<|endoftext|>")
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    ids: list[int] = []
    for encoding in tokenizer.encode_batch(texts):
        ids.extend(encoding.ids)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.long)


def sample_batch(*, stream, batch_size: int, seq_len: int, generator):
    import torch

    starts = torch.randint(0, stream.numel() - seq_len, (batch_size,), generator=generator)
    return torch.stack([stream[s: s + seq_len] for s in starts.tolist()])


def lr_at(*, step: int, recipe: TrainRecipe) -> float:
    if step < recipe.warmup_steps:
        return recipe.lr * (step + 1) / recipe.warmup_steps
    progress = (step - recipe.warmup_steps) / max(recipe.steps - recipe.warmup_steps, 1)
    floor = recipe.lr * recipe.min_lr_ratio
    return floor + (recipe.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def evaluate(*, model, stream, recipe: TrainRecipe) -> list[float]:
    """Mean losses on fixed windows of held-out text: [body, mtp step 0, ...]."""
    import torch

    generator = torch.Generator().manual_seed(recipe.seed + 1)
    totals = None
    with torch.no_grad():
        for _ in range(recipe.eval_batches):
            batch = sample_batch(stream=stream, batch_size=recipe.batch_size, seq_len=recipe.seq_len,
                                 generator=generator)
            losses = [loss.item() for loss in model.losses(batch, mtp_steps=recipe.mtp_steps)]
            totals = losses if totals is None else [a + b for a, b in zip(totals, losses)]
    return [round(t / recipe.eval_batches, 4) for t in totals]


def train(*, model_dir: Path, recipe: TrainRecipe = TrainRecipe(), log=print):
    """Returns (model, report); deterministic for a given recipe, corpus and thread count."""
    import torch

    from runner.models.corpus import corpus_files, heldout_files
    from runner.models.tiny_torch import Shape, TinyMiMo

    started = time.perf_counter()
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    config = json.loads((Path(model_dir) / "config.json").read_text())
    spec = json.loads((Path(model_dir) / "tiny_model_spec.json").read_text())
    train_stream = token_stream(model_dir=model_dir, files=corpus_files(max_bytes=spec["corpus_bytes"]))
    eval_stream = token_stream(model_dir=model_dir, files=heldout_files())
    model = TinyMiMo(Shape.from_config(config))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=recipe.lr, betas=(0.9, 0.95),
    )
    generator = torch.Generator().manual_seed(recipe.seed)
    log(f"training tiny MTP model: {sum(p.numel() for p in model.parameters()):,} parameters, "
        f"{train_stream.numel():,} corpus tokens, {recipe.steps} steps x {recipe.batch_size * recipe.seq_len} tokens")
    history = []
    for step in range(recipe.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step=step, recipe=recipe)
        batch = sample_batch(stream=train_stream, batch_size=recipe.batch_size, seq_len=recipe.seq_len,
                             generator=generator)
        losses = model.losses(batch, mtp_steps=recipe.mtp_steps)
        total = losses[0] + recipe.mtp_loss_weight * sum(losses[1:])
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
        if step % 25 == 0 or step == recipe.steps - 1:
            values = [round(loss.item(), 4) for loss in losses]
            history.append({"step": step, "losses": values, "seconds": round(time.perf_counter() - started, 1)})
            log(f"  step {step:4d}  body {values[0]:.3f}  mtp {' '.join(f'{v:.3f}' for v in values[1:])}"
                f"  ({time.perf_counter() - started:.0f} s)")
    model.eval()
    heldout = evaluate(model=model, stream=eval_stream, recipe=recipe)
    report = {
        "recipe": asdict(recipe),
        "recipe_fingerprint": recipe.fingerprint(),
        "train_seconds": round(time.perf_counter() - started, 1),
        "train_tokens": recipe.steps * recipe.batch_size * recipe.seq_len,
        "final_train_losses": history[-1]["losses"],
        "heldout_losses": heldout,
        "loss_names": ["body_next_token"] + [f"mtp_step{s}" for s in range(recipe.mtp_steps)],
        "history": history,
        "torch_threads": recipe.threads,
    }
    log(f"done in {report['train_seconds']} s; held-out losses {heldout}")
    return model, report


def checkpoint_tensors(model) -> dict:
    """The state dict as the safetensors file stores it (contiguous, float32)."""
    return {name: t.detach().float().contiguous() for name, t in model.state_dict().items()}


def save_checkpoint(*, model, report: dict, model_dir: Path) -> Path:
    """Writes weights then report, each atomically; the report marks the weights current."""
    from safetensors.torch import save_file

    model_dir = Path(model_dir)
    fd, tmp = tempfile.mkstemp(prefix=".model.", suffix=".tmp", dir=model_dir)
    os.close(fd)
    try:
        save_file(checkpoint_tensors(model), tmp, metadata={"format": "pt"})
        os.replace(tmp, model_dir / WEIGHTS_FILE)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    report_tmp = model_dir / f".{REPORT_FILE}.tmp"
    report_tmp.write_text(json.dumps(report, indent=2))
    os.replace(report_tmp, model_dir / REPORT_FILE)
    return model_dir / WEIGHTS_FILE


def train_into(*, model_dir: Path, recipe: TrainRecipe = TrainRecipe()) -> Path:
    (Path(model_dir) / REPORT_FILE).unlink(missing_ok=True)
    model, report = train(model_dir=model_dir, recipe=recipe)
    return save_checkpoint(model=model, report=report, model_dir=model_dir)


# OpenMP's threads spin while they wait for each other (libgomp's default). Where other work keeps the cores busy,
# a spinning thread keeps its sibling off the core: the training's two threads then ran a step 4.6x slower than
# with passive waiting, at 4.8x the CPU time, and the same arithmetic. OpenMP reads the policy once, when it starts
# in a process, so the training runs in a child of its own: the command's other processes (the engines) keep
# their own setting.
TRAINING_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}


def train_in_child(*, model_dir: Path) -> Path:
    """`train_into` in a child process with TRAINING_ENV; its lines go to this process's terminal."""
    subprocess.run([sys.executable, "-m", "runner.models.training", str(model_dir)],
                   env={**os.environ, **TRAINING_ENV}, check=True)
    return Path(model_dir) / WEIGHTS_FILE


if __name__ == "__main__":  # the child of train_in_child: the folder's lock is its parent's
    train_into(model_dir=Path(sys.argv[1]))

