"""HTML helpers of the lab's result pages (the calibration report, the comparison of two runs).

A page is one self-contained file: one stylesheet inlined, figures embedded as base64 PNGs, so
it renders when opened from disk or copied elsewhere. Cells are escaped here (:func:`esc`);
numbers are formatted one way (:func:`fmt`, from :mod:`lab.results.units`, the lab's one
formatting of numbers and units).
"""
from __future__ import annotations

import base64
import html
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lab.results.units import fmt

__all__ = ["esc", "fmt", "page", "table", "embedded_png"]

THUMB_WIDTH_PX = 320
_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:4px 10px;text-align:left;vertical-align:top}
tr:nth-child(even){background:#f5f5f5}th{background:#e8e8e8}
.num{text-align:right;font-variant-numeric:tabular-nums}
.changed{background:#fff3c4;font-weight:bold}.guarded{color:#8a5a00}
.banner{padding:.8em 1em;margin:1em 0;border-radius:4px}
.fail{background:#fde2e2;border:1px solid #d33}.ok{background:#e3f6e3;border:1px solid #3a3}
.conf-high{color:#17701a}.conf-medium{color:#8a6d00}.conf-low{color:#b33}.conf-none{color:#888}
.sig{font-weight:bold;color:#b33}
img.thumb{width:%dpx;border:1px solid #ddd}img.full{max-width:100%%;border:1px solid #ddd}
pre{background:#f7f7f7;padding:.6em;overflow:auto;white-space:pre-wrap}
small{color:#666}td.evidence{min-width:22em;max-width:34em;overflow-wrap:anywhere;font-size:.9em}
""" % THUMB_WIDTH_PX


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{_CSS}</style></head><body>{body}</body></html>\n")


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, raw: bool = True) -> str:
    """``rows`` of already-escaped HTML cells (``raw``) or plain values (escaped here)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(c if raw and str(c).startswith("<td") else f"<td>{c if raw else esc(c)}</td>"
                                    for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def embedded_png(path: Path, *, css: str = "thumb", alt: str = "") -> str:
    if not path.is_file():
        return f"<small>missing figure {esc(path.name)}</small>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"<img class='{css}' alt='{esc(alt or path.name)}' src='data:image/png;base64,{data}'>"
