"""A flame graph (SVG) drawn from collapsed stacks, py-spy's ``raw`` output: one line per distinct
stack, ``root;caller;...;leaf <samples>``.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import hashlib
from html import escape

WIDTH_PX = 1200
FRAME_PX = 16  # height of one stack level
HEADER_PX = 36
FONT_PX = 11
CHAR_PX = 6.5  # the width of one character at FONT_PX (monospace)
MIN_FRAME_PX = 0.1


class _Node:
    __slots__ = ("samples", "children")

    def __init__(self) -> None:
        self.samples = 0
        self.children: dict[str, _Node] = {}


def parse(collapsed: str) -> tuple[_Node, int]:
    """The call tree of collapsed stacks (each node's inclusive samples) and the samples in all;
    lines without a trailing count are skipped."""
    root, total = _Node(), 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        node = root
        for frame in stack.split(";"):
            node = node.children.setdefault(frame, _Node())
            node.samples += n
    root.samples = total
    return root, total


def _color(name: str) -> str:
    """A warm colour fixed by the function's name (so a function keeps its colour across graphs)."""
    h = hashlib.blake2b(name.encode(), digest_size=3).digest()
    return f"rgb({205 + h[0] % 50},{80 + h[1] % 150},{h[2] % 55})"


def _label(name: str, width_px: float) -> str:
    fits = int((width_px - 6) / CHAR_PX)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[:fits - 2] + ".."


def svg(collapsed: str, *, title: str, width_px: int = WIDTH_PX) -> str:
    """The flame graph of ``collapsed`` (py-spy raw text) as an SVG document."""
    root, total = parse(collapsed)
    per_sample = width_px / total if total else 0.0
    frames: list[tuple[int, float, float, str, int]] = []  # depth, x, width (px), name, samples
    todo = [(root, 0, 0.0)]
    while todo:
        node, depth, x = todo.pop()
        for name in sorted(node.children):
            child = node.children[name]
            w = child.samples * per_sample
            if w >= MIN_FRAME_PX:
                frames.append((depth, x, w, name, child.samples))
                todo.append((child, depth + 1, x))
            x += w
    depth_max = max((f[0] for f in frames), default=-1) + 1
    height = HEADER_PX + depth_max * FRAME_PX + 4
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width_px}" height="{height}" '
           f'font-family="monospace" font-size="{FONT_PX}">',
           '<rect width="100%" height="100%" fill="#fdfdf6"/>',
           f'<text x="{width_px / 2}" y="20" text-anchor="middle" font-size="{FONT_PX + 4}">'
           f'{escape(title)} ({total} samples)</text>']
    for depth, x, w, name, samples in frames:
        y = height - 4 - (depth + 1) * FRAME_PX
        tip = escape(f"{name}: {samples} samples ({100 * samples / total:.2f}%)")
        out.append(f'<g><title>{tip}</title><rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{FRAME_PX - 1}" '
                   f'fill="{_color(name)}" rx="2"/>')
        label = _label(name, w)
        if label:
            out.append(f'<text x="{x + 3:.2f}" y="{y + FRAME_PX - 4}">{escape(label)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
