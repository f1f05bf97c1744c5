"""HTML helpers of the lab's result pages (the calibration report, the comparison of two runs).

More: docs/measure-internals.md.
"""
from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lab.results.units import fmt

__all__ = ["esc", "fmt", "page", "table", "embedded_png", "name_html"]

PAGE_MAX_WIDTH_PX = 1240
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.2em auto;padding:0 1em;color:#222;max-width:%dpx;box-sizing:border-box}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}h3{margin-bottom:.3em}
table{border-collapse:collapse;margin:.5em 0;max-width:100%%}td,th{padding:4px 8px;text-align:left;vertical-align:top}
table.wide{width:100%%;table-layout:fixed}td{overflow-wrap:break-word}
tr:nth-child(even){background:#f5f5f5}th{background:#e8e8e8}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}th.num{white-space:normal}
.seg{white-space:nowrap}
.changed{background:#fff3c4;font-weight:bold}.guarded{color:#8a5a00}
.banner{padding:.8em 1em;margin:1em 0;border-radius:4px}
.fail{background:#fde2e2;border:1px solid #d33}.ok{background:#e3f6e3;border:1px solid #3a3}
.quick{background:#fff4d6;border:2px solid #d90}.warn{background:#fff4d6;border:1px solid #d90}
.conf-high{color:#17701a;font-weight:bold}.conf-medium{color:#8a6d00;font-weight:bold}
.conf-low,.conf-inconclusive{color:#b33;font-weight:bold}.conf-none{color:#888}
.agree{color:#17701a}.disagree{color:#b33;font-weight:bold}
.sig{font-weight:bold;color:#b33}
img.thumb{width:100%%;border:1px solid #ddd;cursor:zoom-in}img.full{max-width:100%%;border:1px solid #ddd}
figure{margin:.4em 0;display:inline-block;vertical-align:top;width:100%%}figcaption{font-size:.85em}
.figures{display:grid;grid-template-columns:1fr 1fr;gap:.6em 1.2em}.figures figure{margin:0}
.evidence{display:flex;gap:1.2em;align-items:flex-start}.evidence .kv-side{flex:0 0 44%%;font-size:.9em}
.evidence .fig-side{flex:1 1 auto;min-width:0}
.lightbox{display:none}
.lightbox:target{display:flex;position:fixed;inset:0;z-index:10;background:rgba(0,0,0,.85);
  align-items:center;justify-content:center;flex-direction:column}
.lightbox:target img{max-width:96vw;max-height:88vh;background:#fff}
.lightbox a{color:#fff}
pre{background:#f7f7f7;padding:.6em;overflow:auto;white-space:pre-wrap}
small{color:#666}.md p{margin:.4em 0}.md ul{margin:.3em 0}
td.evidence{font-size:.9em}table.kv td{padding:1px 8px 1px 0;border:0}table.kv tr{background:none}
.caveat{font-size:.85em;color:#6b4b00;background:#fffaf0;border-left:3px solid #d90;padding:2px 6px;margin:3px 0}
.caveats{margin:.5em 0}
""" % (PAGE_MAX_WIDTH_PX,)
# The one script of a page: Escape closes an open lightbox (it is a :target; clearing the hash closes it).
# history.replaceState alone does not reset :target in Chromium: the fragment navigation does.
_SCRIPT = ("document.addEventListener('keydown',function(e){if(e.key==='Escape'&&location.hash.length>1){"
           "location.hash='';history.replaceState(null,'',location.pathname+location.search);}});")


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{esc(title)}</title>"
            f"<style>{_CSS}</style></head><body>{body}<script>{_SCRIPT}</script></body></html>\n")


def name_html(name: str) -> str:
    """A name with underscores (``batch_read_range_min_density``) that wraps only after an
    underscore, never inside a part."""
    parts = str(name).split("_")
    segs = [p + ("_" if i < len(parts) - 1 else "") for i, p in enumerate(parts)]
    return "<wbr>".join(f"<span class='seg'>{esc(s)}</span>" for s in segs if s)


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, raw: bool = True, css: str = "") -> str:
    """``rows`` of already-escaped HTML cells (``raw``) or plain values (escaped here); a header
    given as ``<th ...>`` (a numeric column's ``<th class='num'>``) is used as it is."""
    head = "".join(h if str(h).startswith("<th") else f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(c if raw and str(c).startswith("<td") else f"<td>{c if raw else esc(c)}</td>"
                                    for c in row) + "</tr>" for row in rows)
    cls = f" class='{css}'" if css else ""
    return f"<table{cls}><tr>{head}</tr>{body}</table>"


def key_values(pairs: Iterable[tuple[str, str]]) -> str:
    """A small two-column table of (label, already-escaped HTML) pairs: evidence, settings."""
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{v}</td></tr>" for k, v in pairs)
    return f"<table class='kv'>{rows}</table>" if rows else ""


def embedded_png(path: Path, *, css: str = "thumb", alt: str = "") -> str:
    if not path.is_file():
        return f"<small>missing figure {esc(path.name)}</small>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"<img class='{css}' alt='{esc(alt or path.name)}' src='data:image/png;base64,{data}'>"


def _anchor(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")


def figure(path: Path, *, href: str, caption: str = "", alt: str = "", anchor: str | None = None) -> str:
    """A figure at its column's width that opens full size in a lightbox (``#<anchor>``; "close",
    a click or Escape closes it), a "full size" link to the PNG file (``href``, relative to the
    page), and the caption. The image is embedded once and shown twice."""
    if not path.is_file():
        return f"<small>missing figure {esc(path.name)}</small>"
    ident = _anchor(anchor or f"fig-{href}")
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    src = f"data:image/png;base64,{data}"
    alt = esc(alt or path.name)
    return (f"<figure><a href='#{ident}' title='open full size'><img class='thumb' alt='{alt}' src='{src}'></a>"
            f"<figcaption><small>{esc(caption or href)} · <a href='{esc(href)}'>full size</a></small></figcaption>"
            f"</figure><div class='lightbox' id='{ident}'><a href='#_' title='close'>"
            f"<img alt='{alt}' src='{src}'></a><a href='#_'>close ✕</a></div>")


_MD_SPECIAL = re.compile(r"([\\`*\[\]<>&])")  # what could make markup: code, emphasis, links, HTML


def md_text(value: Any) -> str:
    """A user's string (a name, a path) as Markdown text: every character Markdown or HTML would
    act on is escaped, so it renders as written and never as markup."""
    return _MD_SPECIAL.sub(r"\\\1", str(value)).replace("\n", " ")


def md_code(value: Any) -> str:
    """A user's string as a Markdown code span that holds any text (backticks included)."""
    text = str(value).replace("\n", " ")
    if "`" not in text:
        return f"`{text or ' '}`"
    fence = "`" * (max(len(r) for r in re.findall(r"`+", text)) + 1)
    return f"{fence} {text} {fence}"


def markdown(text: str | None) -> str:
    """The notebooks' conclusions (Markdown) as HTML; raw HTML in them is escaped."""
    if not text:
        return ""
    import mistune

    return "<div class='md'>" + mistune.create_markdown(escape=True)(str(text)) + "</div>"
