"""The fault hook (no Ray, no engine); the faults on real engines are in
tests/engine/test_faults_engine.py."""
from __future__ import annotations

import json

import pytest


def test_fault_hook_matches_named_trials_and_attempts_only():
    from runner.execution.failures import injected_fault
    from runner.measurement.workloads.decode import DecodeParams
    from runner.plan.grid import Trial

    trial = Trial(trial_id="t1", engine_id="e", workload="decode", params=DecodeParams(), concurrency=2)
    spec = json.dumps([{"fault": "kill", "concurrency": 2}, {"fault": "hang", "trial_id": "t1", "attempts": [2]}])
    assert injected_fault(trial=trial, attempt=1, spec=spec) == "kill"
    assert injected_fault(trial=trial, attempt=2, spec=spec) == "hang"
    assert injected_fault(trial=trial, attempt=3, spec=spec) is None
    assert injected_fault(trial=trial, attempt=1, spec="") is None
    with pytest.raises(ValueError, match="unknown fault"):
        injected_fault(trial=trial, attempt=1, spec='[{"fault": "explode"}]')
