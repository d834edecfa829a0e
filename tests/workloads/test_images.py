"""Images in prompts: seeded synthetic pictures (``images=``) and a trace row's image files.

Every image is decoded back with Pillow (the whole file: a broken PNG stream or
CRC fails here), checked for the asked size and format, and compared across
samples, caches and processes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads import images as images_module
from pytest_llmperf.workloads.base import ImageInput
from pytest_llmperf.workloads.images import (
    PILLOW_HINT,
    ImageSpec,
    band_rows,
    image_spec,
    read_image_file,
    synthetic_image,
)


def decode(image: ImageInput) -> Image.Image:
    body = base64.b64decode(image.data, validate=True)
    assert len(body) == image.nbytes
    picture = Image.open(io.BytesIO(body))
    picture.load()  # decodes every byte: a bad deflate stream, CRC or JPEG marker raises
    return picture


def digest(image: ImageInput) -> str:
    return hashlib.sha256(image.data.encode()).hexdigest()


def fresh_caches() -> None:
    images_module._ENCODED.clear()
    images_module._BASES.clear()


# -- the pictures ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
@pytest.mark.parametrize("size", [(512, 512), (640, 480), (1, 1), (3, 7), (17, 1000), (1000, 5)])
def test_images_decode_back_to_the_asked_size_and_format(fmt: str, size: tuple[int, int]) -> None:
    image = synthetic_image(3, 11, 0, size, fmt)
    picture = decode(image)
    assert picture.size == size == (image.width, image.height)
    assert picture.format == fmt.upper() and picture.mode == "RGB"
    assert image.media_type == f"image/{fmt}"
    assert image.data_url.startswith(f"data:image/{fmt};base64,")


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_same_seed_index_and_position_same_bytes_whatever_the_caches(fmt: str) -> None:
    first = [synthetic_image(5, i, p, (96, 64), fmt) for i in range(6) for p in range(2)]
    again = [synthetic_image(5, i, p, (96, 64), fmt) for i in range(6) for p in range(2)]
    fresh_caches()  # bases and encodings drawn again, in another order
    redrawn = [synthetic_image(5, i, p, (96, 64), fmt) for i in reversed(range(6)) for p in (1, 0)]
    assert first == again
    assert sorted(map(digest, first)) == sorted(map(digest, redrawn))


def test_the_same_bytes_in_another_process() -> None:
    """Workers in other processes must send the very same images."""
    code = (
        "import hashlib;"
        "from pytest_llmperf.workloads.images import synthetic_image as s;"
        "print(' '.join(hashlib.sha256(s(9, i, p, (64, 48), f).data.encode()).hexdigest()"
        " for f in ('png', 'jpeg') for i in (0, 7) for p in (0, 1)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    here = [
        digest(synthetic_image(9, i, p, (64, 48), f))
        for f in ("png", "jpeg")
        for i in (0, 7)
        for p in (0, 1)
    ]
    assert out.stdout.split() == here


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_every_request_and_position_has_its_own_pixels(fmt: str) -> None:
    """A server's multimodal cache keys on the image: none may repeat."""
    made = [synthetic_image(1, i, p, (128, 128), fmt) for i in range(60) for p in range(3)]
    pixels = {decode(m).tobytes() for m in made}
    assert len(pixels) == len(made)
    other_seed = {digest(synthetic_image(2, i, 0, (128, 128), fmt)) for i in range(60)}
    assert not other_seed & {digest(m) for m in made}


def test_tiny_images_are_distinct_too() -> None:
    made = {decode(synthetic_image(0, i, 0, (1, 1), "png")).tobytes() for i in range(200)}
    assert len(made) == 200


