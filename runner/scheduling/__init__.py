"""The driver: engine groups onto Ray actors, results onto disk as each trial ends.

Pure policies (order, residency, stops, device, settings, describe) import no Ray; the loop, the lane state
machine, the actor pool, the recorder and the cluster set-up do, lazily. Nothing in runner.execution (what runs
inside the actor) imports this package.
"""
