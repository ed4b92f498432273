"""The device-time split from a hand-made timeline (runner.report.timeline)."""
import pandas as pd
import pytest

from runner.report.timeline import device_time


def _phases(rows):
    return pd.DataFrame([dict(lane=lane, phase=phase, engine_id=e, started_at=t, duration_s=d)
                         for lane, phase, e, t, d in rows])


def test_split_switches_and_load_overhead():
    phases = _phases([
        (-1, "launch", None, 0.0, 3.0),
        (0, "prepare", "a", 3.0, 10.0),
        (0, "start", "a", 13.0, 40.0),    # vLLM's init 36 s of it
        (0, "trial", "a", 54.0, 5.0),     # first trial 1 s after the start answered
        (0, "sleep", "a", 59.5, 1.0),
        (0, "start", "b", 61.0, 40.0),
        (0, "trial", "b", 101.5, 5.0),
        (0, "sleep", "b", 107.0, 0.5),
        (0, "wake", "a", 107.5, 0.7),
        (0, "trial", "a", 108.5, 5.0),    # switch b -> a: 108.5 - 106.5 = 2.0 s
    ])
    engines = pd.DataFrame({"engine_id": ["a", "b"], "load_s": [36.0, 38.0]})
    trials = pd.DataFrame({"warmup_s": [1.0, 0.5, 0.0], "duration_s": [3.5, 4.0, 4.5],
                           "wall_s": [3.8, 4.3, 4.8]})
    split = device_time(phases, engines, trials)
    assert split.wall_s == pytest.approx(113.5)
    assert split.launch_s == 3.0 and split.loads == 2 and split.engines == 2
    assert any(r["what"].startswith("engine loads (2 for 2 engines;") for r in split.rows())
    assert split.vllm_init_s == pytest.approx(74.0)
    assert split.trials_s == pytest.approx(15.0) and split.warmup_s == pytest.approx(1.5)
    assert split.switches_s == [pytest.approx(2.0)]
    # a: 54 - 3 - 36 = 15 s (prepare included); b: 101.5 - 59 - 38 = 4.5 s
    assert split.load_gap_overhead_s == [pytest.approx(15.0), pytest.approx(4.5)]
    assert split.loads_wall_s == pytest.approx(80.0)
    assert split.runner_s == pytest.approx(113.5 - split.prepare_s - 80.0 - 15.0 - 1.5 - 0.7)
    assert any("switch" in r["what"] for r in split.rows())
    # beyond vLLM's init and the measured windows: 113.5 - 74 - 12
    assert split.measured_s == pytest.approx(12.0)
    assert split.outside_init_and(split.measured_s) == pytest.approx(27.5)
    assert split.outside_init_and(split.workload_runs_s) == pytest.approx(113.5 - 74 - 12.9)


def test_resumed_runs_count_each_command_alone():
    phases = _phases([(-1, "launch", None, 0.0, 2.0), (0, "trial", "a", 2.0, 8.0),
                      (-1, "launch", None, 1000.0, 2.0), (0, "trial", "a", 1002.0, 8.0)])
    split = device_time(phases, pd.DataFrame({"engine_id": [], "load_s": []}), pd.DataFrame({"warmup_s": []}))
    assert split.wall_s == pytest.approx(20.0)
    assert split.idle_s == pytest.approx(0.0)


def test_no_timeline_no_split():
    assert device_time(pd.DataFrame(), pd.DataFrame(), pd.DataFrame()) is None


def test_loads_side_by_side_count_once():
    phases = _phases([(-1, "launch", None, 0.0, 1.0), (0, "start", "a", 1.0, 50.0), (0, "start", "b", 1.0, 60.0),
                      (0, "trial", "a", 61.0, 2.0), (0, "trial", "b", 63.0, 2.0)])
    split = device_time(phases, pd.DataFrame({"engine_id": ["a", "b"], "load_s": [49.0, 59.0]}),
                        pd.DataFrame({"warmup_s": []}))
    assert split.loads_wall_s == pytest.approx(60.0) and split.vllm_init_s == pytest.approx(108.0)
    assert split.switches_s == [pytest.approx(0.0)]
    assert split.runner_s == pytest.approx(65.0 - split.prepare_s - 60.0 - 4.0)
