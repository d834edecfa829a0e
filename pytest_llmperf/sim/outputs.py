"""What one request's output tokens say: filler words, schema-valid JSON, or a tool call.

The plain simulator streams seeded filler words. A request may ask for more
(``response_format`` / ``text.format`` JSON schema, ``tools`` with ``tool_choice``),
for a deterministic output (``temperature`` 0 or a ``seed``: the same prompt gets
the same words, under any load, in any run), and a fault may change a chosen
share of outputs (``output_change_rate``). This module reads those fields
(:func:`read_output_ask`, per API) and decides the output up front
(:func:`plan_output`): how many tokens, the finish reason, and each token's
text as pre-escaped JSON bytes, so each format's renderer (the server halves
in :mod:`pytest_llmperf.apis`) and both token paths write them exactly like the filler words —
one ready-made chunk per token.

A tool call takes one token for its header (the function's name: chat's first
``tool_calls`` delta, Responses' ``function_call`` item, Messages' ``tool_use``
block) and one per piece of its arguments, which are JSON valid against the
function's ``parameters`` (json_outputs.py). ``tool_choice`` ``required`` or a
named function always calls; ``auto`` calls in a seeded half of the answers;
``none`` never does.
"""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..apis.filler_text import WORDS, token_index
from ..apis.output_asks import GREEDY_TEMPERATURE, PLAIN, OutputAsk, ToolSpec
from ..apis.served import ServedTokens
from ..apis.server_wire import OutputPlan, ToolCall, WireError
from .json_outputs import Draws, SchemaError, json_for_schema, json_pieces

__all__ = [
    "GREEDY_TEMPERATURE",
    "PLAIN",
    "OutputAsk",
    "OutputPlan",
    "ToolCall",
    "ToolSpec",
    "changed_output",
    "output_salt",
    "plan_output",
    "read_output_ask",
]


def read_output_ask(served: ServedTokens, body: Mapping[str, Any]) -> OutputAsk:
    """The output fields of a request body, its format's read by its server half
    (``served``; WireError 400 when malformed).

    Chat: ``response_format`` (``json_schema``, ``json_object``, ``text``), ``tools``
    (``{"type": "function", "function": {name, parameters}}``), ``tool_choice``.
    Responses: ``text.format``, flat function ``tools``, ``tool_choice``. Messages:
    ``tools`` (``{name, input_schema}``), ``tool_choice`` (``auto``/``any``/``tool``/
    ``none``). All: ``temperature`` (greedy at 0) and ``seed`` (completions too)."""
    temperature = body.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float)
    ):
        raise WireError(400, f"temperature must be a number, got {temperature!r}", "temperature")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise WireError(400, f"seed must be an integer, got {seed!r}", "seed")
    greedy = temperature is not None and temperature < GREEDY_TEMPERATURE
    schema, tools, choice, named = served.output_fields(body)
    ask = OutputAsk(schema, tools, choice, named, greedy, seed)
    return PLAIN if ask == PLAIN else ask


# -- deciding the output ----------------------------------------------------------------
def output_salt(ask: OutputAsk, model: str, prompt_tokens: Sequence[str], index: int) -> int:
    """The filler words' offset: the request index's (``index * 13``, as ever) unless the
    output must be a function of the prompt (greedy or seeded): then a digest of the
    model, the seed and the prompt."""
    if not ask.greedy and ask.seed is None:
        return index * 13
    return _digest(model, "" if ask.greedy else str(ask.seed), *prompt_tokens)


def _digest(*parts: str) -> int:
    h = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(h[:8], "big")


def changed_output(rate: float, sim_seed: int, salt: int) -> bool:
    """Whether the ``output_change_rate`` fault changes this output: a pure function of
    the output's salt (for a greedy request: its prompt), so the same prompts every run."""
    if rate <= 0:
        return False
    return random.Random(f"change:{sim_seed}:{salt}").random() < rate


def _escaped(text: str) -> bytes:
    return json.dumps(text)[1:-1].encode()


def _words(salt: int, start: int, stop: int) -> list[bytes]:
    return [_escaped(WORDS[token_index(k, salt)]) for k in range(start, stop)]


def _change_point(salt: int, sim_seed: int, span: int) -> int:
    """Where a changed output parts from the original: a seeded position in 1 … span-1
    (0 when span is 1), so the outputs share a prefix and differ after it."""
    if span <= 1:
        return 0
    return 1 + random.Random(f"part:{sim_seed}:{salt}").randrange(span - 1)