def test_sizes_are_those_of_photos_not_noise_or_flat_colour() -> None:
    """512x512 RGB is 786 kB raw: a photo is ~50-75% of it as PNG and ~5-15% as JPEG.
    Our PNG writer must also compress about as well as Pillow's own."""
    raw = 512 * 512 * 3
    pngs = [synthetic_image(4, i, 0, (512, 512), "png") for i in range(4)]
    jpegs = [synthetic_image(4, i, 0, (512, 512), "jpeg") for i in range(4)]
    for png in pngs:
        assert 0.4 * raw < png.nbytes < 0.85 * raw
        again = io.BytesIO()
        decode(png).save(again, "PNG")  # Pillow: adaptive filters, zlib level 6
        assert 0.8 < png.nbytes / len(again.getvalue()) < 1.25
    for jpeg in jpegs:
        assert 0.02 * raw < jpeg.nbytes < 0.2 * raw
    flat = io.BytesIO()
    Image.new("RGB", (512, 512), (90, 120, 200)).save(flat, "PNG")
    assert min(p.nbytes for p in pngs) > 50 * len(flat.getvalue())


def test_the_band_of_its_own_is_at_the_bottom() -> None:
    """Images from one base share all rows above the band and differ inside it."""
    made = [decode(synthetic_image(8, i, 0, (64, 64), "png")) for i in range(40)]
    top = 64 - band_rows(64)
    by_head: dict[bytes, list[Image.Image]] = {}
    for m in made:
        by_head.setdefault(m.crop((0, 0, 64, top)).tobytes(), []).append(m)
    assert 1 < len(by_head) <= images_module.POOL  # several bases, each shared
    for group in by_head.values():
        bands = {m.crop((0, top, 64, 64)).tobytes() for m in group}
        assert len(bands) == len(group)


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_later_samples_reuse_the_bases_the_first_one_drew(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What keeps a sample cheap (the module docstring's figures; timed in no test: a busy
    machine's noise is no verdict): the whole pictures are drawn by the first sample of a
    size, never again; a later image redraws only its own band."""
    drawn: list[tuple[int, int]] = []
    real = images_module._draw

    def counting(seed: int, size: tuple[int, int], slot: int) -> Any:
        drawn.append((seed, slot))
        return real(seed, size, slot)

    monkeypatch.setattr(images_module, "_draw", counting)
    seed = 9_000 + len(fmt)  # bases no other test drew
    spec = image_spec(2, (512, 512), fmt)
    spec.images(seed, 0)
    first = len(drawn)
    assert 0 < first <= images_module.pool_size((512, 512)), drawn
    for index in range(1000, 1015):
        assert len(spec.images(seed, index)) == 2
    assert len(drawn) == first, drawn


# -- parameters ----------------------------------------------------------------------


def test_the_synthetic_workloads_take_images() -> None:
    for name in ("synthetic", "synthetic-uniform", "synthetic-skewed"):
        plain = build_workload(name, seed=3)
        w = build_workload(name, seed=3, images=2, image_size=(64, 48), image_format="jpeg")
        s = w.sample(5)
        assert len(s.images) == 2 and s.inputs == ()
        assert [(i.width, i.height, i.media_type) for i in s.images] == [(64, 48, "image/jpeg")] * 2
        assert [decode(i).size for i in s.images] == [(64, 48)] * 2
        assert s.images == w.sample(5).images != w.sample(6).images
        # the images change nothing else: the same text and lengths as without them
        p = plain.sample(5)
        assert (s.prompt, s.input_tokens, s.max_tokens) == (p.prompt, p.input_tokens, p.max_tokens)
        assert p.images == ()
        d = w.describe()
        assert (d["images"], d["image_size"], d["image_format"]) == (2, [64, 48], "jpeg")
        assert "images" not in plain.describe() and "image_size" not in plain.describe()


def test_defaults_are_512_png() -> None:
    s = build_workload("synthetic", images=1).sample(0)
    assert (s.images[0].width, s.images[0].height, s.images[0].media_type) == (
        512,
        512,
        "image/png",
    )
    assert image_spec() == ImageSpec(0, (512, 512), "png")
    assert image_spec(1, [32, 16], "JPG") == ImageSpec(1, (32, 16), "jpeg")


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"images": -1}, "images must be an integer >= 0, got -1"),
        ({"images": "2"}, "images must be an integer >= 0, got '2'"),
        ({"images": True}, "images must be an integer >= 0, got True"),
        ({"images": 1.5}, "images must be an integer >= 0, got 1.5"),
        ({"image_size": (0, 512)}, "image_size must be a (width, height) pair"),
        ({"image_size": (512, 8193)}, "got (512, 8193)"),
        ({"image_size": (512,)}, "got (512,)"),
        ({"image_size": "512x512"}, "got '512x512'"),
        ({"image_size": (512.0, 512)}, "got (512.0, 512)"),
        ({"image_size": (True, 512)}, "got (True, 512)"),
        ({"image_format": "gif"}, "image_format must be one of 'png', 'jpeg', got 'gif'"),
        ({"image_format": None, "image_size": None}, None),
    ],
)
def test_bad_values_are_usage_errors_naming_parameter_and_value(
    params: dict[str, Any], named: str | None
) -> None:
    for name in ("synthetic", "synthetic-skewed"):
        if named is None:  # None: the defaults
            assert build_workload(name, images=1, **params).sample(0).images[0].width == 512
            continue
        with pytest.raises(LlmPerfUsageError) as caught:
            build_workload(name, **{"images": 1, **params})
        assert named in str(caught.value)


def test_bad_size_or_format_is_refused_even_without_images() -> None:
    with pytest.raises(LlmPerfUsageError, match="image_format"):
        build_workload("synthetic", image_format="webp")
    with pytest.raises(LlmPerfUsageError, match="image_size"):
        build_workload("synthetic", image_size=(10, 0))


def test_without_pillow_images_are_a_usage_error_that_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "PIL.Image", None)  # import PIL.Image -> ImportError
    with pytest.raises(LlmPerfUsageError) as caught:
        build_workload("synthetic", images=1)
    assert PILLOW_HINT == 'pip install "pytest-llmperf[images]"'
    assert (
        str(caught.value) == f"images in prompts need Pillow, which is not installed: {PILLOW_HINT}"
    )
    assert build_workload("synthetic", images=0).sample(0).images == ()  # no images, no Pillow


def test_a_workload_with_images_pickles_for_worker_processes() -> None:
    w = build_workload("synthetic", seed=2, images=2, image_size=(40, 30))
    assert pickle.loads(pickle.dumps(w)).sample(4) == w.sample(4)


# -- trace rows with image files --------------------------------------------------------


def write_picture(path: Path, size: tuple[int, int], fmt: str) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (size[0] % 256, 40, 200)).save(path, fmt)
    return path.read_bytes()


def trace_file(tmp_path: Path, rows: list[dict[str, Any]], name: str = "t.jsonl") -> str:
    path = tmp_path / "traces" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("fmt", ["jsonl", "mooncake"])
def test_trace_rows_send_the_image_files_they_name(tmp_path: Path, fmt: str) -> None:
    cat = write_picture(tmp_path / "traces" / "cat.png", (33, 21), "PNG")
    dog = write_picture(tmp_path / "traces" / "pics" / "dog.jpg", (50, 70), "JPEG")
    elsewhere = write_picture(tmp_path / "abs.png", (5, 6), "PNG")
    rows: list[dict[str, Any]] = [
        {"timestamp": 0, "input_length": 20, "output_length": 4, "images": ["cat.png"]},
        {"timestamp": 1, "input_length": 20, "output_length": 4},
        {
            "timestamp": 2,
            "input_length": 20,
            "output_length": 4,
            "images": ["pics/dog.jpg", str(tmp_path / "abs.png"), "cat.png"],
        },
    ]
    if fmt == "jsonl":
        rows.append(
            {
                "timestamp": 3,
                "output_length": 4,
                "messages": [{"role": "user", "content": "What is in the picture?"}],
                "images": ["pics/dog.jpg"],
            }
        )
    w = build_workload("trace", path=trace_file(tmp_path, rows), format=fmt)
    first, second, third = w.sample(0), w.sample(1), w.sample(2)
    assert [base64.b64decode(i.data) for i in first.images] == [cat]
    assert (first.images[0].width, first.images[0].height) == (33, 21)
    assert first.images[0].media_type == "image/png" and first.images[0].nbytes == len(cat)
    assert second.images == ()
    assert [base64.b64decode(i.data) for i in third.images] == [dog, elsewhere, cat]
    assert [(i.width, i.height, i.media_type) for i in third.images] == [
        (50, 70, "image/jpeg"),
        (5, 6, "image/png"),
        (33, 21, "image/png"),
    ]
    assert first.input_tokens == 20  # the text's length: image tokens are the server's
    if fmt == "jsonl":
        fourth = w.sample(3)
        assert fourth.prompt == "What is in the picture?"
        assert [i.width for i in fourth.images] == [50]
    d = w.describe()
    assert d["images"] == (5 if fmt == "jsonl" else 4) and d["distinct_images"] == 3
    assert pickle.loads(pickle.dumps(w)).sample(2) == third


def test_a_trace_without_images_says_nothing_about_them(tmp_path: Path) -> None:
    path = trace_file(tmp_path, [{"timestamp": 0, "input_length": 5, "output_length": 2}])
    w = build_workload("trace", path=path, format="jsonl")
    assert w.sample(0).images == () and "images" not in w.describe()


def test_a_missing_image_names_the_trace_the_row_and_the_path(tmp_path: Path) -> None:
    write_picture(tmp_path / "traces" / "cat.png", (8, 8), "PNG")
    path = trace_file(
        tmp_path,
        [
            {"timestamp": 0, "input_length": 5, "output_length": 2, "images": ["cat.png"]},
            {"timestamp": 1, "input_length": 5, "output_length": 2, "images": ["gone.png"]},
        ],
    )
    with pytest.raises(LlmPerfUsageError) as caught:
        build_workload("trace", path=path, format="jsonl")  # at build time: before any load
    message = str(caught.value)
    assert f"trace {path} line 2" in message and "'gone.png'" in message
    assert "No such file" in message


def test_a_file_that_is_no_png_or_jpeg_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "notes.png").write_text("not a picture")
    write_picture(tmp_path / "traces" / "anim.gif", (4, 4), "GIF")
    for name, says in (("notes.png", "is not an image"), ("anim.gif", "is GIF")):
        row = {"timestamp": 0, "input_length": 5, "output_length": 2, "images": [name]}
        path = trace_file(tmp_path, [row], name=f"{name}.jsonl")
        with pytest.raises(LlmPerfUsageError) as caught:
            build_workload("trace", path=path, format="jsonl")
        assert f"trace {path} line 1" in str(caught.value) and says in str(caught.value)


@pytest.mark.parametrize("bad", ["cat.png", [1], [""], {"a": 1}])
def test_a_bad_images_field_names_the_row(tmp_path: Path, bad: Any) -> None:
    row = {"timestamp": 0, "input_length": 5, "output_length": 2, "images": bad}
    path = trace_file(tmp_path, [row])
    with pytest.raises(LlmPerfUsageError) as caught:
        build_workload("trace", path=path, format="jsonl")
    assert f"line 1: images must be a list of image file paths, got {bad!r}" in str(caught.value)


def test_read_image_file_reads_png_and_jpeg(tmp_path: Path) -> None:
    body = write_picture(tmp_path / "x.jpeg", (12, 34), "JPEG")
    image = read_image_file(tmp_path / "x.jpeg")
    assert image == ImageInput(base64.b64encode(body).decode(), "image/jpeg", 12, 34, len(body))
    with pytest.raises(LlmPerfUsageError, match=r"here: cannot read image '.*nothing\.png'"):
        read_image_file(tmp_path / "nothing.png", where="here")


def test_images_in_a_multi_turn_trace_session_are_refused_naming_the_line(
    tmp_path: Path,
) -> None:
    write_picture(tmp_path / "traces" / "cat.png", (8, 8), "PNG")
    row = {"timestamp": 0, "input_length": 5, "output_length": 2}
    path = trace_file(
        tmp_path,
        [
            {**row, "session_id": "s1"},
            {**row, "timestamp": 1, "session_id": "s1", "images": ["cat.png"]},
        ],
    )
    with pytest.raises(LlmPerfUsageError) as caught:
        build_workload("trace", path=path, format="jsonl")
    message = str(caught.value)
    assert f"trace {path} line 2" in message and "session_id 's1'" in message
