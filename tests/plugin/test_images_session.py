"""Issue 26, done when (simulator): a chat run with two 512x512 images per request reports
the image tokens and bytes, and larger images raise TTFT as the simulator's documented
model says (docs/simulator.md: ceil(W/28) * ceil(H/28) tokens per image; the ``fixed``
profile adds ``ttft_per_image_token_ms`` = 0.02 ms per image token to its 20 ms TTFT)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

# Loaded here, before any in-process session: pytester forgets the modules a session
# imports, and Pillow's format registry must outlive the first session that loads it.
pytest.importorskip("PIL.Image").init()

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=32, output_tokens=4, requests=30,
                          images=2, image_size=({w}, {h}), image_format="{fmt}")
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_pics(llm_loadgen):
    await llm_loadgen.run()
"""


def image_tokens(w: int, h: int) -> int:
    return math.ceil(w / 28) * math.ceil(h / 28)


def run(pytester: pytest.Pytester, tmp_path: Path, w: int, h: int, fmt: str) -> dict:
    pytester.makepyfile(test_pics=SUITE.format(w=w, h=h, fmt=fmt))
    report = tmp_path / f"{w}x{h}.json"
    result = pytester.runpytest("--llm-endpoint=sim:fixed", f"--llm-json={report}")
    result.assert_outcomes(passed=1)
    return json.loads(report.read_text())["tests"][0]["runs"][0]


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_two_images_per_request_are_reported_with_their_tokens_and_bytes(
    pytester: pytest.Pytester, tmp_path: Path, fmt: str
) -> None:
    got = run(pytester, tmp_path, 512, 512, fmt)
    m, lengths = got["metrics"], got["token_lengths"]
    assert got["counts"]["completed"] == 30
    assert m["images"] == 60
    per_image = m["image_bytes"] / 60
    assert (200_000 if fmt == "png" else 10_000) < per_image < 800_000, per_image
    # the server counted the images' tokens in usage.prompt_tokens, the workload its text
    assert lengths["image_tokens_mean"] == pytest.approx(2 * image_tokens(512, 512), abs=1)
    assert not lengths["warnings"], lengths["warnings"]


def test_larger_images_raise_ttft_by_the_documented_model(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    small = run(pytester, tmp_path, 256, 256, "jpeg")
    large = run(pytester, tmp_path, 1344, 1344, "jpeg")
    added_ms = 0.02 * 2 * image_tokens(1344, 1344)  # 92.16 ms for 4,608 image tokens
    assert large["token_lengths"]["image_tokens_mean"] == pytest.approx(
        2 * image_tokens(1344, 1344), abs=1
    )
    # The server waits 20 ms + 0.02 ms per image token before the first token: no request
    # can see it sooner (a lower bound, whatever the machine's load adds on top).
    floor_ms = 20.0 + added_ms
    assert large["metrics"]["ttft"]["p50"] >= floor_ms * 0.99, large["metrics"]["ttft"]
    assert large["metrics"]["ttft"]["p50"] > small["metrics"]["ttft"]["p50"] + added_ms / 2
