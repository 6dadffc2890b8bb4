"""Images from a submission (a Markdown cell's attachments, a code cell's image outputs) as the
instructor's browser will decode them in the feedback page and the formgrader: decoded here first,
under a cap on pixels read from the header before anything is decoded, and written again (a PNG
from its image chunks alone, a JPEG or GIF by Pillow, the first frame of an animation), so that
what reaches a page is an image of at most MAX_PIXELS that decodes; anything else is dropped and the page shows the image's alt text (an
attachment) or a line saying it was left out (an output).

A 759 KiB PNG can declare 80,000 x 80,000 pixels: 25 GB once a browser decodes it."""

from __future__ import annotations

import base64
import binascii
import io
import zlib

from PIL import Image

MAX_PIXELS = 16_000_000        # 4000 x 4000: a figure at any resolution a lesson draws
MAX_SIDE = 16_384
SIGNATURES = {"image/png": (b"\x89PNG\r\n\x1a\n",), "image/jpeg": (b"\xff\xd8\xff",), "image/gif": (b"GIF87a", b"GIF89a")}
FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF"}


def image_problem(mime: str, raw: bytes) -> str | None:
    """Why the image `raw` is not shown (None when it is fine to decode): not the format it says,
    or more pixels than the cap, read from its header only."""
    if mime not in SIGNATURES or not raw.startswith(SIGNATURES[mime]):
        return f"not a {mime} image"
    try:
        with Image.open(io.BytesIO(raw), formats=[FORMATS[mime]]) as im:
            width, height = im.size
    except Image.DecompressionBombError:
        return "an image of more pixels than Pillow opens"
    except (OSError, ValueError, SyntaxError) as err:   # Pillow's ways of saying "not an image"
        return f"not a readable image ({type(err).__name__})"
    if width * height > MAX_PIXELS or max(width, height) > MAX_SIDE:
        return f"an image of {width} x {height} pixels (at most {MAX_PIXELS:,} are shown)"
    return None


PNG_KEPT = (b"IHDR", b"PLTE", b"tRNS", b"IDAT", b"IEND")   # what a PNG's pixels are; the rest is dropped


def _png_rebuilt(raw: bytes) -> bytes | None:
    """A PNG written again from its image chunks alone, each checked (length, CRC, IHDR first and
    once): text, metadata, animation (APNG) and anything after IEND dropped; the compressed pixels
    are kept as they are, to be decoded in full by `reencoded` before they are shown."""
    out, at, seen = [raw[:8]], 8, []
    while at + 12 <= len(raw):
        length = int.from_bytes(raw[at:at + 4], "big")
        kind, data = raw[at + 4:at + 8], raw[at + 8:at + 8 + length]
        crc = raw[at + 8 + length:at + 12 + length]
        if len(data) != length or len(crc) != 4 or zlib.crc32(kind + data).to_bytes(4, "big") != crc:
            return None
        at += 12 + length
        if kind == b"IHDR" and seen or kind != b"IHDR" and not seen:
            return None
        seen.append(kind)
        if kind in PNG_KEPT:
            out.append(raw[at - 12 - length:at])
        if kind == b"IEND":
            return b"".join(out) if b"IDAT" in seen else None
    return None


def reencoded(mime: str, raw: bytes) -> bytes | None:
    """`raw` decoded in full and written again (the first frame of an animation), or None where
    image_problem refuses it or it does not decode. A PNG is written again from its image chunks
    (_png_rebuilt, a tenth of the time of encoding it again: a figure a cell draws costs a few
    milliseconds), a JPEG or GIF encoded again by Pillow."""
    if image_problem(mime, raw):
        return None
    if mime == "image/png":
        raw = _png_rebuilt(raw)
        if raw is None:
            return None
        try:
            with Image.open(io.BytesIO(raw), formats=["PNG"]) as im:
                im.load()
        except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError, MemoryError):
            return None
        return raw
    try:
        with Image.open(io.BytesIO(raw), formats=[FORMATS[mime]]) as im:
            im.load()
            out = io.BytesIO()
            if mime == "image/jpeg" and im.mode not in ("RGB", "L", "CMYK"):
                im = im.convert("RGB")
            im.save(out, FORMATS[mime])
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError, MemoryError):
        return None
    return out.getvalue()


def reencoded_b64(mime: str, data, max_bytes: int) -> str | None:
    """A notebook's base64 image (str, or a list of lines) re-encoded, within `max_bytes` before
    and after; None where it is not kept."""
    if isinstance(data, list) and all(isinstance(d, str) for d in data):
        data = "".join(data)
    if not isinstance(data, str) or len(data) > (max_bytes * 4) // 3 + 8:
        return None
    try:
        raw = base64.b64decode(data.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    if len(raw) > max_bytes:
        return None
    image = reencoded(mime, raw)
    if image is None or len(image) > max_bytes:
        return None
    return base64.b64encode(image).decode("ascii")
