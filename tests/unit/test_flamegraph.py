"""The flame graph ``lab bench store --profile`` draws from py-spy's raw stacks
(lab.bench.store_paths.flamegraph): widths are inclusive samples, callees sit on their caller,
names are escaped, too-narrow frames are left out."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from lab.bench.store_paths.flamegraph import FRAME_PX, parse, svg

SVG = "{http://www.w3.org/2000/svg}"
RAW = """\
proc;main;batch_read;_decode 6
proc;main;batch_read 2
proc;main;execute <cassandra & co> 2
no count here
"""


def _frames(doc: str) -> dict[str, tuple[float, float, float]]:
    """name -> (x, y, width) of each frame, read back from the SVG."""
    out = {}
    for g in ET.fromstring(doc).iter(f"{SVG}g"):
        name = re.match(r"(.*): \d+ samples", g.find(f"{SVG}title").text).group(1)
        rect = g.find(f"{SVG}rect")
        out[name] = (float(rect.get("x")), float(rect.get("y")), float(rect.get("width")))
    return out


def test_parse_counts_inclusive_samples_and_skips_lines_without_a_count():
    root, total = parse(RAW)
    assert total == root.samples == 10
    main = root.children["proc"].children["main"]
    assert main.samples == 10 and main.children["batch_read"].samples == 8
    assert main.children["batch_read"].children["_decode"].samples == 6


def test_widths_are_samples_and_callees_stand_on_their_caller():
    doc = svg(RAW, title="grouped <x>", width_px=1000)
    frames = _frames(doc)
    assert set(frames) == {"proc", "main", "batch_read", "_decode", "execute <cassandra & co>"}
    x, y, w = frames["main"]
    assert (x, w) == (0, 1000)
    bx, by, bw = frames["batch_read"]
    ex, ey, ew = frames["execute <cassandra & co>"]
    assert bw == 800 and ew == 200 and by == ey == y - FRAME_PX  # one level above main
    assert bx == 0 and ex == 800  # callees side by side, in name order
    dx, dy, dw = frames["_decode"]
    assert (dx, dw, dy) == (0, 600, by - FRAME_PX)
    assert "grouped &lt;x&gt; (10 samples)" in doc
    assert "execute &lt;cassandra &amp; co&gt;: 2 samples (20.00%)" in doc


def test_frames_narrower_than_the_minimum_are_left_out():
    frames = _frames(svg("a;wide 100000\na;thin 1\n", title="t", width_px=100))
    assert "wide" in frames and "thin" not in frames  # 0.001 px
    assert _frames(svg("", title="empty")) == {}
