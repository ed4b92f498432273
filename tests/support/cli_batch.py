"""Many `python -m runner` command lines in one process, each as the terminal would see it: `python -m
tests.support.cli_batch` reads a JSON list of commands on stdin (an argument list, or {"argv": [...], "env": {...}}
with environment variables set for that command alone) and writes, per command, its exit code and what it printed
(an exception that escapes the CLI is printed as the interpreter would: a traceback on stderr). One interpreter for
all of them: the imports are paid once, not per command (tests/support/cli.py's run_cli_batch). With `--serve`,
one command a line, answered as it comes (tests/support/cli.py's WarmCli)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def run_one(argv: list[str], env: dict | None = None) -> dict:
    from runner.cli import console_main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["runner", *argv]
    saved_env = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                console_main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):  # as the interpreter prints it
                    print(exc.code, file=sys.stderr)
            except BaseException:  # what would reach the terminal as a traceback
                traceback.print_exc()
                code = 1
    finally:
        sys.argv = saved
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return {"argv": argv, "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def one(command) -> dict:
    return run_one(command["argv"], command.get("env")) if isinstance(command, dict) else run_one(command)


def serve() -> None:
    """One command a line on stdin, its answer a line on stdout after MARK (anything else a library wrote to the
    process's own stdout stays apart): tests/support/cli.py's WarmCli keeps one such interpreter."""
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(MARK + json.dumps(one(json.loads(line))) + "\n")
            sys.stdout.flush()


MARK = "\x1ecli-batch "

if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        results = [one(c) for c in json.load(sys.stdin)]
        sys.stdout.write("\n" + json.dumps(results) + "\n")
