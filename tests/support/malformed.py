"""Malformed settings, each with what its refusal must say and the fix it must name. The unit tests check each
message through the functions the CLI calls (tests/unit/config/test_validate*.py); tests/cli/test_validate_refusals_cli.py runs every one
through `python -m runner` and checks that no traceback reaches the terminal."""
from __future__ import annotations

import json
from pathlib import Path

MALFORMED = [  # the config's own values, overrides, the model's limits
    # (overrides, what the message must say, the fix it must name)
    (["sweep.grid.spec_method=[off,medusa2]"], "unknown speculative method 'medusa2'", "fix: sweep.grid.spec_method="),
    (["sweep.grid.num_speculative_tokens=[0]"], "num_speculative_tokens=0 is outside 1..8", "fix: sweep.grid.num_speculative_tokens="),
    (["sweep.grid.num_speculative_tokens=[9]"], "num_speculative_tokens=9 is outside 1..8", "fix: sweep.grid.num_speculative_tokens="),
    (["sweep.grid.num_speculative_tokens=[1.5]"], "num_speculative_tokens=1.5", "fix: sweep.grid.num_speculative_tokens="),
    (["sweep.grid.concurrency=[0]"], "concurrency=0 must be an integer ≥ 1", "fix: sweep.grid.concurrency="),
    (["sweep.grid.concurrency=[4,-2]"], "concurrency=-2 must be an integer ≥ 1", "fix: sweep.grid.concurrency="),
    (["sweep.grid.gpu_memory_utilization=[0]"], "gpu_memory_utilization=0 is outside (0, 1]", "fix: sweep.grid.gpu_memory_utilization="),
    (["sweep.grid.gpu_memory_utilization=[1.5]"], "gpu_memory_utilization=1.5 is outside (0, 1]", "fix: sweep.grid.gpu_memory_utilization="),
    (["sweep.grid.max_model_len=[65536]"], "max_model_len=65536 is above the model's limit 32768", "fix: sweep.grid.max_model_len=[32768]"),
    (["model=hf", "model.path=/nonexistent/model-dir"], "model path '/nonexistent/model-dir' does not exist", "fix: model.path="),
    (["sweep.grid.max_model_len=[256]", "workload.decode.input_len=250"], "needs 314 tokens per sequence", "raise sweep.grid.max_model_len"),
    (["workload=[nope]"], "unknown workload 'nope'; valid: decode", "fix: workload=[decode]"),
    (["sweep.grid.concurrency=[]"], "grid axis 'concurrency' has no values", "fix: sweep.grid.concurrency=[...]"),
    (["sweep.grdi.concurrency=[1]"], "unknown config key 'sweep.grdi'", "fix: sweep.grid.concurrency=[1]"),
    (["engine.args.enforce_eagr=true"], "did you mean 'enforce_eager'", "fix: engine.args.enforce_eager=true"),
    (["execution.trial_timout_s=3"], "unknown config key 'execution.trial_timout_s'", "fix: execution.trial_timeout_s=3"),
    (["+engine.args.not_an_engine_arg=1"], "'not_an_engine_arg' is not a vLLM engine argument", "fix: remove or rename engine.args.not_an_engine_arg"),
    (["+sweep.engine_axes.kv_cache_dtyp=[auto]"], "'kv_cache_dtyp' is not a vLLM engine argument; did you mean 'kv_cache_dtype'", "fix: sweep.engine_axes.kv_cache_dtype="),
    (["+sweep.engine_axes.kv_cache_memory_bytes=[0]"], "kv_cache_memory_bytes=0 must be a positive integer", "fix: sweep.engine_axes.kv_cache_memory_bytes="),
    (["+sweep.grid.batch_size=[1]"], "unknown grid axis 'batch_size'", "fix: remove sweep.grid.batch_size"),
    (["sweep.grid.enable_prefix_caching=[maybe]"], "enable_prefix_caching='maybe' must be true or false", "fix: sweep.grid.enable_prefix_caching="),
    (["workload.decode.output_len=0"], "output_len=0 must be ≥ 1", "fix: workload.decode.output_len="),
    (["+workload.decode.outptu_len=5"], "has no parameter 'outptu_len'", "fix: remove or rename workload.decode.outptu_len"),
    (["execution.trial_timeout_s=0"], "execution.trial_timeout_s=0 must be a number of seconds > 0", "fix: execution.trial_timeout_s="),
    (["execution.max_trial_retries=-1"], "execution.max_trial_retries=-1 must be an integer ≥ 0", "fix: execution.max_trial_retries=1"),
    (["cluster.cpu_engine_slots=0"], "cluster.cpu_engine_slots=0 must be an integer ≥ 1", "fix: cluster.cpu_engine_slots=1"),
    (["cluster.address=nowhere"], "cluster.address='nowhere' must be auto or HOST:PORT", "fix: cluster.address="),
    (["engine.cpu_kvcache_space_gib=0.5"], "whole number of GiB", "sweep.engine_axes.kv_cache_memory_bytes"),
    (["sweep.repeats=0"], "sweep.repeats=0 must be an integer ≥ 1", "fix: sweep.repeats=1"),
    (["model=nope"], "unknown model option 'nope'; valid: hf, mimo_7b_dummy, tiny_mtp", "fix: model="),
    (["sweep.grid.concurrency=[1"], "cannot parse override 'sweep.grid.concurrency=[1'", "fix: key=value"),
    (["+workload.decode.concurrency=[0]"], "concurrency=0 must be an integer ≥ 1", "fix: ++workload.decode.concurrency="),
]

