"""report.html: report.md as one self-contained page (styles inline, PNGs as base64 data URIs, no script or file
from elsewhere), for a browser or a mail. Pure apart from reading the PNGs the markdown names.

It renders the markdown the report writes, no more: headings, pipe tables, "- " lists, paragraphs, **bold**,
`code` and ![alt](file.png) images. Each "## " heading opens a <section> whose id is its title in lower case
(the Answer is section#answer). A script of the page itself counts, after load, the images the browser decoded
(body's data-images-decoded="decoded/all"): what the page's own test reads.
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from runner.report.sections import BLOCKING_TITLE

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1400px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.8em; } h3 { margin-top: 1.4em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } tr:nth-child(even) td { background: #fafafa; }
section#answer table { font-size: 14px; } section#answer td:nth-child(2) { font-weight: 600; }
div.blocking { background: #fff4e5; border-left: 4px solid #e69500; padding: 0.1em 1em; }
img { max-width: 100%; display: block; margin: 0.6em 0; }
code { background: #f2f2f2; padding: 0 3px; }
"""
DECODED = """window.addEventListener("load", function () {
  var all = Array.prototype.slice.call(document.images);
  var ok = all.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute("data-images-decoded", ok + "/" + all.length);
});"""
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")


def _image(alt: str, name: str, folder: Path) -> str:
    path = folder / name
    if not path.is_file():
        return f"<p><em>missing plot: {html.escape(name)}</em></p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def inline(text: str, folder: Path) -> str:
    """One line's markdown as HTML: text escaped, then code, bold and images."""
    pieces, last = [], 0
    for match in _IMAGE.finditer(text):
        pieces += [_words(text[last:match.start()]), _image(match.group(1), match.group(2), folder)]
        last = match.end()
    return "".join(pieces + [_words(text[last:])])


def _words(text: str) -> str:
    text = html.escape(text.replace("\\|", "|"), quote=False)
    text = _CODE.sub(r"<code>\1</code>", text)
    return _BOLD.sub(r"<strong>\1</strong>", text)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _table(lines: list[str], folder: Path) -> str:
    head = "".join(f"<th>{inline(c, folder)}</th>" for c in _cells(lines[0]))
    body = "".join("<tr>" + "".join(f"<td>{inline(c, folder)}</td>" for c in _cells(line)) + "</tr>"
                   for line in lines[2:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _block(block: str, folder: Path) -> str:
    lines = block.splitlines()
    if len(lines) >= 2 and lines[0].startswith("|") and set(lines[1]) <= set("|-: "):
        return _table(lines, folder)
    out, items = [], []
    for line in lines:
        if line.startswith("- "):
            items.append(f"<li>{inline(line[2:], folder)}</li>")
            continue
        if items:
            out.append("<ul>" + "".join(items) + "</ul>")
            items = []
        out.append(f"<p>{inline(line, folder)}</p>")
    if items:
        out.append("<ul>" + "".join(items) + "</ul>")
    if lines and lines[0] == f"**{BLOCKING_TITLE}**":
        return '<div class="blocking">' + "\n".join(out) + "</div>"
    return "\n".join(out)


def section_id(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def to_html(markdown: str, folder: Path, *, title: str) -> str:
    """The page for report.md's text; images are read from `folder` (where the PNGs were written)."""
    body, open_section = [], False
    for block in re.split(r"\n\s*\n", markdown.strip()):
        heading = re.match(r"^(#{1,3}) (.*)$", block.strip())
        if heading and "\n" not in block.strip():
            level, text = len(heading.group(1)), heading.group(2)
            if level == 2:
                body.append(("</section>\n" if open_section else "") + f'<section id="{section_id(text)}">')
                open_section = True
            body.append(f"<h{level}>{inline(text, folder)}</h{level}>")
        else:
            body.append(_block(block, folder))
    if open_section:
        body.append("</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style><script>{DECODED}</script></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")
