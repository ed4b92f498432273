"""Reports over persisted Parquet results: which configuration wins per workload, and why to trust it.

Everything here reads `engines/trials/requests.parquet` and never starts an
engine. The analysis modules (arms, metrics, robust, verdict, flags) are pure
functions over pandas DataFrames; `build` wires them to files and `plots`
draws PNGs with matplotlib's Agg backend.

    python -m runner.report outputs/demo/default [outputs/other/run ...] [--out DIR]
"""
