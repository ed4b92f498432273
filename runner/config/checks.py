"""What every config section's check shares: the error that names the fix, number and name checks, and the
field metadata Hydra's type errors are explained from. Pure."""
from __future__ import annotations

import ipaddress
import re
from typing import Optional


class ConfigError(ValueError):
    """A config that must not run; the message names the override that fixes it."""


def _problems(errors: list[str]) -> None:
    if errors:
        raise ConfigError("invalid sweep:\n  - " + "\n  - ".join(errors))


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _g(value) -> str:
    """A number as the user wrote it (0, not 0.0)."""
    return f"{value:g}" if isinstance(value, float) else repr(value)


# Names joined into paths (run, sweep.name): one folder each, so a name can never lead out of output_root.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def plain_name_problem(value, *, where: str, example: str) -> Optional[str]:
    """Why `value` cannot name a folder (None where it can): letters, digits, - _ . only; not . or .."""
    text = "" if value is None else str(value)
    if _PLAIN_NAME.fullmatch(text) and text not in (".", ".."):
        return None
    plain = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or example
    return (f"{where}={text!r} must be a plain name (letters, digits, - _ .; no '/', not . or ..): it names a "
            f"folder under output_root (fix: {where}={plain})")


_HOST = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*")


def address_problem(address) -> Optional[str]:
    """Why `address` is not a Ray address the runner can join (None where it is): auto, or HOST:PORT with a port
    1–65535 (ray://HOST:PORT too)."""
    if address is None or address == "auto":
        return None
    text = str(address)
    rest = text[len("ray://"):] if text.startswith("ray://") else text
    host, sep, port = rest.rpartition(":")
    if not sep or not host:
        return (f"cluster.address={text!r} must be auto or HOST:PORT (fix: cluster.address=127.0.0.1:6379, "
                f"or cluster.address=null for a local Ray)")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else None
    try:
        known = ipaddress.ip_address(bare) if bare is not None else None
    except ValueError:
        known = None
    if known is None and not _HOST.fullmatch(host):
        return (f"cluster.address={text!r}: {host!r} is not a host name or IP address "
                f"(fix: cluster.address=127.0.0.1:{port if port.isdigit() else 6379})")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return (f"cluster.address={text!r}: port {port!r} must be a number in 1–65535 "
                f"(fix: cluster.address={host}:6379)")
    return None


def _fix(text: str, must: str = "") -> dict:
    """Field metadata read by runner.config.overrides when Hydra refuses a value's type."""
    return {"fix": text, "must": must}
