"""Images for prompts: seeded synthetic pictures, and image files a trace row names.

``llm_workload("synthetic", images=N, image_size=(W, H), image_format="png"|"jpeg")``
sends ``N`` images with each request's user turn. Three properties matter to a
load test, and this module keeps each:

- **Deterministic.** Image ``p`` of sample ``i`` is a pure function of
  ``(workload seed, i, p, size, format)``: the same bytes in every process and
  every run, so a comparison replays the same requests.
- **Distinct per request.** Servers cache an image's processed form by a hash of
  its bytes (vLLM's multimodal processor cache, its prefix cache's image keys);
  one image reused by every request would be processed once and be free after.
  Every (sample, position) gets its own pixels.
- **Sized like a photo.** A server's cost depends on the size (resize, patches,
  image tokens) and on the encoded bytes (transfer, base64 and PNG/JPEG decoding),
  not on what the picture shows. Pure noise compresses not at all and flat colour
  to almost nothing; these pictures are seeded colour gradients under translucent
  shapes, softened, with mild grain, and encode about as photos do (512x512:
  PNG ~540 kB of 786 kB raw, JPEG ~45 kB at quality 85).

Cost. Drawing and encoding a whole 512x512 picture costs 40-50 ms as PNG (zlib is
most of it) and ~13 ms as JPEG; a sample is built on the load generator's event
loop just before its request is sent, so that would lag the schedule. Hence a
picture is a shared *base* plus a band of rows of its own: for each ``(seed,
size)`` there are :data:`POOL` bases (fewer for huge sizes, :func:`pool_size`),
drawn together once per process (the first sample pays, and the load generator
builds sample 0 before its clock starts); image ``(i, p)`` is a seeded pick of
those bases whose bottom :func:`band_rows` rows (1/32 of the height, at least 4)
are redrawn from its own seed: two shapes, fresh grain. A PNG's deflate stream is
compressed up to the band once per base and resumed from a copy of the compressor
(:meth:`zlib.Compress.copy`), so an image costs only its band's compression and
its base64; a JPEG is the base with the band pasted in, encoded whole (JPEG is
fast). Measured on the project's 2-core machine (Python 3.11, Pillow 13), one
sample with 2 images of 512x512, bases drawn: **PNG 2.3 ms (p90 3.4 ms), JPEG
1.5 ms**, against ~95 ms and ~26 ms drawing and encoding each picture whole; the
first sample of a size draws its bases, ~115 ms at 512x512 (2 s at 4096x4096,
where a sample of 2 then costs ~0.2 s, mostly base64 of 2x34 MB). Encoded
images are also kept in a byte-bounded LRU (:data:`ENCODED_CACHE_BYTES`), so a
sweep that resends the same sample indices rebuilds nothing (~15 us a sample).

Pillow is an optional dependency (``pip install "pytest-llmperf[images]"``),
imported only when a workload asks for images; without it that request is a
usage error that says so.
"""

from __future__ import annotations

import base64
import importlib
import io
import math
import os
import random
import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.base import ImageInput

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = [
    "DEFAULT_IMAGE_FORMAT",
    "DEFAULT_IMAGE_SIZE",
    "ENCODED_CACHE_BYTES",
    "IMAGE_FORMATS",
    "MAX_IMAGE_SIDE",
    "PILLOW_HINT",
    "POOL",
    "ImageSpec",
    "band_rows",
    "check_image_file",
    "image_file",
    "image_spec",
    "pool_size",
    "read_image_file",
    "require_pillow",
    "synthetic_image",
]

IMAGE_FORMATS: tuple[str, ...] = ("png", "jpeg")
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg"}
DEFAULT_IMAGE_SIZE = (512, 512)
DEFAULT_IMAGE_FORMAT = "png"
MAX_IMAGE_SIDE = 8192  # pixels; larger is no vision model's input (they tile or resize far below)
PILLOW_HINT = 'pip install "pytest-llmperf[images]"'

