"""The HTML coverage page rendered in headless Chromium: not blank, and its
numbers (read back from the DOM Chromium built) equal the JSON report's."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_tree

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
KEYS = "CPU,CUDA,MPS,Meta"


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (scripts/setup installs Debian's chromium)")
    cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def pages(tree, tmp_path_factory, request):
    """The html and json reports of the same DB, written by the CLI."""
    from torchtalk import api
    from torchtalk.cli import main

    try:
        db = Path(request.getfixturevalue("real_db"))
    except pytest.FixtureLookupError:
        db = tmp_path_factory.mktemp("html_db") / "ops.duckdb"
        api.index(tree, db=db, layers=["ops"])
    out = tmp_path_factory.mktemp("html")
    for fmt in ("html", "json"):
        code = main(["report", "coverage", "--db", str(db), "--keys", KEYS, "--quiet",
                     "--format", fmt, "-o", str(out / f"cov.{fmt}")])
        assert code == 0
    return out


class _Numbers(HTMLParser):
    """Collects the summary cells (data-key + data-field) and the tag-chart labels."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str], str] = {}
        self.tags: dict[tuple[str, str], int] = {}
        self._open: tuple[str, str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td" and "data-field" in a:
            self._open = (a["data-key"], a["data-field"])
        elif tag == "text" and "data-covered" in a:
            self.tags[(a["data-key"], a["data-tag"])] = int(a["data-covered"])

    def handle_data(self, data):
        if self._open is not None:
            self.cells[self._open] = self.cells.get(self._open, "") + data

    def handle_endtag(self, tag):
        if tag == "td":
            self._open = None


def test_dom_numbers_equal_json(pages, tmp_path):
    proc = chromium(tmp_path, "--dump-dom", (pages / "cov.html").as_uri())
    assert proc.returncode == 0, proc.stderr[-1000:]
    dom = _Numbers()
    dom.feed(proc.stdout)
    data = json.loads((pages / "cov.json").read_text())
    assert [k["key"] for k in data["keys"]] == KEYS.split(",")
    for k in data["keys"]:
        key = k["key"]
        core = next(t for t in k["tags"] if t["tag"] == "core")
        want = {
            "covered": k["covered"], "total": k["total"], "core_covered": core["covered"],
            "core_total": core["total"], "missing": len(k["missing"]),
            "missing_with_decomp": k["missing_with_decomp"],
            **{p: k["by_path"].get(p, 0) for p in ("direct", "delegate", "structured_meta", "composite")},
        }
        assert {f: int(dom.cells[(key, f)]) for f in want} == want, key
        assert dom.cells[(key, "share")] == f"{100 * k['covered'] / k['total']:.1f}%"
        assert {t["tag"]: dom.tags[(key, t["tag"])] for t in k["tags"]} == {t["tag"]: t["covered"] for t in k["tags"]}
    assert dom.cells[("MPS", "core_covered")] == "182"  # col2im registered by hand (MPSFallback.mm)


def test_screenshot_is_not_blank(pages, tmp_path):
    shot = tmp_path / "shot.png"
    proc = chromium(tmp_path, "--window-size=1400,1000", f"--screenshot={shot}", (pages / "cov.html").as_uri())
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-1000:]
    width, height, pixels = read_png(shot.read_bytes())
    assert (width, height) == (1400, 1000)
    colors = {}
    for px in pixels:
        colors[px] = colors.get(px, 0) + 1
    white = colors.get((255, 255, 255), 0)
    assert len(colors) >= 8, "too few colours: a blank page"
    assert white < 0.95 * width * height, "the page is almost all white"
    # the chart and heatmap colours are on screen: bars (#2da44e) and missing cells (#cf222e)
    assert colors.get((0x2D, 0xA4, 0x4E), 0) > 1000 and colors.get((0xCF, 0x22, 0x2E), 0) > 1000


def read_png(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) to RGB pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, ctype, _, _, interlace = header
    assert depth == 8 and ctype in (2, 6) and interlace == 0, header
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev, pixels = bytearray(stride), []
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        pixels += [tuple(line[i : i + 3]) for i in range(0, stride, bpp)]
        prev = line
    return width, height, pixels
