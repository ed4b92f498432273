"""Reports over persisted results: which configuration wins per workload, by how much, how sure, and what to deploy.

Everything here reads `engines/trials/requests.parquet` and the run's `config.yaml` (its `report:` and `slo:`
settings) and never starts an engine. The analysis modules (arms, samples, verdict, flags, latency_target, pareto,
cost, race_report, recommend) are pure functions over pandas DataFrames, with the interval maths in
runner.numerics.stats; `build` wires them to files (report.md, recommendation.yaml) and `plots` draws PNGs with
matplotlib's Agg backend.

    python -m runner.report outputs/demo/default [outputs/other/run ...] [--out DIR] [--tie-band 0.02]
        [--slo ttft=500 ...] [--gpu-hour-usd 3.5] [--seed 0]
"""
