"""tests/engine: real vLLM engines (CPU build) in Ray actors or through the CLI. Every test collected here carries
the `engine` marker (tests/conftest.py marks it by folder; each module also says so), so `-m "not engine"` never
selects one."""
