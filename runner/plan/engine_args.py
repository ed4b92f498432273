"""vLLM's own engine-argument rules (names, types, choices, numeric bounds), without importing vLLM per run.

The rules come from the installed vLLM's parser (`AsyncEngineArgs.add_cli_args` on its FlexibleArgumentParser)
and its config classes' pydantic bounds; the speculative_config keys from its SpeculativeConfig's fields (types,
Literal choices, bounds); the model architectures it (or the Transformers backend it falls back to) can load.
They are extracted once per installed vLLM (a subprocess, ~10 s: vLLM's import) into a JSON cache keyed by
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

SPEC_FORMAT = 3


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


def _installed_key() -> Optional[tuple[str, str]]:
    """(vLLM version, a key of its arg_utils.py) without importing vLLM; None where vLLM is not installed."""
    import importlib.metadata
    import importlib.util

    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(list(spec.submodule_search_locations)[0])
    version = _version_text(package)
    arg_utils = package / "engine" / "arg_utils.py"
    try:
        st = arg_utils.stat()
    except OSError:
        return None
    return version, f"{int(st.st_mtime_ns)}-{st.st_size}"


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


def load_spec(*, refresh: bool = False) -> Optional[EngineArgSpec]:
    """The installed vLLM's engine-argument rules (None where vLLM is not installed or cannot be read)."""
    path = cache_path()
    if path is None:
        return None
    if path.exists() and not refresh:
        try:
            return _from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError):
            pass  # a torn or old file: extract again
    data = _extract_in_subprocess()
    if data is None:
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


def _extract_in_subprocess() -> Optional[dict]:
    # A child process: vLLM's import-time output and state stay out of the driver.
    try:
        done = subprocess.run([sys.executable, "-m", "runner.plan.engine_args"], capture_output=True, text=True,
                              timeout=300, cwd=str(Path(__file__).resolve().parents[2]))
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


# ---- extraction (runs in the child; imports vLLM) ---------------------------------------------------------
def _closure_value(fn, name: str):
    code = getattr(fn, "__code__", None)
    if code is None or not fn.__closure__ or name not in code.co_freevars:
        return None
    return fn.__closure__[code.co_freevars.index(name)].cell_contents


def _type_rule(fn) -> dict:
    """The kind behind one of vLLM's parser type callables (int, optional_type(int), parse_dataclass, ...)."""
    if fn in (int, float, str, bool):
        return {"kind": fn.__name__}
    if fn is json.loads:
        return {"kind": "json"}
    name = getattr(fn, "__name__", "")
    if name == "_optional_type":
        return {**_type_rule(_closure_value(fn, "return_type")), "nullable": True}
    if name == "_parse_type":
        return _type_rule(_closure_value(fn, "return_type"))
    if name == "parse_dataclass":
        return {"kind": "json"}
    if name == "union_dict_and_str":
        return {"kind": "dict_or_str"}
    if name in ("human_readable_int", "human_readable_int_or_auto"):
        return {"kind": "int", "human": True}
    return {"kind": "any"}


def _bounds_by_field(names: set[str]) -> dict[str, dict]:
    """Numeric bounds vLLM's config classes declare (pydantic Field ge/gt/le/lt). Where two classes declare
    the same field differently, the loosest bound is kept: never refuse what vLLM may accept."""
    import inspect

    import vllm.config as vc

    seen: dict[str, list[dict]] = {}
    for _, cls in inspect.getmembers(vc, inspect.isclass):
        for fname, info in (getattr(cls, "__pydantic_fields__", None) or {}).items():
            if fname not in names:
                continue
            b = {}
            for m in getattr(info, "metadata", ()) or ():
                for key in ("ge", "gt", "le", "lt"):
                    v = getattr(m, key, None)
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        b[key] = v
            seen.setdefault(fname, []).append(b)
    out = {}
    for fname, all_b in seen.items():
        common = {}
        for key in ("ge", "gt", "le", "lt"):
            vals = [b.get(key) for b in all_b]
            if any(v is None for v in vals):
                continue  # one class leaves it unbounded: so do we
            common[key] = min(vals) if key in ("ge", "gt") else max(vals)
        if common:
            out[fname] = common
    return out