REFUSED = [  # engine arguments by vLLM's rules, keys the runner owns, sweep keys
    # (overrides, what the message must say, the fix it must name)
    # values, by the installed vLLM's parser types, choices and config bounds
    (["sweep.engine_axes={kv_cache_dtype:[auto,fp9]}"], "sweep.engine_axes.kv_cache_dtype=fp9 is not one of vLLM's values",
     "valid: auto, bfloat16"),
    (["sweep.engine_axes={kv_cache_dtype:[auto,fp9]}"], "sweep.engine_axes.kv_cache_dtype=fp9",
     "fix: sweep.engine_axes.kv_cache_dtype=[auto]"),
    (["engine.args.max_num_seqs=0"], "engine.args.max_num_seqs=0 must be ≥ 1", "fix: engine.args.max_num_seqs=1"),
    (["sweep.engine_axes={max_num_seqs:[8,-1]}"], "sweep.engine_axes.max_num_seqs=-1 must be ≥ 1",
     "fix: sweep.engine_axes.max_num_seqs=[1]"),
    (["engine.args.enforce_eager=maybe"], "engine.args.enforce_eager=maybe must be true or false",
     "fix: engine.args.enforce_eager=true"),
    (["engine.args.seed=abc"], "engine.args.seed=abc must be an integer", "fix: engine.args.seed=1"),
    (["+engine.args.dtype=float8"], "engine.args.dtype=float8 is not one of vLLM's values", "fix: engine.args.dtype=auto"),
    (["+engine.args.block_size=0"], "engine.args.block_size=0 must be > 0", "fix: engine.args.block_size=1"),
    (["+engine.args.compilation_config=5"], "engine.args.compilation_config=5 must be a dict",
     "fix: engine.args.compilation_config={key: value}"),
    (["sweep.engine_axes={kv_cache_dtyp:[auto]}"], "did you mean 'kv_cache_dtype'",
     "fix: sweep.engine_axes.kv_cache_dtype="),
    (["sweep.engine_axes={kv_cache_dtype:[]}"], "engine axis 'kv_cache_dtype' has no values",
     "fix: sweep.engine_axes.kv_cache_dtype=[...]"),
    # keys the runner owns: the row would say otherwise than the engine ran
    (["+engine.args.speculative_config={method:mtp,num_speculative_tokens:2}"],
     "engine.args.speculative_config is set by the runner", "fix: remove engine.args.speculative_config; use sweep.grid.spec_method=[mtp]"),
    (["sweep.engine_axes={speculative_config:[{method:ngram}]}"], "sweep.engine_axes.speculative_config is set by the runner",
     "use sweep.grid.spec_method=[ngram]"),
    (["+engine.args.model=/tmp/other"], "engine.args.model is set by the runner", "use model.path="),
    (["+engine.args.tokenizer=/tmp/tok"], "engine.args.tokenizer is set by the runner", "use model.tokenizer="),
    (["+engine.args.load_format=dummy"], "engine.args.load_format is set by the runner", "use model.load_format="),
    (["+engine.args.max_model_len=4096"], "engine.args.max_model_len is set by the runner",
     "use sweep.grid.max_model_len=[4096]"),
    (["+engine.args.gpu_memory_utilization=0.5"], "engine.args.gpu_memory_utilization is set by the runner",
     "use sweep.grid.gpu_memory_utilization=[0.5]"),
    (["sweep.engine_axes={enable_prefix_caching:[true,false]}"],
     "sweep.engine_axes.enable_prefix_caching is set by the runner", "use sweep.grid.enable_prefix_caching=[true,false]"),
    (["+engine.args.tensor_parallel_size=2"], "engine.args.tensor_parallel_size is set by the runner",
     "use engine.tensor_parallel_size=2"),
    (["+engine.args.spec_method=mtp"], "engine.args.spec_method is set by the runner", "use sweep.grid.spec_method=[mtp]"),
    (["+engine.args.spec_tokens=2"], "engine.args.spec_tokens is set by the runner",
     "use sweep.grid.num_speculative_tokens=[2]"),
    (["+spec.mtp.num_speculative_tokens=3"], "spec.mtp.num_speculative_tokens is set by the runner per arm",
     "fix: remove spec.mtp.num_speculative_tokens"),
    (["+spec.ngram.method=mtp"], "spec.ngram.method is set by the runner per arm", "fix: remove spec.ngram.method"),
    # methods whose required inputs are missing
    (["sweep.grid.spec_method=[off,eagle]"], "speculative method 'eagle' needs its draft model",
     "fix: +spec.eagle.model=<path to the eagle draft model>"),
    (["sweep.grid.spec_method=[eagle3]"], "speculative method 'eagle3' needs its draft model", "fix: +spec.eagle3.model="),
    (["sweep.arms=[{spec_method:draft_model,num_speculative_tokens:2}]"],
     "speculative method 'draft_model' needs its draft model", "fix: +spec.draft_model.model="),
    # sweep-level keys, by type
    (["sweep.arms=5"], "sweep.arms=5 must be a list", "fix: sweep.arms=[{spec_method:off}"),
    (["sweep.engine_axes=[kv_cache_dtype]"], "must be a dict of engine argument", "fix: sweep.engine_axes={kv_cache_dtype:"),
    (["sweep.engine_axes={kv_cache_dtype:{a:1}}"], "sweep.engine_axes.kv_cache_dtype must be a list of values",
     "fix: sweep.engine_axes={kv_cache_dtype:[<value>,<value>]}"),
    (["sweep.race=maybe"], "sweep.race='maybe' must be true or false", "fix: sweep.race=false"),
    (["sweep.repeats=abc"], "sweep.repeats='abc' must be an integer ≥ 1", "fix: sweep.repeats=1"),
    (["sweep.arms=[{spec_method:mtp,kv_cache_dtype:fp8}]"], "names 'kv_cache_dtype', not an engine axis",
     "fix: remove it from sweep.arms[0]"),
    (["sweep.engine_axes.kv_cache_dtype=[auto,fp8]"], "sweep.engine_axes is empty",
     "fix: sweep.engine_axes={kv_cache_dtype:[auto,fp8]}, or +sweep.engine_axes.kv_cache_dtype=[auto,fp8]"),
    (["+engine.args.speculative_config={method:ngram,num_speculative_tokens:3,prompt_lookup_max:4}"],
     "engine.args.speculative_config is set by the runner",
     "use sweep.grid.spec_method=[ngram] sweep.grid.num_speculative_tokens=[3] ++spec.ngram.prompt_lookup_max=4"),
]

