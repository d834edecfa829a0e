"""Finding a model's ``tokenizer.json`` in the local Hugging Face cache, offline.

A machine that ran or downloaded a model keeps its files under the hub cache
(``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``)
as ``models--ORG--NAME/snapshots/<revision>/``. Reading that folder needs no
network and no ``huggingface_hub``; the revision ``refs/main`` names is
preferred, else the newest snapshot that has a tokenizer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["cached_tokenizer_file", "hub_cache_dir"]


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The hub cache folder the ``huggingface_hub`` library would use."""
    env = os.environ if env is None else env
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(key):
            return Path(env[key]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def cached_tokenizer_file(repo_id: str, env: Mapping[str, str] | None = None) -> Path | None:
    """``tokenizer.json`` of ``repo_id`` (``"org/name"``) in the hub cache, or None."""
    repo_id = repo_id.strip().strip("/")
    if not repo_id or repo_id.count("/") > 1 or repo_id.startswith("."):
        return None
    folder = hub_cache_dir(env) / ("models--" + repo_id.replace("/", "--"))
    snapshots = folder / "snapshots"
    if not snapshots.is_dir():
        return None
    main = folder / "refs" / "main"
    if main.is_file():
        chosen = snapshots / main.read_text("utf-8").strip() / "tokenizer.json"
        if chosen.is_file():
            return chosen
    found = [p / "tokenizer.json" for p in snapshots.iterdir() if (p / "tokenizer.json").is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None