POOL = 4  # bases per (seed, size) (fewer for huge images: pool_size)
JPEG_QUALITY = 85  # what cameras and web pipelines commonly save at
PNG_LEVEL = 6  # zlib's (and Pillow's) default level
GRAIN = 10  # grain amplitude: +-GRAIN levels per channel (a photo's sensor noise, roughly)
BASES_CACHE_BYTES = 256 << 20  # decoded bases kept (raw RGB); at least the latest is kept
ENCODED_CACHE_BYTES = 64 << 20  # encoded images kept (base64 text)


# -- Pillow, optional ----------------------------------------------------------------


def require_pillow() -> ModuleType:
    """``PIL.Image``, or a usage error saying how to install it."""
    try:
        return importlib.import_module("PIL.Image")
    except ImportError:
        raise LlmPerfUsageError(
            f"images in prompts need Pillow, which is not installed: {PILLOW_HINT}"
        ) from None


# -- parameters ----------------------------------------------------------------------


@dataclass(frozen=True)
class ImageSpec:
    """How many images a sample carries, of what size and format.

    ``images(seed, index)`` are sample ``index``'s; ``describe()`` is what the
    report shows (nothing when ``count`` is 0).
    """

    count: int = 0
    size: tuple[int, int] = DEFAULT_IMAGE_SIZE
    format: str = DEFAULT_IMAGE_FORMAT

    def images(self, seed: int, index: int) -> tuple[ImageInput, ...]:
        return tuple(
            synthetic_image(seed, index, p, self.size, self.format) for p in range(self.count)
        )

    def describe(self) -> dict[str, Any]:
        if not self.count:
            return {}
        return {
            "images": self.count,
            "image_size": list(self.size),
            "image_format": self.format,
            "image_content": "seeded gradients, shapes and grain; distinct per request",
        }


def image_spec(images: Any = 0, image_size: Any = None, image_format: Any = None) -> ImageSpec:
    """The workload parameters ``images=``, ``image_size=``, ``image_format=`` checked.

    ``None`` for size or format means the default. Bad values are usage errors
    naming the parameter and the value; asking for images without Pillow is one
    too (at collection, not mid-run).
    """
    if isinstance(images, bool) or not isinstance(images, int) or images < 0:
        raise LlmPerfUsageError(f"images must be an integer >= 0, got {images!r}")
    size = _size(DEFAULT_IMAGE_SIZE if image_size is None else image_size)
    fmt = _format(DEFAULT_IMAGE_FORMAT if image_format is None else image_format)
    if images:
        require_pillow()
    return ImageSpec(images, size, fmt)


def _size(value: Any) -> tuple[int, int]:
    ok = (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and all(1 <= v <= MAX_IMAGE_SIDE for v in value)
    )
    if not ok:
        raise LlmPerfUsageError(
            f"image_size must be a (width, height) pair of integers from 1 to "
            f"{MAX_IMAGE_SIDE}, got {value!r}"
        )
    return (int(value[0]), int(value[1]))


def _format(value: Any) -> str:
    name = value.lower() if isinstance(value, str) else value
    if name == "jpg":
        name = "jpeg"
    if name not in IMAGE_FORMATS:
        raise LlmPerfUsageError(
            f"image_format must be one of {', '.join(map(repr, IMAGE_FORMATS))}, got {value!r}"
        )
    return str(name)


