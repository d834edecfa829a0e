"""The simulator's bridge to its engine: what a parsed request becomes in the back end.

The HTTP surface (server.py) reads a request and renders its answer in its API's
shape; everything between is here, the same for every API: the fields a strict
profile refuses (validation.py, asked by the surface on the raw body), the request's index
and the faults drawn for it, admission (does it fit the model's context and the
KV cache), what its tokens will say (outputs.py) and its early stop, its prompt's
KV-cache blocks, the LoRA adapter it names, its submission to the back end (the
fixed-latency model or the continuous-batching engine), the delta shapes its
chunks take (deltas.py), its per-request metrics, and the process-wide state
(the counters of ``/metrics``, the leak fault, the garbage-collector schedule). With
several engines (the profile's ``replicas``, or its prefill and decode pools) the
back end is a set of them (fleet.py builds it) and :meth:`EngineBridge.route` asks
the embedded router (router.py) where a request is served; its counts go to the page
of the engine that answers it (pages.py). A profile with GPUs has them metered from
the engines' load (gpu_model.py) while the simulator serves.
How each token is written at its planned instant is token_paths.py.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from ..apis.filler_text import token_text
from ..apis.served import PooledRequest, ServedTokens
from ..apis.served_chunks import split_text
from ..apis.server_wire import DeltaPlan, OutputPlan, ParsedRequest, WireError
from ..tokens import split_tokens
from .clock import TIMING_MODES
from .deltas import plan_deltas
from .faults import FaultPlan, plan_faults
from .fleet import SimFleet, engine_fields, make_backend
from .gc_control import GcControl
from .gpu_model import GpuMeter
from .kv_cache import KVCache, prompt_block_hashes
from .outputs import PLAIN, changed_output, output_salt, plan_output, read_output_ask
from .pages import Placement
from .profiles import Profile
from .prometheus import ServerCounters
from .replicas import prefix_cache_of
from .streams import Backend, Submission, TokenStream
from .token_paths import TokenPaths
from .validation import request_policy
from .wire import per_request_metrics

__all__ = ["EngineBridge", "make_backend"]

_MIB = 1024 * 1024


class EngineBridge:
    """The engine side of one simulator, shared by all its connections and APIs."""

    def __init__(
        self,
        profile: Profile,
        *,
        seed: int = 0,
        speedup: float = 1.0,
        record_emit_lag: bool = False,
        timing: str = "block",
        quiet_gc: bool = False,
    ) -> None:
        if speedup <= 0:
            raise ValueError(f"speedup must be positive, got {speedup!r}")
        if timing not in TIMING_MODES:
            raise ValueError(f"timing must be one of {TIMING_MODES}, got {timing!r}")
        self.profile = profile
        self.seed = seed
        self.speedup = speedup
        self.timing = timing
        # quiet_gc: this process is the simulator's own; see gc_control.py
        self.gc = GcControl(managed=profile.kind == "engine") if quiet_gc else None
        self.counters = ServerCounters()
        self.emit_planned: list[float] = []  # planned loop time of each lag sample
        self.paths = TokenPaths(self.counters, self.emit_planned, timing)
        # several engines (replicas.py, disagg.py) behind the embedded router (router.py),
        # each with a page of its own (pages.py); one engine is the back end itself, the
        # single-server path as it was (fleet.py)
        fleet = self.engines = SimFleet(
            profile, seed, speedup, timing, self.gc, self.counters, self.paths
        )
        self.backend: Backend = fleet.backend
        self.router = fleet.router
        self.replicas = fleet.replicas
        self.pages = fleet.pages
        self.fleet = fleet.several
        self.route = fleet.route
        self.page_of = fleet.page_of
        self.poll = self.backend.poll
        self.policy = request_policy(profile)  # None: every field accepted, as vLLM does
        self.next_index = 0
        self.leaked: list[bytes] = []  # leak_mb_per_request: kept for the process's life
        self.emit_lags: list[float] | None = [] if record_emit_lag else None
        # the LoRA adapters' ids in the back end (adapters.py): 1, 2, … in profile order
        self._lora_ids = {name: k + 1 for k, name in enumerate(profile.lora_adapters)}
        # the one engine's cache (None: no cache, or several engines)
        self.kv: KVCache | None = prefix_cache_of(self.backend)
        # the profile's simulated GPUs (gpu_model.py; their page: dcgm_page.py), none: no cost
        self.gpu: GpuMeter | None = (
            GpuMeter(profile, fleet.engine_stats, len(fleet.pages), seed) if profile.gpus else None
        )

    async def start(self) -> None:
        await self.backend.start()
        if self.gc is not None:
            self.gc.start()
        if self.gpu is not None:
            self.gpu.start()

    async def stop(self) -> None:
        if self.gpu is not None:
            self.gpu.stop()
        if self.gc is not None:
            self.gc.stop()
        await self.backend.stop()

    def arrive(self) -> int:
        """A request arrives: its index (0, 1, …), the leak fault, the GC's count."""
        index = self.next_index
        self.next_index += 1
        self._leak()
        if self.gc is not None:
            self.gc.request_served(index)
        return index

    def _leak(self) -> None:
        """The ``leak_mb_per_request`` fault: keep that many MB, every page written (a
        repeated byte is a memset, so the resident set really grows; a zeroed buffer
        would stay on the kernel's shared zero page), for the rest of the process's life."""
        mb = self.profile.leak_mb_per_request
        if mb > 0:
            self.leaked.append(b"\x01" * int(mb * _MIB))

    def faults(self, index: int, n_out: int) -> FaultPlan:
        """The faults drawn for request ``index`` (faults.py)."""
        return plan_faults(self.profile, self.seed, index, n_out, self.speedup)

    def admit(self, parsed: ParsedRequest, prompt_param: str, max_param: str) -> tuple[int, str]:
        """Output length and finish reason, or WireError(400) if it cannot fit; the
        error names the API's own fields (``prompt_param``, ``max_param``)."""
        p = self.profile
        n_prompt = parsed.num_prompt_tokens
        if parsed.max_tokens is None:
            n_out, finish = min(p.default_max_tokens, max(1, p.max_model_len - n_prompt)), "stop"
        else:
            n_out, finish = parsed.max_tokens, "length"
        total = max(1, n_prompt) + n_out
        if total > p.max_model_len:
            raise WireError(
                400,
                f"This model's maximum context length is {p.max_model_len} tokens. "
                f"However, you requested "
                f"{total} tokens ({n_prompt} in the {prompt_param}, {n_out} in the completion). "
                "Please reduce the length of the messages or completion.",
                prompt_param if parsed.max_tokens is None else max_param,
            )
        if p.kind == "engine" and -(-total // p.block_size) > p.num_blocks:
            raise WireError(
                400,
                f"The request needs {total} tokens of KV cache but the whole cache holds "
                f"{p.kv_capacity_tokens} tokens.",
                prompt_param,
            )
        return n_out, finish

    def output(
        self,
        parsed: ParsedRequest,
        body: Any,
        index: int,
        n_out: int,
        finish: str,
        served: ServedTokens,
    ) -> OutputPlan:
        """What the request's tokens say (outputs.py): the plain filler words of old, or
        JSON, a tool call, a greedy output, a changed one; WireError(400) if its output
        fields are malformed (``served``, the format's server half, reads them; its
        answers carry reasoning where it has a reasoning field: not completions). A
        deterministic (greedy or seeded) output's early stop is drawn from its salt, so
        it too is the same for the same prompt."""
        p = self.profile
        ask = read_output_ask(served, body)
        if ask is PLAIN and not p.output_change_rate:
            if p.early_stop_prob:
                n_out, finish = self._early_stop(parsed, f"{self.seed}:{index}", n_out, finish)
            return OutputPlan(n_out, finish, index * 13, None)
        salt = output_salt(ask, parsed.model, parsed.prompt_tokens, index)
        if ask.schema is None and not ask.tools and p.early_stop_prob:
            key = f"{self.seed}:{index}" if ask.plain else f"{self.seed}:g{salt}"
            n_out, finish = self._early_stop(parsed, key, n_out, finish)
        return plan_output(
            ask,
            schema_param=served.schema_param,
            n_cap=n_out,
            finish_cap=finish,
            salt=salt,
            reasoning=p.reasoning_tokens if served.reasons else 0,
            changed=changed_output(p.output_change_rate, self.seed, salt),
            sim_seed=self.seed,
            constrained=p.constrain_outputs,
        )

    def _early_stop(
        self, parsed: ParsedRequest, key: str, n_out: int, finish: str
    ) -> tuple[int, str]:
        """``early_stop_prob``: a request without ``ignore_eos`` stops at a seeded shorter
        length (drawn from ``key``)."""
        if parsed.ignore_eos or n_out <= 1:
            return n_out, finish
        rng = random.Random(f"eos:{key}")
        if rng.random() < self.profile.early_stop_prob:
            return rng.randint(1, n_out - 1), "stop"
        return n_out, finish

    @property
    def has_prefix_cache(self) -> bool:
        """Whether there is a prefix cache to reset (vLLM's development route)."""
        return self.engines.has_prefix_cache

    def reset_prefix_cache(self) -> bool:
        """Reset every engine's prefix cache (fleet.py)."""
        return self.engines.reset_prefix_cache()

    def submit(
        self, parsed: ParsedRequest, out: OutputPlan, placement: Placement | None = None
    ) -> TokenStream:
        """Submit the request to the back end (RuntimeError: the engine died), with its
        whole sequence's KV-cache blocks where prefix caching is on, so that a later
        turn quoting this reply hits the cache too, and its LoRA adapter."""
        p = self.profile
        n_out = out.n
        hashes: tuple[int, ...] = ()
        if p.kind == "engine" and p.enable_prefix_caching:
            if out.pieces is None:
                output = [token_text(j, out.salt)[1:] for j in range(n_out)]
            else:
                output = split_tokens(split_text(None, 0, n_out, out.pieces)[1])
            adapter = parsed.model if parsed.model != p.model else None
            hashes = prompt_block_hashes(parsed.prompt_tokens + output, p.block_size, adapter)
            self.poll()
        replica, decode = engine_fields(placement)
        stream = self.backend.submit(
            Submission(
                prompt_tokens=max(1, parsed.num_prompt_tokens),
                output_tokens=n_out,
                block_hashes=hashes,
                priority=parsed.priority,
                image_tokens=parsed.image_tokens,
                lora=self._lora_ids.get(parsed.model, 0),
                replica=replica,
                decode=decode,
            )
        )
        self.page_of(placement).counters.prompt_tokens += parsed.num_prompt_tokens
        return stream

    def deltas(self, index: int, out: OutputPlan, api: str) -> DeltaPlan | None:
        """The delta shapes of the answer's chunks (deltas.py), None for one per token."""
        n_out = out.n
        deltas = plan_deltas(self.profile, self.seed, index, n_out, api)
        if (
            deltas is not None
            and out.text is not None
            and n_out
            and deltas.empty[-1]
            and not deltas.blank
        ):
            # JSON and tool arguments are ASCII: no partial character is held back at the
            # end (outputs.py), so their last token always sends its text
            deltas = dataclasses.replace(deltas, empty=deltas.empty[:-1] + b"\x00")
        return deltas

    def embeddings_fit(self, parsed: PooledRequest) -> None:
        """WireError(400) where an input could never fit the engine's whole KV cache."""
        p = self.profile
        if p.kind == "engine":
            longest = max(parsed.token_counts)
            if -(-(max(1, longest) + 1) // p.block_size) > p.num_blocks:
                raise WireError(
                    400,
                    f"An input needs {longest} tokens of KV cache but the whole cache holds "
                    f"{p.kv_capacity_tokens} tokens.",
                    "input",
                )

    async def embed(self, parsed: PooledRequest, placement: Placement | None = None) -> None:
        """Each input a prefill-only request of the back end; back when the last is done
        (RuntimeError: the engine died)."""
        streams: list[TokenStream] = []
        replica, decode = engine_fields(placement)
        try:
            for n in parsed.token_counts:
                streams.append(
                    self.backend.submit(
                        Submission(
                            prompt_tokens=max(1, n),
                            output_tokens=1,
                            priority=parsed.priority,
                            replica=replica,
                            decode=decode,
                        )
                    )
                )
            self.page_of(placement).counters.prompt_tokens += parsed.prompt_tokens
            for stream in streams:
                await stream.next_token()
        finally:
            for stream in streams:
                stream.close()

    def request_metrics(self, stream: TokenStream, n_out: int) -> dict[str, float] | None:
        """vLLM's per-request ``metrics`` of a finished request (profile key
        ``per_request_metrics``, as vLLM's ``--enable-per-request-metrics``), from the
        back end's own clock; None when off."""
        if not self.profile.per_request_metrics:
            return None
        times = stream.served_times()
        return None if times is None else per_request_metrics(times, n_out)
