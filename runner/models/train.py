"""Trains the embedded tiny model into its cached folder (the training itself: `runner.models.training`).

    python -m runner.models.train            # trains into the cached model folder (if not current)
    python -m runner.models.train --force    # retrains
    python -m runner.models.train --force --ship   # retrains and replaces the shipped copy (runner/models/weights)
"""
from __future__ import annotations

import argparse
import json
import shutil

from runner.models.tiny import SHIPPED_DIR, SHIPPED_FILES, ensure_tiny_model
from runner.models.training import REPORT_FILE, weights_are_current


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="retrain even if current weights exist")
    parser.add_argument("--ship", action="store_true", help=f"copy the trained folder to {SHIPPED_DIR}")
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
    if args.ship:
        SHIPPED_DIR.mkdir(parents=True, exist_ok=True)
        for name in SHIPPED_FILES:
            shutil.copyfile(model_dir / name, SHIPPED_DIR / name)
        print(f"shipped: {SHIPPED_DIR}")


if __name__ == "__main__":
    main()
