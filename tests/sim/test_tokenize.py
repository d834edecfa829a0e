"""vLLM's /tokenize and /detokenize on the simulator: counts agree with its own usage."""

from __future__ import annotations

import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.tokens import count_tokens

pytestmark = pytest.mark.asyncio

MODEL = "sim-fixed"
PROMPT = "The quick brown fox, jumping over the lazy dog, said: hello!"
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
]


async def test_tokenize_prompt_counts_what_usage_reports() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=0, max_model_len=4096) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        resp = await c.post("/tokenize", json={"model": MODEL, "prompt": PROMPT})
        assert resp.status_code == 200
        got = resp.json()
        assert set(got) == {"count", "max_model_len", "tokens", "token_strs"}
        assert got["count"] == count_tokens(PROMPT) == len(got["tokens"])
        assert got["max_model_len"] == 4096 and got["token_strs"] is None
        assert all(isinstance(t, int) for t in got["tokens"])
        full = (await c.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 1})).json()
        assert full["usage"]["prompt_tokens"] == got["count"]


@pytest.mark.parametrize("profile", ["fixed", "tiny"])
async def test_tokenize_messages_counts_what_chat_usage_reports(profile: str) -> None:
    async with SimServer(profile) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        body = {"messages": MESSAGES, "add_generation_prompt": True, "return_token_strs": True}
        got = (await c.post("/tokenize", json=body)).json()
        assert got["count"] == count_tokens("Be brief.") + count_tokens(PROMPT)
        assert got["token_strs"][:4] == ["Be", "Ġbrief", ".", "The"]
        chat = {"messages": MESSAGES, "max_tokens": 1}
        full = (await c.post("/v1/chat/completions", json=chat)).json()
        assert full["usage"]["prompt_tokens"] == got["count"]


async def test_token_ids_are_stable_and_detokenize_round_trips() -> None:
    async with SimServer("fixed") as sim, httpx.AsyncClient(base_url=sim.url) as c:
        got = await c.post("/tokenize", json={"prompt": "a b, b", "return_token_strs": True})
        a = got.json()["tokens"]
        assert got.json()["token_strs"] == ["a", "Ġb", ",", "Ġb"]
        assert a[1] == a[3] and len(set(a)) == 3
        again = (await c.post("/tokenize", json={"prompt": "a\n b"})).json()["tokens"]
        assert again == [a[0], a[1]]  # "Ġb" after any whitespace; "b" is another token
        assert (await c.post("/tokenize", json={"prompt": "b"})).json()["tokens"] != [a[1]]
        text = (await c.post("/detokenize", json={"model": MODEL, "tokens": a})).json()
        assert text == {"prompt": "a b, b"}
        assert count_tokens(text["prompt"]) == len(a)
        # an id it never handed out decodes to nothing, as on vLLM
        assert (await c.post("/detokenize", json={"tokens": [7]})).json() == {"prompt": ""}


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/tokenize", {"model": "nope", "prompt": "x"}, 404),
        ("/tokenize", {"prompt": 3}, 400),
        ("/tokenize", {"messages": "hi"}, 400),
        (
            "/tokenize",
            {"messages": MESSAGES, "continue_final_message": True, "add_generation_prompt": True},
            400,
        ),
        ("/detokenize", {"tokens": "1 2"}, 400),
        ("/detokenize", {"model": "nope", "tokens": [1]}, 404),
    ],
)
async def test_tokenize_errors(path: str, body: dict, status: int) -> None:
    async with SimServer("fixed") as sim, httpx.AsyncClient(base_url=sim.url) as c:
        resp = await c.post(path, json=body)
        assert resp.status_code == status
        err = resp.json()["error"]
        assert err["code"] == status and err["message"]
        assert (await c.post(path, content=b"{nope")).status_code == 400


async def test_tokenize_is_not_under_v1_as_on_vllm() -> None:
    async with SimServer("fixed") as sim, httpx.AsyncClient(base_url=sim.url) as c:
        assert (await c.post("/v1/tokenize", json={"prompt": "x"})).status_code == 404
