"""The installed vLLM's engine-argument rules, extracted by importing it: run as a child process
(`python -m runner.vllm.arg_rules`, by runner.plan.engine_args on a cache miss), so that vLLM's
import-time output and state stay out of the driver. Prints the rules as one JSON line.

`extract` reads vLLM's parser (`AsyncEngineArgs.add_cli_args`) action by action: the kind behind each type
callable (`_type_rule`), its choices and nargs; the numeric bounds of vLLM's config classes' pydantic fields;
SpeculativeConfig's fields by their annotations; the architectures vLLM's registry knows.
"""
from __future__ import annotations

import functools
import json
import sys
from typing import Optional

from runner.vllm.versions import Check

# The rules' format (runner.plan.engine_args caches them per vLLM and format): raised when their shape changes.
SPEC_FORMAT = 3


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


@functools.lru_cache(maxsize=1)
def extract() -> dict:
    """The rules of the installed vLLM (read once per process: its parser and classes do not change in one)."""
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


def check() -> Check:
    """The parser and the config classes this extraction reads, on the installed vLLM."""
    data = extract()
    rules, speculative = data["rules"], data["speculative"]
    known = sum(1 for r in rules.values() if r["kind"] != "any")
    missing = [name for name in ("max_model_len", "enable_prefix_caching", "gpu_memory_utilization")
               if rules.get(name, {}).get("kind", "any") == "any"]
    if missing or "num_speculative_tokens" not in speculative or not data["architectures"]:
        return Check(active=False, reason=f"read {known} typed arguments; untyped: {missing}; speculative keys: "
                                          f"{len(speculative)}; architectures: {bool(data['architectures'])}")
    return Check(active=True)


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)
    data = extract()
    sys.stdout.write("\n" + json.dumps(data, sort_keys=True, default=str) + "\n")
