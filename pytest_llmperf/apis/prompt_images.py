"""Images in a prompt: their size read from the PNG/JPEG header, charged as prompt tokens.

A vision-language server turns each image into a run of placeholder tokens that
the language model prefills like text, so a larger image raises the prompt's
token count and with it the prefill time (TTFT). The simulator charges

    tokens(image) = ceil(W / P) * ceil(H / P)        (P = profile key ``image_token_px``, 28)

as Qwen2-VL does: 14-pixel patches merged 2 x 2, one token per 28 x 28 pixels
(without Qwen2-VL's resizing to its min/max pixel bounds). W and H come from the
image's own header — the PNG ``IHDR`` chunk, or a JPEG's start-of-frame segment —
read from the base64 data with the standard library only (no Pillow in the
simulator). Data that is not valid base64, not PNG or JPEG, a truncated header, or
a ``media_type`` that names another format than the bytes are is a 400 saying
which; an ``http(s)`` URL is refused (the simulator fetches nothing).

Each image's tokens are distinct strings derived from the image's data, so the
prefix cache hits for a prompt that repeats the same image (as vLLM hashes
multimodal inputs into its block hashes) and misses for another image.

:class:`PromptTokens` collects a prompt's text and image tokens in order; the
simulator's chat, Responses and Messages parsers (the server's half of each
format's module) all fill one.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass, field

from pytest_llmperf.tokens import split_tokens

__all__ = [
    "DEFAULT_IMAGE_TOKEN_PX",
    "ImageError",
    "ImageInfo",
    "PromptTokens",
    "decode_base64_image",
    "decode_data_url",
    "image_size",
    "image_tokens",
]

DEFAULT_IMAGE_TOKEN_PX = 28
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (baseline, progressive, lossless, ...): all of 0xC0-0xCF
# except DHT (0xC4), JPG (0xC8) and DAC (0xCC), which are not frames
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg"}


class ImageError(ValueError):
    """An image the simulator cannot read; the message says why (a 400 to the client)."""


@dataclass(frozen=True)
class ImageInfo:
    """One decoded image: its format, pixel size, byte count and a content key."""

    format: str  # "png" | "jpeg"
    width: int
    height: int
    nbytes: int
    key: int  # hash of the base64 text: equal images, equal prompt tokens

    def tokens(self, px: int = DEFAULT_IMAGE_TOKEN_PX) -> int:
        """The prompt tokens this image is charged (:func:`image_tokens`)."""
        return image_tokens(self.width, self.height, px)


def image_tokens(width: int, height: int, px: int = DEFAULT_IMAGE_TOKEN_PX) -> int:
    """``ceil(width / px) * ceil(height / px)``: one token per ``px`` x ``px`` tile."""
    return -(-width // px) * -(-height // px)


def image_size(raw: bytes) -> tuple[str, int, int]:
    """``(format, width, height)`` of PNG or JPEG bytes, from the header only."""
    if raw.startswith(_PNG_SIGNATURE):
        # signature (8), IHDR length (4), "IHDR" (4), width (4), height (4)
        if len(raw) < 24 or raw[12:16] != b"IHDR":
            raise ImageError("PNG image is truncated before its IHDR header")
        width, height = struct.unpack(">II", raw[16:24])
        return ("png", *_checked(width, height, "PNG"))
    if raw.startswith(b"\xff\xd8"):
        return ("jpeg", *_jpeg_size(raw))
    raise ImageError("image data is neither PNG nor JPEG (the simulator reads only those)")


def _checked(width: int, height: int, fmt: str) -> tuple[int, int]:
    if width < 1 or height < 1:
        raise ImageError(f"{fmt} image has an empty size ({width}x{height})")
    return width, height


def _jpeg_size(raw: bytes) -> tuple[int, int]:
    """Walk the JPEG's marker segments to its start-of-frame: height, width there."""
    i = 2
    n = len(raw)
    while i + 4 <= n:
        if raw[i] != 0xFF:
            raise ImageError(f"JPEG image is corrupt: no marker at byte {i}")
        marker = raw[i + 1]
        if marker == 0xFF:  # fill byte before a marker
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # TEM, RSTn: no length
            i += 2
            continue
        if marker in (0xD9, 0xDA):  # EOI, or SOS (the scan) before any frame header
            break
        (length,) = struct.unpack(">H", raw[i + 2 : i + 4])
        if marker in _SOF_MARKERS:
            if i + 9 > n:
                break
            height, width = struct.unpack(">HH", raw[i + 5 : i + 9])
            return _checked(width, height, "JPEG")
        i += 2 + length
    raise ImageError("JPEG image has no frame header (SOF) before its data")


def decode_base64_image(data: str, media_type: str | None = None) -> ImageInfo:
    """The :class:`ImageInfo` of base64 ``data``; ``media_type`` (``image/png``, …),
    when given, must name the format the bytes are."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageError(f"image data is not valid base64 ({exc})") from None
    fmt, width, height = image_size(raw)
    if media_type is not None:
        declared = media_type.lower()
        if declared == "image/jpg":
            declared = "image/jpeg"
        if declared != _MEDIA_TYPES[fmt]:
            raise ImageError(
                f"image media type {media_type!r} does not match its data, which is {fmt.upper()}"
            )
    return ImageInfo(fmt, width, height, len(raw), hash(data))


def decode_data_url(url: str) -> ImageInfo:
    """The :class:`ImageInfo` of a ``data:image/...;base64,...`` URL."""
    if not url.startswith("data:"):
        scheme = url.split(":", 1)[0] if ":" in url else url[:20]
        raise ImageError(
            f"image URL scheme {scheme!r} is not served: the simulator fetches no images, "
            "send a data: URL (data:image/png;base64,...)"
        )
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        raise ImageError("image data: URL must be base64 (data:image/png;base64,...)")
    media_type = head[: -len(";base64")] or None
    return decode_base64_image(data, media_type)


@dataclass
class PromptTokens:
    """A prompt's tokens in order — text by the simulator's tokenizer, each image as
    its :func:`image_tokens` placeholder tokens — with the image count and tokens."""

    image_px: int = DEFAULT_IMAGE_TOKEN_PX
    tokens: list[str] = field(default_factory=list)
    images: int = 0
    image_tokens: int = 0

    def add_text(self, text: str) -> None:
        self.tokens.extend(split_tokens(text))

    def add_image(self, info: ImageInfo) -> None:
        n = info.tokens(self.image_px)
        key = info.key
        self.tokens.extend(f"\x00img{key:x}:{k}" for k in range(n))
        self.images += 1
        self.image_tokens += n
