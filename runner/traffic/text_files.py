"""A data file read as UTF-8 text, with the digest of its bytes, or refused naming its path and the fix: a binary
file (a NUL byte: a Parquet, gzip or Arrow file given where text is read) and text in another encoding are said
to be what they are, never a decoding traceback. Pure."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

# Where to look for a NUL byte: text never has one, and every binary container has some near its start.
_SNIFF_BYTES = 8192
_MAGIC = {b"PAR1": "Parquet", b"\x1f\x8b": "gzip", b"PK\x03\x04": "zip", b"ARROW1": "Arrow",
          b"\xfd7zXZ": "xz", b"BZh": "bzip2", b"(\xb5/\xfd": "zstd"}


@dataclass(frozen=True, kw_only=True)
class TextFile:
    text: str
    digest: str  # sha256 of the bytes: the file's content, whatever its path or mtime


def read_text_file(path: str, *, error: type[ValueError], fix: str) -> TextFile:
    """The file's text, or `error` naming `path`, what the file is, and `fix` (the override to use)."""
    data = Path(path).read_bytes()
    head = data[:_SNIFF_BYTES]
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 has NULs too: said below
        kind = next((name for magic, name in _MAGIC.items() if data.startswith(magic)), None)
        raise error(f"{path}: a binary file{f' ({kind})' if kind else ''}, not text (fix: {fix})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        utf16 = " (it starts with a UTF-16 byte-order mark)" if head.startswith((b"\xff\xfe", b"\xfe\xff")) else ""
        raise error(f"{path} line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
                    f"{utf16} (fix: {fix}, e.g. converted with iconv -f <its encoding> -t UTF-8)") from None
    return TextFile(text=text, digest=hashlib.sha256(data).hexdigest())
