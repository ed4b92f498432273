"""What the first sleep's host memory reservation covers (runner.execution.sleep_buffers)."""
from types import SimpleNamespace

from runner.execution.sleep_buffers import offloaded_sizes


def _allocation(tag, size, asleep=False):
    return SimpleNamespace(tag=tag, handle=(0, size, 0, 0), is_asleep=asleep)


def test_reserves_the_awake_weights_only():
    allocations = [_allocation("weights", 4096), _allocation("kv_cache", 1 << 20), _allocation("weights", 2048),
                   _allocation("weights", 512, asleep=True)]
    assert offloaded_sizes(allocations) == [4096, 2048]


def test_nothing_to_reserve_without_weights():
    assert offloaded_sizes([_allocation("kv_cache", 10)]) == []
