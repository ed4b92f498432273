"""Trains the embedded tiny model into its cached folder (the training itself: `runner.models.training`).

    python -m runner.models.train            # trains into the cached model folder (if not current)
    python -m runner.models.train --force    # retrains
"""
from __future__ import annotations

import argparse
import json

from runner.models.tiny import ensure_tiny_model
from runner.models.training import REPORT_FILE, weights_are_current


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="retrain even if current weights exist")
    args = parser.parse_args(argv)
    model_dir = ensure_tiny_model(weights="dummy")
    if args.force or not weights_are_current(model_dir=model_dir):
        # ensure_tiny_model takes the lock; --force removes the marker first so it retrains.
        (model_dir / REPORT_FILE).unlink(missing_ok=True)
        model_dir = ensure_tiny_model(weights="trained")
    report = json.loads((model_dir / REPORT_FILE).read_text())
    print(json.dumps({k: report[k] for k in ("train_seconds", "train_tokens", "final_train_losses",
                                             "heldout_losses", "loss_names")}, indent=2))
    print(model_dir)


if __name__ == "__main__":
    main()
