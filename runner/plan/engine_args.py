"""vLLM's own engine-argument rules (names, types, choices, numeric bounds), without importing vLLM per run.

The rules come from the installed vLLM's parser (`AsyncEngineArgs.add_cli_args` on its FlexibleArgumentParser)
and its config classes' pydantic bounds; the speculative_config keys from its SpeculativeConfig's fields (types,
Literal choices, bounds); the model architectures it (or the Transformers backend it falls back to) can load.
They are extracted once per installed vLLM (runner/vllm/arg_rules.py in a subprocess, ~10 s: vLLM's
import) into a JSON cache keyed by
vLLM's version and its arg_utils.py's mtime and size. Later runs read the JSON (milliseconds). Checking a value
is pure and lives here too.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from runner.cache import cache_root
from runner.vllm.arg_rules import SPEC_FORMAT


@dataclass(frozen=True, kw_only=True)
class ArgRule:
    """How vLLM's parser reads one engine argument."""

    kind: str = "any"  # bool | int | float | str | json | dict_or_str | any
    nullable: bool = False
    many: bool = False  # nargs: a list of `kind`
    human: bool = False  # also takes "1K", "2G" (and "auto" for max_model_len)
    choices: Optional[tuple] = None
    bounds: dict = field(default_factory=dict)  # ge / gt / le / lt


@dataclass(frozen=True, kw_only=True)
class EngineArgSpec:
    vllm_version: str
    rules: dict[str, ArgRule]
    # speculative_config's keys (SpeculativeConfig's fields) and how each is read; empty: not known here.
    speculative: dict[str, ArgRule] = field(default_factory=dict)
    # Architectures (config.json's `architectures`) vLLM can load: its registry's, and the Transformers classes
    # its Transformers backend falls back to. None: not known here.
    architectures: Optional[frozenset[str]] = None
    # Name endings vLLM converts between when it resolves an architecture (ForCausalLM, ForSequenceClassification…).
    architecture_suffixes: tuple[str, ...] = ()

    def knows_architecture(self, name: str) -> Optional[bool]:
        """Whether vLLM can resolve `name` (directly, or by swapping its ending as vLLM does); None: not known."""
        if self.architectures is None:
            return None
        if name in self.architectures:
            return True
        return any(name.endswith(end) and name[:-len(end)] + other in self.architectures
                   for end in self.architecture_suffixes for other in self.architecture_suffixes)

    @property
    def names(self) -> set[str]:
        return set(self.rules)


# ---- where the cache lives and what keys it --------------------------------------------------------------
def cache_dir() -> Path:
    return cache_root() / "engine-args"


def _installed_package() -> Optional[Path]:
    """The installed vLLM package's folder, found without importing it; None where vLLM is not installed."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _installed_key() -> Optional[tuple[str, str]]:
    """(vLLM version, a key of its arg_utils.py) without importing vLLM; None where vLLM is not installed."""
    package = _installed_package()
    if package is None:
        return None
    version = _version_text(package)
    arg_utils = package / "engine" / "arg_utils.py"
    try:
        st = arg_utils.stat()
    except OSError:
        return None
    return version, f"{int(st.st_mtime_ns)}-{st.st_size}"


def installed_takes(name: str) -> Optional[bool]:
    """Whether the installed vLLM's engine arguments (AsyncEngineArgs' fields, declared in its arg_utils.py) include
    `name`, read without importing vLLM; None where vLLM is not installed. The contract test holds it against the
    imported fields (tests/unit/vllm/test_vllm_contract.py)."""
    package = _installed_package()
    if package is None:
        return None
    try:
        text = (package / "engine" / "arg_utils.py").read_text()
    except OSError:
        return None
    return re.search(rf"^\s+{re.escape(name)}\s*:", text, re.MULTILINE) is not None


def installed_vllm_version() -> str:
    """The installed vLLM's version, read without importing it ("none" where vLLM is not installed)."""
    key = _installed_key()
    return key[0] if key else "none"


