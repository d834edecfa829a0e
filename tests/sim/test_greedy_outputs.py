"""Deterministic outputs: greedy (temperature 0) or seeded requests get a pure function
of their prompt, alone or under load, in any run; ``output_change_rate`` changes the
output of the same chosen prompts every run, from a seeded token on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import SimServer

pytestmark = pytest.mark.asyncio

FAST: dict[str, Any] = {"ttft_ms": 1, "itl_ms": 0.2}


def chat(prompt: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], "max_tokens": 12, **extra}


async def answer(c: httpx.AsyncClient, prompt: str, **extra: Any) -> str:
    resp = await c.post("/v1/chat/completions", json=chat(prompt, **extra))
    assert resp.status_code == 200, resp.text
    text: str = resp.json()["choices"][0]["message"]["content"]
    return text


async def streamed(c: httpx.AsyncClient, prompt: str) -> str:
    parts = []
    body = chat(prompt, temperature=0, stream=True)
    async with c.stream("POST", "/v1/chat/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                choice = json.loads(line[6:])["choices"]
                if choice:
                    parts.append(choice[0]["delta"].get("content") or "")
    return "".join(parts)


PROMPTS = [f"Question number {k}: what is {k} plus {k}?" for k in range(24)]


async def test_greedy_is_a_function_of_the_prompt_alone_or_under_load() -> None:
    async with SimServer("tiny", seed=0) as a, httpx.AsyncClient(base_url=a.url) as c:
        alone = [await answer(c, p, temperature=0) for p in PROMPTS]
        loaded = await asyncio.gather(*(streamed(c, p) for p in PROMPTS))  # all at once
    async with SimServer("tiny", seed=5) as b, httpx.AsyncClient(base_url=b.url) as c:
        other_run = [await answer(c, p, temperature=0) for p in reversed(PROMPTS)][::-1]
    assert loaded == alone == other_run
    assert len(set(alone)) > len(PROMPTS) // 2  # other prompts, other outputs
    async with SimServer("fixed", **FAST) as f, httpx.AsyncClient(base_url=f.url) as c:
        assert await answer(c, PROMPTS[0], temperature=0) != alone[0]  # another model


async def test_seed_fixes_a_sampled_output_and_no_seed_does_not() -> None:
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        s7 = [await answer(c, "hi", temperature=0.8, seed=7) for _ in range(2)]
        s8 = await answer(c, "hi", temperature=0.8, seed=8)
        free = [await answer(c, "hi", temperature=0.8) for _ in range(2)]
    assert s7[0] == s7[1] != s8
    assert free[0] != free[1]  # sampled: request by request, as before


async def test_output_change_rate_changes_the_same_prompts_from_a_point_on() -> None:
    prompts = [f"Prompt {k} of the output change test." for k in range(80)]
    async with SimServer("fixed", **FAST) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        base = [await answer(c, p, temperature=0) for p in prompts]
    runs = []
    for _ in range(2):
        async with (
            SimServer("fixed", output_change_rate=0.25, **FAST) as sim,
            httpx.AsyncClient(base_url=sim.url) as c,
        ):
            runs.append([await answer(c, p, temperature=0) for p in prompts])
    assert runs[0] == runs[1]  # the same prompts, the same changed outputs, every run
    changed = [k for k in range(80) if runs[0][k] != base[k]]
    assert 8 <= len(changed) <= 32
    for k in changed:
        old, new = base[k].split(" "), runs[0][k].split(" ")
        assert len(old) == len(new)  # usage unchanged: same token count
        part = next(i for i, (x, y) in enumerate(zip(old, new, strict=True)) if x != y)
        assert part >= 2  # a shared prefix (the split's first item is "")
        assert all(x != y for x, y in zip(old[part:], new[part:], strict=True))
