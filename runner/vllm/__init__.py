"""The seam between the runner and vLLM: every import of vLLM's internals and every patch of vLLM or torch.

Nothing else under runner/ imports vLLM. Each module is one piece; `versions.PIECES` lists them with the vLLM
names each relies on, and each has a `check()` that reads the installed vLLM without changing it
(tests/unit/vllm/test_vllm_contract.py). A patch logs one line when it applies and one when it does not, with the
reason (`notice`); nothing falls back silently.

| piece          | kind  | checked on     | what it does                                                              |
|----------------|-------|----------------|---------------------------------------------------------------------------|
| engine         | read  | 0.26.0, 0.32.0 | starts AsyncLLM / LLM, sampling params, stat logger, the engine's config  |
| outputs        | read  | 0.26.0, 0.32.0 | a RequestOutput's engine-side figures (per-request acceptance: 0.32 only) |
| device         | read  | 0.26.0, 0.32.0 | CPU or CUDA, the device's total memory                                    |
| arg_rules      | read  | 0.26.0, 0.32.0 | the engine-argument rules (child process of runner.plan.engine_args)      |
| metrics        | read  | 0.26.0, 0.32.0 | the Prometheus counters vLLM keeps (vllm:* names)                         |
| step_stats     | read  | 0.26.0, 0.32.0 | an engine step's running and finished requests (the stat logger's tally)  |
| schedule_rules | read  | 0.26.0, 0.32.0 | vLLM's own validator of a draft-count schedule                            |
| spec_compat    | read  | 0.26.0, 0.32.0 | PIECEWISE graphs for a schedule engine on CUDA (0.26 needs it)            |
| worker_probe   | read  | 0.26.0, 0.32.0 | a worker extension reading weights and KV memory in the worker            |
| fork_server    | patch | 0.26.0, 0.32.0 | the engine core forked from a warm fork server (get_mp_context)           |
| draft_count    | patch | 0.32.0         | the per-step draft count set between trials (EngineCore utility method)   |
| sleep_pinning  | patch | 0.26.0, 0.32.0 | CUDA only: first sleep's host buffers pinned during init (Worker, torch)  |
| ngram_jit      | patch | 0.26.0, 0.32.0 | CUDA only: the n-gram proposer's kernel compiled during init              |
| model_info     | patch | 0.26.0, 0.32.0 | vLLM's model-info cache filled in one throwaway process                   |

Pure builders beside them (no vLLM import, so that the report may use them): `spec_config` (the one
`speculative_config`) and `serve` (the one `vllm serve` command line).

Layering (tests/unit/test_layering.py): runner.vllm imports no runner package above it, only the shared values
(runner.schema, runner.spec_arm): a setting of the run comes in as a value (fork_server.use_fork_server(wanted)).
Plan, execution, measurement, models and scheduling may import it; the report only its pure builders.
"""
