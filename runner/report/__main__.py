"""`python -m runner.report <results folder> [<more folders>...] [--out DIR]`: report.md, report.html,
recommendation.yaml, PNGs and the headline tables. Settings come from the first folder's config.yaml (`report:`); flags override."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runner.numerics.stats import TIE_BAND


def _slo(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--slo {text!r}: expected KEY=VALUE, e.g. ttft=500")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--slo {text!r}: {value!r} is not a number") from None


def slo_flags(pairs: list[tuple[str, float]] | None):
    """--slo KEY=VALUE flags as one SLO (the config's `slo` keys; the older report.slo names for one release)."""
    from runner.slo import OLD_REPORT_KEYS, old_report_slo, slo_of

    if not pairs:
        return None
    given = dict(pairs)
    old = {k: v for k, v in given.items() if k in OLD_REPORT_KEYS}
    new = {k: v for k, v in given.items() if k not in OLD_REPORT_KEYS}
    return slo_of(new, where="--slo").over(old_report_slo(old))


def _selector(text: str) -> dict:
    """`spec_method=mtp,enable_prefix_caching=false` → the engine axes a question's side names."""
    import yaml

    axes = {}
    for part in filter(None, text.split(",")):
        name, sep, value = part.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"--question side {text!r}: expected AXIS=VALUE[,AXIS=VALUE], e.g. "
                                             f"spec_method=mtp,enable_prefix_caching=false")
        axes[name.strip()] = yaml.safe_load(value)
    if axes.get("spec_method") is False:  # YAML reads a bare off as false
        axes["spec_method"] = "off"
    return axes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m runner.report",
        description="Write report.md, report.html, recommendation.yaml and PNG plots from persisted results "
                    "(nothing is re-run). Two or more folders are compared as one report.")
    parser.add_argument("folders", nargs="+", type=Path, help="results folders (outputs/<sweep>/<run>)")
    parser.add_argument("--out", type=Path, default=None, help="where the files go (default: the first folder)")
    parser.add_argument("--bandwidth-tbs", type=float, default=None,
                        help="device memory bandwidth in TB/s, for a device the report does not know")
    parser.add_argument("--tie-band", type=float, default=None,
                        help=f"ratio band around 1 read as a tie (default: report.tie_band, else {TIE_BAND})")
    parser.add_argument("--slo", type=_slo, action="append", default=None, metavar="KEY=VALUE",
                        help="a latency target in ms, or its percentile (repeatable; replaces the config's slo): "
                             "ttft, tpot, e2el, percentile (50, 90 or 99; default 99)")
    parser.add_argument("--gpu-hour-usd", type=float, default=None, help="price of one device-hour, for cost")
    parser.add_argument("--seed", type=int, default=None, help="bootstrap seed (default: report.seed, else 0)")
    parser.add_argument("--question", nargs=2, type=_selector, default=None, metavar=("A", "B"),
                        help="the comparison the Answer table states (replaces sweep.question), each side as engine "
                             "axes: --question spec_method=mtp,enable_prefix_caching=false "
                             "spec_method=off,enable_prefix_caching=true")
    parser.add_argument("--question-name", default=None, help="the question's title in the report")
    parser.add_argument("--quiet", action="store_true", help="write the files without printing the tables")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from runner.report.arguments import refuse, report_problems

    if refuse(report_problems(folders=args.folders, out=args.out, tie_band=args.tie_band,
                              bandwidth_tbs=args.bandwidth_tbs, gpu_hour_usd=args.gpu_hour_usd)):
        return 2  # nothing written, no folder made
    from runner.report.build import write_report
    from runner.report.samples import UnknownWorkload
    from runner.config.report import ReportSettingsError
    from runner.report.load import DamagedTable
    from runner.slo import SloError

    try:
        slo = slo_flags(args.slo)
    except SloError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    overrides = {"tie_band": args.tie_band, "slo": slo,
                 "gpu_hour_usd": args.gpu_hour_usd, "seed": args.seed}
    question = None if args.question is None else {"a": args.question[0], "b": args.question[1],
                                                   "name": args.question_name}
    try:
        write_report(run_dirs=args.folders, out_dir=args.out, echo=not args.quiet, overrides=overrides,
                     question=question,
                     bandwidth=args.bandwidth_tbs * 1e12 if args.bandwidth_tbs else None)
    except (FileNotFoundError, ReportSettingsError, UnknownWorkload, DamagedTable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