def _version_text(package: Path) -> str:
    """vLLM's version from its _version.py (the CPU build's distribution has another name)."""
    import importlib.metadata

    try:
        found = re.search(r"""version\s*=\s*['"]([^'"]+)['"]""", (package / "_version.py").read_text())
        if found:
            return found.group(1)
    except OSError:
        pass
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def cache_path() -> Optional[Path]:
    key = _installed_key()
    if key is None:
        return None
    version, stamp = key
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", version)
    return cache_dir() / f"vllm-{safe}-{stamp}-f{SPEC_FORMAT}.json"


# ---- loading (cache first) ---------------------------------------------------------------------------------
def _rule_from_json(r: dict) -> ArgRule:
    choices = r.get("choices")
    return ArgRule(kind=r.get("kind", "any"), nullable=bool(r.get("nullable")), many=bool(r.get("many")),
                   human=bool(r.get("human")), choices=tuple(choices) if choices is not None else None,
                   bounds=dict(r.get("bounds") or {}))


def _from_json(data: dict) -> EngineArgSpec:
    architectures = data.get("architectures")
    return EngineArgSpec(vllm_version=data.get("vllm_version", "unknown"),
                         rules={name: _rule_from_json(r) for name, r in data["rules"].items()},
                         speculative={name: _rule_from_json(r) for name, r in (data.get("speculative") or {}).items()},
                         architectures=frozenset(architectures) if architectures is not None else None,
                         architecture_suffixes=tuple(data.get("architecture_suffixes") or ()))


class RulesUnread(RuntimeError):
    """The installed vLLM's rules could not be extracted; the message says why."""


def unread_notice(vllm_version: str, reason: str) -> str:
    """What the log says where the rules cannot be read: the checks that are off, and how to see the error."""
    return (f"warning: vLLM {vllm_version}'s engine-argument rules could not be read ({reason}): engine.args, "
            f"sweep.engine_axes, spec.<method> and the model's architecture are not checked before start (vLLM "
            f"checks them as each engine starts) (fix: python -m runner.plan.engine_args --warm shows the error)")


def load_spec(*, refresh: bool = False) -> Optional[EngineArgSpec]:
    """The installed vLLM's engine-argument rules; None where vLLM is not installed, or where its rules cannot be
    read: then the log says so, and which checks are off (never in silence)."""
    path = cache_path()
    if path is None:
        return None
    if path.exists() and not refresh:
        try:
            return _from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError):
            pass  # a torn or old file: extract again
    try:
        data = _extract_in_subprocess()
    except RulesUnread as exc:
        print(unread_notice(installed_vllm_version(), str(exc)), file=sys.stderr, flush=True)
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home still gets its checks, just not the cache
    return _from_json(data)


def spec_uncached() -> bool:
    """Whether reading vLLM's rules means importing it: installed, and not in the cache yet."""
    path = cache_path()
    return path is not None and not path.exists()


def begin_spec():
    """vLLM's rules read in a side thread (a Future), so that a first use of this vLLM (an import of seconds to
    tens of seconds) runs beside Ray's start and the first actor's imports."""
    from concurrent.futures import ThreadPoolExecutor

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-arg-rules")
    try:
        return executor.submit(load_spec)
    finally:
        executor.shutdown(wait=False)


