"""Build the tier's tiny model with one designed path to *blank* replies: the blank model.

The tier's model (``build_tiny_model.py``) never gives a blank reply: its
special tokens' output rows are zero, so every reply has text. A random-weight
model in the wild often does: it repeats a token that decodes to nothing, and
the server generates and counts every token but streams no text. The plugin
counts such a reply as completed and blank, never failed (issue 36;
docs/measurement.md, "Blank replies"), which this model lets the tier check on
real servers.

It is the same model (same tokenizer, same weights, built by
``build_tiny_model.build``) plus one path on residual dims 3..6, which nothing
else reads or writes (the em-dash design uses dims 0..2):

- *markers*: the ordinary tokens whose id is 2 mod 3 carry dim 3;
- layer 0's head 0 attends uniformly (its ``q_proj`` rows are zero) and copies
  dim 3 into dim 4, so dim 4 at the last position is 0.2 times the share of
  markers in the context;
- every token but B carries dim 6 (a constant, 0.2), B itself carries dim 5;
- B's output row reads +dim 4, -dim 6 and +dim 5: B wins when the marker share
  exceeds :data:`THRESHOLD` (11.5 of a 32-token prompt), and once emitted it
  repeats itself (dim 5) to ``max_tokens``.

B is ``<|start_header_id|>``: a special token that does not end a sequence.
Servers generate it, count it in their usage and decode it to nothing (they
skip special tokens), so the reply is blank; vLLM streams one ``""`` delta per
token, ``transformers serve`` no content at all (docs/servers.md). Decoding is
greedy, and B's logit moves by about 45 per marker against the best other
token's, so which prompts get a blank reply is decided by their tokens alone:
7 of the 40 chat prompts and 6 of the 40 completions prompts of a synthetic
workload of 32 tokens in and out. Ordinary embedding rows are rescaled to one
norm (:data:`ROW_NORM`), so that every marker adds the same to dim 4 after
the layer norm.

Usage: ``python build_blank_model.py OUT_DIR [--corpus PATH]``; needs what
``build_tiny_model.py`` needs (any server venv of the tier has it). Seeded like
it: the same script gives the same bytes, in well under a second.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import build_tiny_model as tiny
import numpy as np
from safetensors.numpy import load_file, save_file

BLANK_TOKEN = tiny.HEADER_START  # B: special, not an end of sequence, decodes to nothing
MARKER_MOD, MARKER_REST = 3, 2  # markers: ordinary ids with id % 3 == 2
THRESHOLD = 11.5 / 32  # the marker share of the context above which B wins
ROW_NORM = 0.4  # every ordinary embedding row's norm
MARK_VALUE = 0.2  # what a marker carries on dim 3, and every token but B on dim 6
W_CONTEXT = 200.0  # B's output weight on the marker share (dim 4): the margin per marker
W_SELF = 3.0  # B's output weight on "the current token is B" (dim 5)
D_MARK, D_CONTEXT, D_SELF, D_BIAS = 3, 4, 5, 6
DESIGNED = [D_MARK, D_CONTEXT, D_SELF, D_BIAS]


def add_blank_path(out: Path, summary: dict[str, object]) -> dict[str, object]:
    """Rewrite ``out``'s weights (the tiny model ``summary`` describes) with the blank
    path; returns what it added, for the log."""
    assert tiny.MARKERS <= D_MARK, "the blank path's dims overlap the em-dash design's"
    path = out / "model.safetensors"
    w = load_file(str(path))
    embed, lm_head = w["model.embed_tokens.weight"], w["lm_head.weight"]
    vocab, hidden = embed.shape
    special_ids, dash_ids = summary["special_ids"], summary["em_dash_ids"]
    blank = special_ids[BLANK_TOKEN]
    eos = json.loads((out / "config.json").read_text())["eos_token_id"]
    assert blank not in eos, (BLANK_TOKEN, eos)
    excluded = set(special_ids.values()) | set(dash_ids)
    ordinary = [i for i in range(vocab) if i not in excluded]
    markers = [i for i in ordinary if i % MARKER_MOD == MARKER_REST]

    embed[:, DESIGNED] = 0.0
    lm_head[:, DESIGNED] = 0.0
    embed[markers, D_MARK] = MARK_VALUE
    embed[:, D_BIAS] = MARK_VALUE
    embed[blank] = 0.0
    embed[blank, D_SELF] = MARK_VALUE
    # each ordinary row keeps dims 0..6 exactly and its random rest is rescaled, so that
    # every row has the same norm (one RMS: each marker adds the same to dim 4)
    kept = list(range(max(DESIGNED) + 1))
    rest = np.ones(hidden, dtype=bool)
    rest[kept] = False
    for i in ordinary:
        want = np.sqrt(ROW_NORM**2 - np.sum(embed[i, kept] ** 2))
        embed[i, rest] *= want / np.linalg.norm(embed[i, rest])
    row_rms = ROW_NORM / np.sqrt(hidden)
    lm_head[blank] = 0.0
    lm_head[blank, D_CONTEXT] = W_CONTEXT
    lm_head[blank, D_BIAS] = -W_CONTEXT * THRESHOLD
    lm_head[blank, D_SELF] = W_SELF

    head_dim = hidden // tiny.HEADS
    first = "model.layers.0.self_attn."
    w[first + "q_proj.weight"][:head_dim] = 0.0  # head 0: uniform attention, a causal mean
    w[first + "v_proj.weight"][:head_dim] = 0.0
    w[first + "v_proj.weight"][0, D_MARK] = 1.0  # dim 3 after the norm: 0.2 / row_rms a marker
    for i in range(tiny.LAYERS):
        layer = f"model.layers.{i}."
        w[layer + "self_attn.o_proj.weight"][DESIGNED] = 0.0  # nothing else writes dims 3..6
        w[layer + "mlp.down_proj.weight"][DESIGNED] = 0.0
    w[first + "o_proj.weight"][:, :head_dim] = 0.0
    w[first + "o_proj.weight"][D_CONTEXT, 0] = row_rms  # dim 4: 0.2 x the marker share
    save_file(w, str(path), metadata={"format": "pt"})
    return {
        "blank_token": {BLANK_TOKEN: blank},
        "markers": f"ordinary ids % {MARKER_MOD} == {MARKER_REST} ({len(markers)} tokens)",
        "threshold": THRESHOLD,
    }


def build(out: Path, corpus: Path) -> dict[str, object]:
    """Write the blank model's folder; returns a summary (sizes, ids) for the log."""
    summary = tiny.build(out, corpus)
    summary.update(add_blank_path(out, summary))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--corpus", type=Path, default=tiny.DEFAULT_CORPUS)
    args = parser.parse_args()
    print(json.dumps(build(args.out, args.corpus)))


if __name__ == "__main__":
    main()