def extract() -> dict:
    import argparse
    import dataclasses

    import vllm
    from vllm.engine.arg_utils import AsyncEngineArgs

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older layouts
        from vllm.utils import FlexibleArgumentParser

    fields = {f.name: f for f in dataclasses.fields(AsyncEngineArgs)}
    parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
    rules: dict[str, dict] = {name: {"kind": "any"} for name in fields}
    for action in parser._actions:
        if action.dest not in fields:
            continue
        if isinstance(action, argparse.BooleanOptionalAction):
            rule = {"kind": "bool", "nullable": fields[action.dest].default is None}
        elif action.type is None:
            continue
        else:
            rule = _type_rule(action.type)
        if rule["kind"] != "bool" and (action.nargs in ("+", "*") or (isinstance(action.nargs, int)
                                                                     and action.nargs > 0)):
            rule["many"] = True
        if action.choices is not None:
            choices = list(action.choices)
            if None in choices:
                rule["nullable"] = True
            rule["choices"] = [c for c in choices if c is not None]
        rules[action.dest] = rule
    for name, b in _bounds_by_field(set(fields)).items():
        rules[name]["bounds"] = b
    return {"format": SPEC_FORMAT, "vllm_version": vllm.__version__, "rules": rules,
            "speculative": _speculative_rules(), "architectures": _architectures(),
            "architecture_suffixes": _architecture_suffixes()}


def _annotation_rule(annotation) -> Optional[dict]:
    """How pydantic reads one config field's annotation, as a rule (None: a field vLLM fills in itself)."""
    import enum
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        if any(type(m).__name__ == "SkipValidation" for m in args[1:]):
            return None
        return _annotation_rule(args[0])
    if origin is typing.Literal:
        return {"kind": "str", "choices": _literal_values(annotation)}
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args)
        rules = [_annotation_rule(a) or {"kind": "any"} for a in members]
        if len(rules) == 1:
            rule = dict(rules[0])
        elif all(r.get("choices") is not None for r in rules):
            rule = {"kind": "str", "choices": [c for r in rules for c in r["choices"]]}
        elif all(r["kind"] in ("str", "any") and not r.get("many") for r in rules) and \
                any(r["kind"] == "str" for r in rules):
            rule = {"kind": "str"}  # a Literal or any string: no choices to hold it to
        else:
            rule = {"kind": "any"}
        return {**rule, "nullable": nullable or rule.get("nullable", False)}
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple):
        item = _annotation_rule(args[0]) if args and origin is list else None
        kind = item["kind"] if item and item["kind"] in ("int", "float", "str", "bool") else "any"
        return {"kind": kind, "many": True}
    if origin is dict or annotation is dict:
        return {"kind": "json"}
    if annotation in (int, float, str, bool):
        return {"kind": annotation.__name__}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"kind": "any"}  # vLLM's enum fields take names as well as members
    return {"kind": "any"}


def _literal_values(annotation) -> list:
    import typing

    out = []
    for a in typing.get_args(annotation):
        out += _literal_values(a) if typing.get_origin(a) is typing.Literal else [a]
    return out


def _speculative_rules() -> dict[str, dict]:
    """SpeculativeConfig's fields (what `speculative_config` takes; vLLM forbids any other key)."""
    try:
        from vllm.config import SpeculativeConfig
    except ImportError:  # a layout without it: the extras go unchecked, the engine arguments still are
        return {}
    rules = {}
    for name, info in (getattr(SpeculativeConfig, "__pydantic_fields__", None) or {}).items():
        if any(type(m).__name__ == "SkipValidation" for m in info.metadata or ()):
            continue  # filled in by vLLM (the target's and the draft's model configs)
        try:
            rule = _annotation_rule(info.annotation)
        except Exception:  # an annotation of a shape not seen here: any value
            rule = {"kind": "any"}
        if rule is None:
            continue
        bounds = {}
        for m in info.metadata or ():
            for key in ("ge", "gt", "le", "lt"):
                v = getattr(m, key, None)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    bounds[key] = v
        rules[name] = {**rule, **({"bounds": bounds} if bounds else {})}
    return rules


def _architecture_suffixes() -> list[str]:
    try:
        from vllm.config.model import iter_architecture_defaults

        return [suffix for suffix, _ in iter_architecture_defaults()]
    except Exception:
        return []


def _architectures() -> Optional[list[str]]:
    """What config.json's `architectures` may name: vLLM's registry, and the Transformers model classes its
    Transformers backend can load when its registry has no match."""
    try:
        from vllm.model_executor.models.registry import ModelRegistry

        names = set(ModelRegistry.get_supported_archs())
    except Exception:
        return None
    try:
        import transformers

        names |= {n for n in dir(transformers) if n[:1].isupper() and ("For" in n or n.endswith("Model"))}
    except Exception:
        pass
    return sorted(names)


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
        print(cache_path() if load_spec() is not None else "vLLM is not installed: nothing to cache")
        sys.exit(0)
    import logging

    logging.disable(logging.WARNING)
    data = extract()
    sys.stdout.write("\n" + json.dumps(data, sort_keys=True, default=str) + "\n")
