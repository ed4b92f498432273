"""A cached prompt's repeat TTFT after an engine's load against after its sleep and wake (one engine, in process).

    python bench/wake_ttft.py [--model mimo_7b] [--input-len 4096] [--pairs 12]

Each pair sends a new prompt cold, then the same prompt again with max_tokens=1: the figure is the second call's
wall (its TTFT plus the call's own overhead, the same in every phase). Phases, one engine with prefix caching:
`load` (after three warm pairs), then a level-1 sleep and wake (CUDA) before each of `wake` and `wake 2`, with
`wake, later` the pairs right after `wake`'s. Printed: each phase's median, range and ratio to `load` (> 1: slower),
the cold calls' too. On CPU there is no sleep mode: the phases run back to back (a check of the script).
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def model_folder(name: str) -> tuple[str, str]:
    """(folder, load_format) of the model the study uses."""
    if name == "mimo_7b":
        from runner.models.mimo7b import ensure_mimo7b

        return str(ensure_mimo7b(Path(".cache/models/mimo-7b-dummy"))), "dummy"
    from bench.common import tiny_model

    model = tiny_model()
    return model.path, model.load_format


def pair(llm, sampling, *, seed: int, input_len: int, vocab: int) -> tuple[float, float]:
    rng = random.Random(seed)
    prompt = {"prompt_token_ids": [rng.randrange(3, vocab) for _ in range(input_len)]}
    walls = []
    for _ in range(2):
        started = time.perf_counter()
        llm.generate([prompt], sampling, use_tqdm=False)
        walls.append(time.perf_counter() - started)
    return walls[0], walls[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mimo_7b", choices=["mimo_7b", "tiny"])
    ap.add_argument("--input-len", type=int, default=4096)
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--max-model-len", type=int, default=32768)
    ap.add_argument("--out", default=None, help="JSON file of every call's wall")
    args = ap.parse_args()

    import torch
    from vllm import LLM, SamplingParams

    cuda = torch.cuda.is_available()
    folder, load_format = model_folder(args.model)
    kwargs = dict(model=folder, tokenizer=folder, load_format=load_format, enable_prefix_caching=True, seed=0,
                  max_model_len=args.max_model_len)
    if cuda:
        kwargs.update(enable_sleep_mode=True, gpu_memory_utilization=0.9)
    llm = LLM(**kwargs)
    vocab = llm.llm_engine.vllm_config.model_config.get_vocab_size()
    sampling = SamplingParams(max_tokens=1, temperature=0, ignore_eos=True)
    seeds = iter(range(1_000_000))

    def run_pairs(n: int) -> list[tuple[float, float]]:
        return [pair(llm, sampling, seed=next(seeds), input_len=args.input_len, vocab=vocab) for _ in range(n)]

    def sleep_and_wake() -> float:
        if not cuda:
            return 0.0
        started = time.perf_counter()
        llm.sleep(level=1)
        llm.wake_up()
        llm.reset_prefix_cache()
        return time.perf_counter() - started

    run_pairs(3)
    phases = {"load": run_pairs(args.pairs)}
    switch = [sleep_and_wake()]
    phases["wake"] = run_pairs(args.pairs)
    phases["wake, later"] = run_pairs(args.pairs)
    switch.append(sleep_and_wake())
    phases["wake 2"] = run_pairs(args.pairs)

    base = statistics.median(r for _, r in phases["load"])
    base_cold = statistics.median(c for c, _ in phases["load"])
    print(f"{'cuda' if cuda else 'cpu'}, {args.model}, input_len={args.input_len}, {args.pairs} pairs a phase; "
          f"sleep+wake {', '.join(f'{s:.2f}' for s in switch)} s")
    print("phase          repeat p50 (ms)  range (ms)        ratio   cold p50 (ms)  ratio")
    for name, rows in phases.items():
        repeat, cold = [r for _, r in rows], [c for c, _ in rows]
        med, cmed = statistics.median(repeat), statistics.median(cold)
        print(f"{name:14s} {med * 1e3:15.1f}  {min(repeat) * 1e3:6.1f}–{max(repeat) * 1e3:<8.1f}  "
              f"{med / base:6.3f}   {cmed * 1e3:12.1f}  {cmed / base_cold:6.3f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "switch_s": switch,
                                              "phases": {k: v for k, v in phases.items()}}, indent=1))


if __name__ == "__main__":
    main()
