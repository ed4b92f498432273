"""tests/cli: the command line (`python -m runner ...` dry runs and refusals, `python -m runner.report` on
hand-made Parquet) and other tests that need a process of their own; no engine starts here (those are in
tests/engine). Helpers: tests/support/cli.py."""
