"""The model-info fill the driver starts beside its own start-up (runner.execution.inspect_models): vLLM's own
registry must then find its cache and inspect nothing in the first load."""
import os
import subprocess
import sys

# Fails if vLLM would inspect the class again: the registry's subprocess is the cost the fill takes away.
CACHE_HIT = """
import sys
from vllm.model_executor.models import registry
def refuse(fn):
    raise SystemExit("cache missed: vLLM would inspect a class in a subprocess")
registry._run_in_subprocess = refuse
for arch in sys.argv[1:]:
    assert registry.ModelRegistry._try_inspect_model_cls(arch) is not None, arch
"""


def _run(args, cache_root):
    env = {**os.environ, "VLLM_CACHE_ROOT": str(cache_root)}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_fill_writes_the_cache_vllms_registry_reads(tmp_path):
    filled = _run(["-m", "runner.execution.inspect_models", "MiMoForCausalLM", "--mtp"], tmp_path)
    assert filled.returncode == 0, filled.stderr
    cached = sorted(p.name for p in (tmp_path / "modelinfos").iterdir())
    assert len(cached) == 2 and any("MiMoForCausalLM" in name for name in cached), cached
    hit = _run(["-c", CACHE_HIT, "MiMoForCausalLM", "MiMoMTPModel"], tmp_path)
    assert hit.returncode == 0, hit.stderr[-2000:]
