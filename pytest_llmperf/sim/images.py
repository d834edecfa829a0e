"""Images in a prompt, charged as prompt tokens: moved to
:mod:`pytest_llmperf.apis.prompt_images` (every format's parser fills a
:class:`PromptTokens`); the names stay importable from here."""

from __future__ import annotations

from ..apis.prompt_images import (
    DEFAULT_IMAGE_TOKEN_PX,
    ImageError,
    ImageInfo,
    PromptTokens,
    decode_base64_image,
    decode_data_url,
    image_size,
    image_tokens,
)

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
