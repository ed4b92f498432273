"""MTP acceptance of the embedded trained model in vLLM (CPU), on held-out prompts, per k.

    python -m runner.models.measure_acceptance                 # k = 1 2 3, 8 prompts
    python -m runner.models.measure_acceptance --k 1 --prompts 4 --output-len 48

Each k runs in its own process (one engine per process). Greedy decoding is run twice
in the same engine to check that temperature-0 output is deterministic.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass


@dataclass(kw_only=True)
class AcceptanceResult:
    k: int
    drafts: int
    draft_tokens: int
    accepted_tokens: int
    acceptance_rate: float
    mean_acceptance_length: float
    per_position_rate: list[float]
    deterministic: bool
    output_token_ids: list[list[int]]


def _counter(metrics, name: str):
    from runner.vllm.metrics import read_metrics

    for _, metric_name, value in read_metrics(metrics):
        if metric_name == name:
            return value
    return 0


def measure_one(*, k: int, prompts: int, input_len: int, output_len: int, model_dir: str | None = None) -> AcceptanceResult:
    """Loads one engine (this process) and decodes the held-out prompts twice at temperature 0."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from runner.models.tiny import ensure_tiny_model, heldout_prompt_token_ids
    from runner.spec_arm import SpecArm
    from runner.vllm import engine as vllm_engine
    from runner.vllm import metrics as names
    from runner.vllm.spec_config import speculative_config

    model_dir = model_dir or str(ensure_tiny_model())
    token_prompts = heldout_prompt_token_ids(count=prompts, length=input_len, model_dir=model_dir)
    llm = vllm_engine.start_offline(dict(model=model_dir, max_model_len=1024, enforce_eager=True, max_num_seqs=8,
                                         seed=0, disable_log_stats=False, enable_prefix_caching=False,
                                         speculative_config=speculative_config(SpecArm(method="mtp", k=k))))
    try:
        params = vllm_engine.sampling_params(stream=False, temperature=0.0, max_tokens=output_len, ignore_eos=True)
        inputs = [{"prompt_token_ids": p} for p in token_prompts]
        first = [list(o.outputs[0].token_ids) for o in llm.generate(inputs, params, use_tqdm=False)]
        metrics = llm.get_metrics()
        second = [list(o.outputs[0].token_ids) for o in llm.generate(inputs, params, use_tqdm=False)]
    finally:
        vllm_engine.shutdown_offline(llm)
    drafts = int(_counter(metrics, names.SPEC_DRAFTS))
    draft_tokens = int(_counter(metrics, names.SPEC_DRAFT_TOKENS))
    accepted = int(_counter(metrics, names.SPEC_ACCEPTED))
    per_pos = _counter(metrics, names.SPEC_PER_POS) or []
    return AcceptanceResult(
        k=k, drafts=drafts, draft_tokens=draft_tokens, accepted_tokens=accepted,
        acceptance_rate=accepted / draft_tokens if draft_tokens else 0.0,
        mean_acceptance_length=1 + accepted / drafts if drafts else 1.0,
        per_position_rate=[round(v / drafts, 4) for v in per_pos] if drafts else [],
        deterministic=first == second, output_token_ids=first,
    )


def measure_in_subprocess(*, k: int, prompts: int, input_len: int, output_len: int, timeout: int = 900) -> AcceptanceResult:
    cmd = [sys.executable, "-m", "runner.models.measure_acceptance", "--one", "--k", str(k),
           "--prompts", str(prompts), "--input-len", str(input_len), "--output-len", str(output_len)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    line = [x for x in proc.stdout.splitlines() if x.startswith("{")][-1]
    return AcceptanceResult(**json.loads(line))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        result = measure_one(k=args.k[0], prompts=args.prompts, input_len=args.input_len, output_len=args.output_len)
        print(json.dumps(asdict(result)))
        return
    from runner.models.tiny import ensure_tiny_model

    ensure_tiny_model()  # train once here, not in each child
    outputs = {}
    for k in args.k:
        r = measure_in_subprocess(k=k, prompts=args.prompts, input_len=args.input_len, output_len=args.output_len)
        outputs[k] = r.output_token_ids
        print(f"k={k}: acceptance {r.acceptance_rate:.3f} ({r.accepted_tokens}/{r.draft_tokens} draft tokens), "
              f"mean acceptance length {r.mean_acceptance_length:.2f}, per position {r.per_position_rate}, "
              f"deterministic at temperature 0: {r.deterministic}", flush=True)
    same = len({json.dumps(v) for v in outputs.values()}) == 1
    print(f"greedy outputs identical across k: {same}")


if __name__ == "__main__":
    main()
