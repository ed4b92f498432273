"""Many `python -m runner` command lines in one process, each as the terminal would see it: `python -m
tests.support.cli_batch` reads a JSON list of argument lists on stdin and writes, per command, its exit code and
what it printed (an exception that escapes the CLI is printed as the interpreter would: a traceback on stderr).
One interpreter for all of them: the imports are paid once, not per command."""
from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback


def run_one(argv: list[str]) -> dict:
    from runner.cli import console_main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["runner", *argv]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                console_main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:  # what would reach the terminal as a traceback
                traceback.print_exc()
                code = 1
    finally:
        sys.argv = saved
    return {"argv": argv, "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    results = [run_one(argv) for argv in json.load(sys.stdin)]
    sys.stdout.write("\n" + json.dumps(results) + "\n")
