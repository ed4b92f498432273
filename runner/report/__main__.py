"""`python -m runner.report <results folder> [<more folders>...] [--out DIR]`: report.md + PNGs, headline tables."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m runner.report",
        description="Write report.md and PNG plots from persisted results (Parquet only; nothing is re-run). "
                    "Two or more folders are compared as one report.")
    parser.add_argument("folders", nargs="+", type=Path, help="results folders (outputs/<sweep>/<run>)")
    parser.add_argument("--out", type=Path, default=None, help="where report.md and plots go (default: the first folder)")
    parser.add_argument("--bandwidth-tbs", type=float, default=None,
                        help="device memory bandwidth in TB/s, for a device the report does not know")
    parser.add_argument("--quiet", action="store_true", help="write the files without printing the tables")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from runner.report.build import write_report

    try:
        write_report(run_dirs=args.folders, out_dir=args.out, echo=not args.quiet,
                     bandwidth=args.bandwidth_tbs * 1e12 if args.bandwidth_tbs else None)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
