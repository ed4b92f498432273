"""The driver ships each workload's prepared data (a prompt set's rendered sessions, a trace) once per node: put
in Ray's object store once per command, each trial carrying only its reference (runner.measurement.shipped), so a
large file is neither pickled into every trial nor fetched by a node more than once."""
from __future__ import annotations

import dataclasses
from typing import Any

from runner.measurement.shipped import ObjectStoreRef

# Payload id → (the payload, kept alive so that its id stays its own; its reference). The driver's references
# keep the objects in the store for the command's life.
_PUT: dict[int, tuple[Any, ObjectStoreRef]] = {}


def by_reference(plan):
    """The plan with every trial's payload replaced by its object-store reference (Ray must be up)."""
    import ray

    trials = []
    for trial in plan.trials:
        payload = trial.params.payload()
        if payload is not None and not isinstance(payload, ObjectStoreRef):
            if id(payload) not in _PUT:
                _PUT[id(payload)] = (payload, ObjectStoreRef(ray.put(payload)))
            trial = dataclasses.replace(trial, params=trial.params.with_payload(_PUT[id(payload)][1]))
        trials.append(trial)
    return dataclasses.replace(plan, trials=trials)
