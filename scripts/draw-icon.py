"""Draws media/icon.png (128x128) from the shapes of src/access/agent-bridge.svg: white strokes
on a rounded blue tile, anti-aliased by 4x4 supersampling. Pure Python (zlib), no image tools."""
import math
import struct
import zlib
from pathlib import Path

SIZE, SUB, UNIT = 128, 4, 24  # pixels, samples per pixel side, the SVG's viewBox
TILE, INK = (0x1F, 0x5F, 0x8B), (0xFF, 0xFF, 0xFF)
HALF = 0.75  # half the stroke width, in viewBox units
DY = 0.5  # the glyph sits half a unit lower, centred on the tile


def rounded_box(x, y, x0, y0, x1, y1, r):
    """Signed distance to a rounded rectangle (negative inside)."""
    cx, cy, hx, hy = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2 - r, (y1 - y0) / 2 - r
    qx, qy = abs(x - cx) - hx, abs(y - cy) - hy
    return math.hypot(max(qx, 0), max(qy, 0)) + min(max(qx, qy), 0) - r


def segment(x, y, ax, ay, bx, by):
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy)))
    return math.hypot(x - ax - t * dx, y - ay - t * dy)


SEGMENTS = [(12, 8, 12, 4.5), (10, 4.5, 14, 4.5), (3, 12, 3, 15), (21, 12, 21, 15)]


def sample(x, y):
    """(in the tile, on the ink) at a point of the viewBox."""
    if rounded_box(x, y, 0, 0, 24, 24, 4.5) > 0:
        return False, False
    gy = y - DY
    ink = abs(rounded_box(x, gy, 5, 8, 19, 19, 2)) <= HALF
    ink = ink or any(math.hypot(x - cx, gy - 13) <= 1.3 + HALF for cx in (9.5, 14.5))
    ink = ink or any(segment(x, gy, *s) <= HALF for s in SEGMENTS)
    return True, ink


def pixel(px, py):
    tile = ink = 0
    for sy in range(SUB):
        for sx in range(SUB):
            t, i = sample((px + (sx + 0.5) / SUB) * UNIT / SIZE, (py + (sy + 0.5) / SUB) * UNIT / SIZE)
            tile += t
            ink += i
    n = SUB * SUB
    if not tile:
        return (0, 0, 0, 0)
    k = ink / tile
    rgb = tuple(round(a * (1 - k) + b * k) for a, b in zip(TILE, INK))
    return (*rgb, round(255 * tile / n))


def png(rows):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(v for p in row for v in p) for row in rows)
    header = struct.pack(">IIBBBBB", SIZE, SIZE, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


if __name__ == "__main__":
    out = Path(__file__).resolve().parent.parent / "media" / "icon.png"
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(png([[pixel(x, y) for x in range(SIZE)] for y in range(SIZE)]))
    print(out)