def _extract_in_subprocess() -> dict:
    """The rules as JSON from a child process (vLLM's import-time output and state stay out of the driver); raises
    RulesUnread, with the child's last words, where it gives none."""
    try:
        done = subprocess.run([sys.executable, "-m", "runner.vllm.arg_rules"], capture_output=True, text=True,
                              timeout=300, cwd=str(Path(__file__).resolve().parents[2]))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RulesUnread(f"{type(exc).__name__}: {exc}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RulesUnread(f"python -m runner.vllm.arg_rules exited {done.returncode}: {last}"[:400])
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        raise RulesUnread("python -m runner.vllm.arg_rules printed no JSON line") from None


# ---- checking one value (pure) ------------------------------------------------------------------------------
_HUMAN_INT = re.compile(r"^\s*-?\d+(\.\d+)?\s*[kKmMgGtT]?\s*$")


def _kind_problem(rule: ArgRule, value) -> Optional[str]:
    kind = rule.kind
    if kind == "any":
        return None
    if kind == "bool":
        return None if isinstance(value, bool) else "must be true or false"
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return None
        if rule.human and isinstance(value, str) and (_HUMAN_INT.match(value) or value == "auto"):
            return None
        return "must be an integer" + (" (or 1K, 2G, …)" if rule.human else "")
    if kind == "float":
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else "must be a number"
    if kind == "str":
        return None if isinstance(value, str) else "must be a string"
    if kind == "json":
        if isinstance(value, (dict, list)):
            return None
        if isinstance(value, str):
            try:
                json.loads(value)
                return None
            except ValueError:
                return "must be a dict (or a JSON string)"
        return "must be a dict, e.g. {key: value}"
    if kind == "dict_or_str":
        return None if isinstance(value, (dict, str)) else "must be a dict or a string"
    return None


def _bound_problem(rule: ArgRule, value) -> Optional[str]:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    b = rule.bounds
    if "ge" in b and not value >= b["ge"]:
        return f"must be ≥ {b['ge']}"
    if "gt" in b and not value > b["gt"]:
        return f"must be > {b['gt']}"
    if "le" in b and not value <= b["le"]:
        return f"must be ≤ {b['le']}"
    if "lt" in b and not value < b["lt"]:
        return f"must be < {b['lt']}"
    return None


def value_problem(rule: ArgRule, value: Any) -> Optional[str]:
    """Why vLLM's parser (or its config's bounds) would refuse `value`, in words; None where it is accepted."""
    if value is None:
        return None if rule.nullable or rule.kind == "any" else "cannot be null"
    items = list(value) if rule.many and isinstance(value, (list, tuple)) else [value]
    if rule.many and not isinstance(value, (list, tuple)):
        return "must be a list, e.g. [a, b]"
    for item in items:
        problem = _kind_problem(rule, item)
        if problem:
            return problem
        if rule.choices is not None and item not in rule.choices:
            return "is not one of vLLM's values"
        problem = _bound_problem(rule, item)
        if problem:
            return problem
    return None


def example_value(rule: ArgRule) -> str:
    """A value to put in the fix."""
    if rule.choices:
        return str(rule.choices[0])
    if rule.kind == "bool":
        return "true"
    if rule.kind in ("int", "float"):
        low = rule.bounds.get("ge", rule.bounds.get("gt"))
        if low is None:
            return "1"
        if "gt" in rule.bounds and "ge" not in rule.bounds:
            return str(low + 1) if rule.kind == "int" else str(min(1, low + 0.5))
        return str(max(low, 1) if rule.kind == "int" else low)
    if rule.kind in ("json", "dict_or_str"):
        return "{key: value}"
    return "<value>"


def describe_valid(rule: ArgRule) -> str:
    if rule.choices:
        return ", ".join(map(str, rule.choices)) + (", null" if rule.nullable else "")
    parts = {"bool": "true, false", "int": "an integer", "float": "a number", "str": "a string",
             "json": "a dict", "dict_or_str": "a dict or a string"}.get(rule.kind, "any value")
    bounds = " ".join(f"{ {'ge': '≥', 'gt': '>', 'le': '≤', 'lt': '<'}[k]} {v}" for k, v in rule.bounds.items())
    return parts + (f" {bounds}" if bounds else "") + (" or null" if rule.nullable else "")


if __name__ == "__main__":
    if sys.argv[1:] == ["--warm"]:  # fill the cache ahead (set-up), so the first sweep does not pay vLLM's import
        if cache_path() is None:
            print("vLLM is not installed: nothing to cache")
            sys.exit(0)
        if load_spec() is None:  # its warning says why the rules could not be read
            sys.exit(1)
        print(cache_path())
        sys.exit(0)
    print("usage: python -m runner.plan.engine_args --warm", file=sys.stderr)
    sys.exit(2)