# Settings that reach vLLM, checked by its rules; names that become paths; addresses. `{inputs}` is the folder
# write_inputs() filled (model folders, prompt files).
INPUTS = [
    # spec.<method> extras, by the installed vLLM's speculative_config fields and its n-gram rule
    (["spec.ngram.prompt_lookup_max=-1"], "spec.ngram.prompt_lookup_max=-1 must be ≥ 1",
     "fix: ++spec.ngram.prompt_lookup_max=1"),
    (["++spec.ngram.prompt_lookup_maxx=3"], "spec.ngram.prompt_lookup_maxx is not a key of vLLM",
     "fix: ++spec.ngram.prompt_lookup_max=3"),
    (["spec.ngram.prompt_lookup_max=1"], "prompt_lookup_min=2 must be ≤ prompt_lookup_max=1",
     "fix: ++spec.ngram.prompt_lookup_min=1"),
    (["++spec.mtp.rejection_sample_method=magic"], "spec.mtp.rejection_sample_method=magic is not one of vLLM's values",
     "fix: ++spec.mtp.rejection_sample_method=standard"),
    (["++spec.mtp.enforce_eager=maybe"], "spec.mtp.enforce_eager=maybe must be true or false",
     "fix: ++spec.mtp.enforce_eager=true"),
    # the model folder, as vLLM will read it
    (["model=hf", "model.path={inputs}/no_config"], "has no config.json", "fix: model.path=<a folder with config.json>"),
    (["model=hf", "model.path={inputs}/broken_config"], "config.json does not parse as JSON: Expecting",
     "fix: repair that file"),
    (["model=hf", "model.path={inputs}/no_architectures"], "config.json names no architectures",
     "fix: add \"architectures\""),
    (["model=hf", "model.path={inputs}/unknown_architecture"], "names architectures ['Qwen2ForCausalLMM'], which vLLM",
     "closest: Qwen2ForCausalLM"),
    (["model=hf", "model.path={inputs}/no_tokenizer"], "holds no tokenizer", "fix: model.tokenizer="),
    (["model=hf", "model.path={inputs}/model", "model.tokenizer={inputs}/missing_tokenizer"],
     "model.tokenizer='{inputs}/missing_tokenizer' does not exist", "fix: model.tokenizer="),
    # prompt files, read whole: the first bad line by its number
    (["++workload.decode.prompt_source=jsonl", "++workload.decode.prompt_file={inputs}/not_json.jsonl"],
     "not_json.jsonl': line 3 is not JSON", "fix: repair that line, or ++workload.decode.prompt_file="),
    (["++workload.decode.prompt_source=jsonl", "++workload.decode.prompt_file={inputs}/no_prompt.jsonl"],
     "no_prompt.jsonl': line 2: expected a string or an object with a 'prompt'", "workload.decode.prompt_file="),
    (["++workload.decode.prompt_source=jsonl", "++workload.decode.prompt_file={inputs}/empty.jsonl"],
     "empty.jsonl': holds no prompts", "fix: ++workload.decode.prompt_file="),
    # names that become paths
    (["run=../../../tmp/escape"], "run='../../../tmp/escape' must be a plain name", "fix: run=tmp-escape"),
    (["run=.."], "run='..' must be a plain name", "fix: run=run-1"),
    (["sweep.name=a/b"], "sweep.name='a/b' must be a plain name", "fix: sweep.name=a-b"),
    # addresses
    (["cluster.address=notahost:99999"], "port '99999' must be a number in 1–65535", "fix: cluster.address=notahost:6379"),
    (["cluster.address=host:abc"], "port 'abc' must be a number in 1–65535", "fix: cluster.address=host:6379"),
    (["cluster.address=:6379"], "cluster.address=':6379' must be auto or HOST:PORT", "fix: cluster.address="),
]
# Refused by the command line only (before Hydra writes anything): the output root.
CLI_ONLY = [
    (["output_root=/proc/nope"], "output_root='/proc/nope' cannot be written", "fix: output_root=<a folder you can write>"),
    (["output_root={inputs}/not_json.jsonl"], "cannot be written: it is a file, not a folder",
     "fix: output_root=<a folder you can write>"),
]


