"""The runbooks as HTML: the Markdown files in alerts/runbooks/, rendered by a small converter.

Enough Markdown for the runbooks (headings, paragraphs, lists, fenced code, inline code, links,
bold) with every piece of text escaped, so the receiver serves them with no extra dependency.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")  # an alert name: no dots, slashes or escapes
_INLINE = re.compile(r"`([^`]+)`|\[([^\]]+)\]\(([^)\s]+)\)|\*\*([^*]+)\*\*")
_LIST = re.compile(r"^\s*(?:[-*]|\d+\.)\s+(.*)$")

PAGE = (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
    "<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.45}}"
    "pre{{background:#f4f4f4;padding:.6em;overflow-x:auto}}code{{background:#f4f4f4}}</style>"
    "</head><body>\n{body}\n</body></html>\n"
)


class RunbookNotFound(LookupError):
    """No runbook file for that alert name."""


def _inline(text: str) -> str:
    out, last = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[last : m.start()]))
        code, label, href, bold = m.groups()
        if code is not None:
            out.append(f"<code>{html.escape(code)}</code>")
        elif label is not None:
            safe = href if href.startswith(("http://", "https://", "#", "/")) else "#"
            out.append(f'<a href="{html.escape(safe)}">{html.escape(label)}</a>')
        else:
            out.append(f"<strong>{html.escape(bold)}</strong>")
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def to_html(markdown: str) -> str:
    """The body HTML of one Markdown document."""
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    fence: list[str] | None = None

    def flush() -> None:
        if para:
            out.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in markdown.splitlines():
        if fence is not None:
            if line.startswith("```"):
                out.append(f"<pre><code>{html.escape(chr(10).join(fence))}</code></pre>")
                fence = None
            else:
                fence.append(line)
        elif line.startswith("```"):
            flush()
            fence = []
        elif m := re.match(r"^(#{1,6})\s+(.*)$", line):
            flush()
            level = len(m[1])
            out.append(f"<h{level}>{_inline(m[2])}</h{level}>")
        elif m := _LIST.match(line):
            if para:
                flush()
            items.append(m[1])
        elif not line.strip():
            flush()
        elif items and line.startswith((" ", "\t")):
            items[-1] += " " + line.strip()  # a list item's continuation line
        else:
            if items:
                flush()
            para.append(line.strip())
    if fence is not None:  # an unclosed fence still shows its text
        out.append(f"<pre><code>{html.escape(chr(10).join(fence))}</code></pre>")
    flush()
    return "\n".join(out)


def render(folder: Path, alertname: str) -> str:
    """The HTML page of one alert's runbook; RunbookNotFound when there is none."""
    path = folder / f"{alertname}.md"
    if not NAME.match(alertname) or not path.is_file():
        raise RunbookNotFound(alertname)
    return PAGE.format(title=html.escape(alertname), body=to_html(path.read_text("utf-8")))


def index(folder: Path) -> str:
    """An HTML list of every runbook."""
    names = sorted(p.stem for p in folder.glob("*.md") if NAME.match(p.stem))
    body = "<h1>Runbooks</h1><ul>" + "".join(
        f'<li><a href="/runbooks/{n}">{html.escape(n)}</a></li>' for n in names
    )
    return PAGE.format(title="Runbooks", body=body + "</ul>")
