"""Test-only helpers (no tests, no fixtures): running the CLI, hand-made results, reading W&B offline runs."""