def write_inputs(folder: Path) -> Path:
    """The model folders and prompt files INPUTS names, in `folder`."""
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "max_position_embeddings": 4096}
    models = {"model": config, "no_config": None, "broken_config": '{"architectures": ["Qwen2ForCausalLM"],\n',
              "no_architectures": {"model_type": "qwen2"}, "unknown_architecture": {
                  **config, "architectures": ["Qwen2ForCausalLMM"]}, "no_tokenizer": config}
    for name, content in models.items():
        path = folder / name
        path.mkdir(parents=True, exist_ok=True)
        if content is not None:
            (path / "config.json").write_text(content if isinstance(content, str) else json.dumps(content))
        if name != "no_tokenizer":
            (path / "tokenizer_config.json").write_text("{}")
    good = json.dumps({"prompt": "def f():"})
    (folder / "not_json.jsonl").write_text(f"{good}\n\n{{'prompt': 'single quotes'}}\n")
    (folder / "no_prompt.jsonl").write_text(f"{good}\n{json.dumps({'question': 'x'})}\n")
    (folder / "empty.jsonl").write_text("\n")
    return folder


def with_inputs(case: tuple, folder: Path) -> tuple:
    """A case with `{inputs}` filled in."""
    overrides, message, fix = case
    return [o.replace("{inputs}", str(folder)) for o in overrides], message.replace("{inputs}", str(folder)), \
        fix.replace("{inputs}", str(folder))