def _answer_json(
    schema: Mapping[str, Any],
    salt: int,
    change: tuple[int, int] | None,
    param: str,
    constrained: bool,
) -> str:
    """The JSON of a schema, from draws seeded by ``salt``; with ``change`` (sim seed,
    salt) the draws switch to another stream at a seeded draw."""
    try:
        first = Draws(salt)
        text = json_for_schema(schema, first, constrained)
        if change is not None:
            at = _change_point(salt, change[0], first.count)
            other = Draws(salt, switch_at=at, other_seed=salt + 1)
            text = json_for_schema(schema, other, constrained)
    except SchemaError as exc:
        raise WireError(400, f"{param}: {exc}", param.split(".")[0]) from None
    except (TypeError, ValueError) as exc:  # a malformed bound (a string for a number, ...)
        raise WireError(400, f"{param}: unusable schema: {exc}", param.split(".")[0]) from None
    return text


def plan_output(
    ask: OutputAsk,
    *,
    schema_param: str,
    n_cap: int,
    finish_cap: str,
    salt: int,
    reasoning: int,
    changed: bool,
    sim_seed: int,
    constrained: bool = True,
) -> OutputPlan:
    """The output of a request: ``n_cap`` tokens ending ``finish_cap`` (what admission
    decided) for filler text; for JSON or a tool call, ``reasoning`` filler tokens
    (the profile's, where the API has them) then the answer, ``stop`` (or
    ``tool_calls``) when it is whole within ``n_cap``, cut at ``n_cap`` with
    ``length`` otherwise. ``changed``: the ``output_change_rate`` fault's other
    output, parting from this one at a seeded point. ``constrained`` false: JSON of the
    schema's shape whose values ignore its bounds (json_outputs.py). ``schema_param``
    names the schema's field in errors (the format's: ``response_format``,
    ``text.format``)."""
    tool = _pick_tool(ask, salt)
    if ask.schema is None and tool is None:
        if not changed:
            return OutputPlan(n_cap, finish_cap, salt, None)
        at = _change_point(salt, sim_seed, n_cap)
        pieces = _words(salt, 0, at) + _words(salt + 1, at, n_cap)
        return OutputPlan(n_cap, finish_cap, salt, tuple(pieces))
    change = (sim_seed, salt) if changed else None
    r = min(reasoning, n_cap)
    head = _words(salt, 0, r)
    if tool is None:
        assert ask.schema is not None
        text = _answer_json(ask.schema, salt, change, schema_param, constrained)
        answer = [_escaped(p) for p in json_pieces(text)]
        whole = r + len(answer)
        n = min(n_cap, whole)
        kept = answer[: n - r]
        cut_text = json.loads(b'"' + b"".join(kept) + b'"')
        finish = "stop" if whole <= n_cap else "length"
        return OutputPlan(n, finish, salt, tuple(head + kept), text=cut_text)
    spec, named = tool
    args = _answer_json(spec.parameters, salt, change, "tools", constrained)
    arg_pieces = [_escaped(p) for p in json_pieces(args)]
    whole = r + 1 + len(arg_pieces)
    n = min(n_cap, whole)
    if n <= r:  # the cap left no token for the call: reasoning only
        return OutputPlan(n, "length", salt, tuple(head), text="")
    kept = arg_pieces[: max(0, n - r - 1)]
    cut_args = json.loads(b'"' + b"".join(kept) + b'"')
    finish = ("stop" if named else "tool_calls") if whole <= n_cap else "length"
    call = ToolCall(spec.name, cut_args, r, named, uuid.uuid4().hex)
    return OutputPlan(n, finish, salt, tuple([*head, b"", *kept]), tool=call, text=cut_args)


def _pick_tool(ask: OutputAsk, salt: int) -> tuple[ToolSpec, bool] | None:
    """The tool this answer calls (and whether tool_choice named it), or None for text."""
    if not ask.tools or ask.tool_choice == "none":
        return None
    if ask.tool_choice == "named":
        return next(t for t in ask.tools if t.name == ask.named), True
    rng = random.Random(f"tool:{salt}")
    if ask.tool_choice == "auto" and rng.random() < 0.5:
        return None
    return ask.tools[rng.randrange(len(ask.tools))], False
