from runner.execution.failures import parse_startup_failure

KV_LOG = ("ValueError: To serve at least one request with the model's max seq len (32768), (0.75 GiB KV cache "
          "is needed, which is larger than the available KV cache memory (0.5 GiB). Based on the available memory, "
          "the estimated maximum model length is 21840. Try increasing `gpu_memory_utilization` or decreasing "
          "`max_model_len` when initializing the engine.")


def test_kv_cache_too_small_is_parsed_with_its_numbers():
    f = parse_startup_failure(log="noise\n" + KV_LOG + "\nmore", exception="RuntimeError: Engine core initialization failed")
    assert f.kind == "kv_cache_too_small_for_max_len"
    assert f.numbers == {"max_model_len": 32768, "needed_gib": 0.75, "available_gib": 0.5, "estimated_max_len": 21840}


def test_free_memory_below_budget():
    log = ("ValueError: Free memory on device cuda:0 (10.5/139.8 GiB) on startup is less than desired GPU memory "
           "utilization (0.9, 125.8 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    f = parse_startup_failure(log=log)
    assert f.kind == "not_enough_free_memory_for_budget"
    assert f.numbers["utilization"] == 0.9


def test_no_cache_memory_and_oom():
    assert parse_startup_failure(log="ValueError: No available memory for the cache blocks. Try").kind == "no_kv_cache_memory"
    assert parse_startup_failure(log="torch.OutOfMemoryError: CUDA out of memory.").kind == "out_of_memory_while_loading"


def test_unknown_failure_keeps_the_last_error_line():
    f = parse_startup_failure(log="a\nSomeError: it broke\nb", exception="")
    assert f.kind == "engine_start_failed"
    assert "it broke" in f.reason


def test_what_the_device_cannot_run_is_named():
    log = ("(Worker pid=1) ERROR [multiproc_executor.py:1063] NotImplementedError: FP8 KV cache on CPU requires x86 "
           "with AVX-512 or AMX.\nRuntimeError: Engine core initialization failed. See root cause above.")
    f = parse_startup_failure(log=log)
    assert f.kind == "not_supported_here"
    assert "FP8 KV cache on CPU requires x86 with AVX-512 or AMX" in f.reason
