"""tests/cli: the command line (`python -m runner ...` dry runs and refusals, `python -m runner.report` on
hand-made Parquet) and other tests that need a process of their own; no engine starts here (those are in
tests/engine). Helpers: tests/support/cli.py. Every test collected here carries the `cli` marker (tests/conftest.py
marks it by folder), so `-m "not cli and not engine"` selects the pure tests alone."""