# -- caches --------------------------------------------------------------------------

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class _ByteLru(Generic[_K, _V]):
    """A thread-safe LRU bounded by the bytes its values hold (the latest always kept)."""

    def __init__(self, budget: int, weigh: Callable[[_V], int]) -> None:
        self.budget = budget
        self._weigh = weigh
        self._items: OrderedDict[_K, tuple[_V, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: _K, value: _V) -> None:
        weight = self._weigh(value)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._held -= old[1]
            self._items[key] = (value, weight)
            self._held += weight
            while self._held > self.budget and len(self._items) > 1:
                _, (_, freed) = self._items.popitem(last=False)
                self._held -= freed

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._held = 0


# -- drawing -------------------------------------------------------------------------


def pool_size(size: tuple[int, int]) -> int:
    """Bases drawn for images of ``size``: :data:`POOL`, fewer where that many would
    not fit the bases' cache twice over (huge images; a pool that cannot stay in the
    cache would be redrawn, seconds each, in the middle of a run). A function of
    ``size`` alone, so the images stay deterministic."""
    w, h = size
    per_base = 6 * w * h  # raw RGB, the PNG's shared head (about as big), the band
    return max(1, min(POOL, BASES_CACHE_BYTES // (2 * per_base)))


def band_rows(height: int) -> int:
    """Rows of an image of ``height`` that are its own (the rest is its base's)."""
    return min(height, max(4, math.ceil(height / 32)))


@dataclass(frozen=True)
class _Base:
    """A drawn base picture, and what every image made from it shares.

    ``clean`` is the base before its grain (its band is redrawn per image from
    this); ``picture`` the finished base (JPEG images paste their band into a
    copy); ``png_head`` the PNG up to the band's rows as finished chunks, with
    ``png_deflate`` the compressor stopped there (copied per image).
    """

    clean_band: Image
    picture: Image
    png_head: bytes
    png_deflate: Any  # zlib.Compress (not nameable as a type before Python 3.12)
    png_crc: int  # CRC-32 of b"IDAT" (the band's chunk type), precomputed

    @property
    def nbytes(self) -> int:
        w, h = self.picture.size
        return 3 * w * h + len(self.png_head) + 3 * w * self.clean_band.size[1]


_BASES: _ByteLru[tuple[int, int, int, int], _Base] = _ByteLru(BASES_CACHE_BYTES, lambda b: b.nbytes)
_ENCODED: _ByteLru[tuple[int, int, int, int, int, str], ImageInput] = _ByteLru(
    ENCODED_CACHE_BYTES, lambda i: len(i.data)
)
_BUILD_LOCK = threading.Lock()  # one thread draws a base; the others wait for it


def _grain(pil: ModuleType, rng: random.Random, size: tuple[int, int]) -> Image:
    """Seeded grain: every channel of every pixel in ``128 +- GRAIN``."""
    w, h = size
    noise = pil.frombytes("RGB", size, rng.randbytes(3 * w * h))
    lut = [128 - GRAIN + (2 * GRAIN * v) // 255 for v in range(256)] * 3
    result: Image = noise.point(lut)
    return result


def _with_grain(pil: ModuleType, picture: Image, rng: random.Random) -> Image:
    chops = importlib.import_module("PIL.ImageChops")
    result: Image = chops.add(picture, _grain(pil, rng, picture.size), 1.0, -128)
    return result


def _shape(draw: Any, rng: random.Random, box: tuple[int, int, int, int]) -> None:
    """One translucent ellipse, rectangle or triangle of a seeded colour inside ``box``."""
    left, top, right, bottom = box
    w, h = max(1, right - left), max(1, bottom - top)
    x0, y0 = left + rng.randrange(w), top + rng.randrange(h)
    x1 = x0 + rng.randint(max(1, w // 16), max(1, w // 3))
    y1 = y0 + rng.randint(max(1, h // 16), max(1, h // 3))
    colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256), rng.randint(90, 230))
    kind = rng.randrange(3)
    if kind == 0:
        draw.ellipse((x0, y0, x1, y1), fill=colour)
    elif kind == 1:
        draw.rectangle((x0, y0, x1, y1), fill=colour)
    else:
        corners = [(left + rng.randrange(w), top + rng.randrange(h)) for _ in range(3)]
        draw.polygon(corners, fill=colour)


def _draw_base(pil: ModuleType, rng: random.Random, size: tuple[int, int]) -> Image:
    """Colour gradients at seeded angles under a dozen translucent shapes, softened."""
    w, h = size
    channels = []
    for _ in range(3):
        ramp = pil.linear_gradient("L") if rng.random() < 0.6 else pil.radial_gradient("L")
        ramp = ramp.rotate(rng.uniform(0, 360), resample=pil.BILINEAR, fillcolor=rng.randrange(256))
        low, high = rng.randrange(0, 128), rng.randrange(128, 256)
        ramp = ramp.point([low + (high - low) * v // 255 for v in range(256)])
        channels.append(ramp.resize(size, pil.BILINEAR))
    picture = pil.merge("RGB", channels)
    draw = importlib.import_module("PIL.ImageDraw").Draw(picture, "RGBA")
    for _ in range(rng.randint(6, 14)):
        _shape(draw, rng, (0, 0, w, h))
    soft: Image = picture.filter(importlib.import_module("PIL.ImageFilter").BoxBlur(1))
    return soft


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _sub_filtered(pil: ModuleType, picture: Image) -> bytes:
    """``picture``'s rows as PNG scanlines with filter 1 (Sub: each byte less the
    same channel of the pixel to its left), which is how PNG compresses photos."""
    chops = importlib.import_module("PIL.ImageChops")
    w, h = picture.size
    left = chops.offset(picture, 1, 0)  # wraps: column 0 gets the last column ...
    left.paste((0, 0, 0), (0, 0, 1, h))  # ... which Sub takes as 0
    raw = chops.subtract_modulo(picture, left).tobytes()
    stride = 3 * w
    return b"".join(b"\x01" + raw[r * stride : (r + 1) * stride] for r in range(h))


def _base(seed: int, size: tuple[int, int], slot: int) -> _Base:
    """Base ``slot`` of ``(seed, size)``; a miss draws every missing base of the pool
    at once, so the first sample pays for all (before the clock starts) and the
    run's later samples find them drawn."""
    key = (seed, size[0], size[1], slot)
    found = _BASES.get(key)
    if found is not None:
        return found
    with _BUILD_LOCK:
        for other in range(pool_size(size)):
            if other != slot and _BASES.get((seed, size[0], size[1], other)) is None:
                _BASES.put((seed, size[0], size[1], other), _draw(seed, size, other))
        found = _BASES.get(key)
        if found is None:  # drawn last, so the LRU keeps it even at its smallest
            found = _draw(seed, size, slot)
            _BASES.put(key, found)
        return found


def _draw(seed: int, size: tuple[int, int], slot: int) -> _Base:
    pil = require_pillow()
    w, h = size
    rng = random.Random(f"llmperf-image:{seed}:{w}x{h}:base:{slot}")
    clean = _draw_base(pil, rng, size)
    picture = _with_grain(pil, clean, rng)
    top = h - band_rows(h)
    deflate = zlib.compressobj(PNG_LEVEL)
    head = deflate.compress(_sub_filtered(pil, picture.crop((0, 0, w, top)))) if top else b""
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    png_head = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
    if head:
        png_head += _png_chunk(b"IDAT", head)
    return _Base(
        clean_band=clean.crop((0, top, w, h)),
        picture=picture,
        png_head=png_head,
        png_deflate=deflate,
        png_crc=zlib.crc32(b"IDAT"),
    )


def synthetic_image(
    seed: int, index: int, position: int, size: tuple[int, int], format: str
) -> ImageInput:
    """Image ``position`` of sample ``index`` of a workload seeded ``seed``.

    The same arguments give the same bytes (in any process); any other
    ``(seed, index, position)`` gives other pixels. ``size`` and ``format``
    as :func:`image_spec` checks them.
    """
    w, h = size
    key = (seed, index, position, w, h, format)
    cached = _ENCODED.get(key)
    if cached is not None:
        return cached
    pil = require_pillow()
    rng = random.Random(f"llmperf-image:{seed}:{index}:{position}")
    base = _base(seed, size, rng.randrange(pool_size(size)))
    band = base.clean_band.copy()
    bw, bh = band.size
    draw = importlib.import_module("PIL.ImageDraw").Draw(band, "RGBA")
    for _ in range(2):
        _shape(draw, rng, (0, 0, bw, bh))
    band = _with_grain(pil, band, rng)
    # and one pixel of a seeded colour: tiny images (a band of a few pixels) differ too
    band.putpixel((rng.randrange(bw), rng.randrange(bh)), tuple(rng.randbytes(3)))
    if format == "png":
        deflate = base.png_deflate.copy()
        tail = deflate.compress(_sub_filtered(pil, band)) + deflate.flush()
        crc = zlib.crc32(tail, base.png_crc)
        body = (
            base.png_head
            + struct.pack(">I", len(tail))
            + b"IDAT"
            + tail
            + struct.pack(">I", crc)
            + _png_chunk(b"IEND", b"")
        )
    else:
        picture = base.picture.copy()
        picture.paste(band, (0, h - bh))
        out = io.BytesIO()
        picture.save(out, "JPEG", quality=JPEG_QUALITY)
        body = out.getvalue()
    made = ImageInput(
        data=base64.b64encode(body).decode("ascii"),
        media_type=MEDIA_TYPES[format],
        width=w,
        height=h,
        nbytes=len(body),
    )
    _ENCODED.put(key, made)
    return made


# -- files ---------------------------------------------------------------------------


def read_image_file(path: str | Path, *, where: str = "") -> ImageInput:
    """The PNG or JPEG file at ``path``, as sent: its bytes in base64, its size by Pillow.

    ``where`` prefixes the usage error a missing, unreadable or other-format
    file raises (e.g. ``"trace t.jsonl line 3"``).
    """
    prefix = f"{where}: " if where else ""
    try:
        body = Path(path).read_bytes()
    except OSError as exc:
        raise LlmPerfUsageError(
            f"{prefix}cannot read image {str(path)!r}: {exc.strerror or exc}"
        ) from None
    kind, width, height = _probe(io.BytesIO(body), path, prefix)
    return ImageInput(
        data=base64.b64encode(body).decode("ascii"),
        media_type=MEDIA_TYPES[kind],
        width=width,
        height=height,
        nbytes=len(body),
    )


def check_image_file(path: str | Path, *, where: str = "") -> tuple[int, int]:
    """``(width, height)`` of the PNG or JPEG file at ``path``, from its header only
    (cheap: a trace's files are checked when the workload is built, read when sent);
    otherwise the usage error :func:`read_image_file` would raise."""
    prefix = f"{where}: " if where else ""
    try:
        with open(path, "rb") as file:
            _, width, height = _probe(file, path, prefix)
    except OSError as exc:
        raise LlmPerfUsageError(
            f"{prefix}cannot read image {str(path)!r}: {exc.strerror or exc}"
        ) from None
    return width, height


def _probe(file: Any, path: str | Path, prefix: str) -> tuple[str, int, int]:
    pil = require_pillow()
    try:
        with pil.open(file) as opened:
            kind = str(opened.format or "").lower()
            width, height = opened.size
    except (OSError, ValueError, SyntaxError) as exc:  # Pillow's "cannot identify image file"
        raise LlmPerfUsageError(f"{prefix}{str(path)!r} is not an image ({exc})") from None
    if kind not in MEDIA_TYPES:
        raise LlmPerfUsageError(
            f"{prefix}image {str(path)!r} is {kind.upper() or 'of an unknown format'}; "
            "PNG and JPEG are sent"
        )
    return kind, int(width), int(height)


_FILES: _ByteLru[tuple[str, int, int], ImageInput] = _ByteLru(
    ENCODED_CACHE_BYTES, lambda i: len(i.data)
)


def image_file(path: str, *, where: str = "") -> ImageInput:
    """:func:`read_image_file`, kept in a byte-bounded LRU by path, size and mtime
    (a trace that names one file in many rows reads it once)."""
    try:
        stat = os.stat(path)
    except OSError:
        return read_image_file(path, where=where)  # raises, saying why
    key = (path, stat.st_size, stat.st_mtime_ns)
    found = _FILES.get(key)
    if found is None:
        found = read_image_file(path, where=where)
        _FILES.put(key, found)
    return found
