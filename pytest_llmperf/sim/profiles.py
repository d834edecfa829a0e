"""Named simulator profiles, loaded from the YAML file shipped in the package.

A profile is a flat set of parameters (latency model, scheduler limits, KV
cache size, faults). Keeping them in data rather than code lets a test or the
command line override any single parameter (``--set itl_ms=10``) and lets
``docs/simulator.md`` describe them in one table. Every key is validated up
front so a typo is a clear error naming the profile, the key and the value,
never a silently ignored setting.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from .router import ROUTER_POLICIES, is_header_name

__all__ = ["Profile", "ProfileError", "load_profile", "profile_names"]

KINDS = ("fixed", "engine")
POLICIES = ("fcfs", "priority", "sjf")
ERROR_CODES = (429, 500, 503)
REASONING_FIELDS = ("reasoning_content", "reasoning")
REJECT_STYLES = ("detail", "pydantic")
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class ProfileError(ValueError):
    """A profile name, key or value that the simulator cannot use."""


@dataclass(frozen=True)
class Profile:
    """Every parameter of one simulator profile (see profiles.yaml for units)."""

    name: str
    kind: str
    model: str
    ttft_ms: float
    itl_ms: float
    ttft_per_active_ms: float
    itl_per_active_ms: float
    beta0_us: float
    beta1_us: float
    beta2_us: float
    beta3_us: float
    alpha0_us: float
    alpha1_us: float
    alpha2_us: float
    block_size: int
    num_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    long_prefill_token_threshold: int
    max_model_len: int
    enable_prefix_caching: bool
    scheduling_policy: str
    default_max_tokens: int
    early_stop_prob: float
    error_rate: float
    error_codes: tuple[int, ...]
    retry_after_s: int
    stall_first_prob: float
    stall_first_ms: float
    stall_mid_prob: float
    stall_mid_ms: float
    cut_rate: float
    malformed_rate: float
    multi_token_rate: float
    multi_token_max: int
    keepalive_rate: float
    keepalive_interval_ms: float
    reasoning_tokens: int
    reasoning_field: str
    empty_delta_rate: float
    blank_reply_rate: float
    separate_finish_chunk: bool
    strict_fields: bool
    reject_fields: tuple[str, ...]
    reject_style: str
    reject_max_tokens: bool
    per_request_metrics: bool
    image_token_px: int
    ttft_per_image_token_ms: float
    embedding_dim: int
    responses_incomplete_event: bool
    stream_error_events: bool
    lora_adapters: tuple[str, ...]
    max_loras: int
    lora_step_us: float
    lora_load_us: float
    output_change_rate: float
    constrain_outputs: bool
    leak_mb_per_request: float
    replicas: int
    router: str
    router_header: str
    slow_replica: int
    slow_factor: float
    slow_share: float
    prefill_replicas: int
    decode_replicas: int
    kv_transfer_us_per_block: float
    gpus: int
    gpu_name: str
    gpu_idle_w: float
    gpu_max_w: float
    gpu_memory_mb: float
    gpu_weights_mb: float
    gpu_kv_mb: float
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def disaggregated(self) -> bool:
        """Prefill and decode in pools of their own (``prefill_replicas``, ``decode_replicas``)."""
        return self.prefill_replicas > 0

    @property
    def engines(self) -> int:
        """Engines this simulator runs: its replicas, or its prefill and decode pools."""
        return self.prefill_replicas + self.decode_replicas if self.disaggregated else self.replicas

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens the whole KV cache can hold."""
        return self.block_size * self.num_blocks

    def replace(self, **overrides: Any) -> Profile:
        """A copy with ``overrides`` applied and validated like the YAML."""
        values = dataclasses.asdict(self)
        values.pop("extra")
        name = values.pop("name")
        for key, raw in overrides.items():
            values[key] = _coerce(name, key, raw)
        return _build(name, values)


_FIELDS = {f.name: f for f in dataclasses.fields(Profile) if f.name not in ("name", "extra")}
_FLOAT_KEYS = {n for n, f in _FIELDS.items() if f.type == "float"}
_INT_KEYS = {n for n, f in _FIELDS.items() if f.type == "int"}
_BOOL_KEYS = {n for n, f in _FIELDS.items() if f.type == "bool"}
_PROB_KEYS = {
    "early_stop_prob",
    "error_rate",
    "stall_first_prob",
    "stall_mid_prob",
    "cut_rate",
    "malformed_rate",
    "multi_token_rate",
    "keepalive_rate",
    "empty_delta_rate",
    "blank_reply_rate",
    "output_change_rate",
    "slow_share",
}


@cache
def _raw_profiles() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("profiles.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "defaults" not in data or "profiles" not in data:
        raise ProfileError("profiles.yaml must have 'defaults' and 'profiles' mappings")
    return data


def profile_names() -> list[str]:
    """Names of the shipped profiles."""
    return sorted(_raw_profiles()["profiles"])


def _coerce(profile: str, key: str, raw: Any) -> Any:
    """Convert a YAML or ``--set`` value to the type of ``key`` or fail clearly."""
    if key not in _FIELDS:
        raise ProfileError(
            f"profile {profile!r}: unknown key {key!r} (value {raw!r}); "
            f"known keys: {', '.join(sorted(_FIELDS))}"
        )

    def bad(why: str) -> ProfileError:
        return ProfileError(f"profile {profile!r}: bad value {raw!r} for {key!r}: {why}")

    try:
        if key in _BOOL_KEYS:
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.lower() in (
                "1",
                "true",
                "yes",
                "on",
                "0",
                "false",
                "no",
                "off",
            ):
                return raw.lower() in ("1", "true", "yes", "on")
            raise bad("expected true or false")
        if key in _INT_KEYS:
            if isinstance(raw, bool):
                raise bad("expected an integer")
            value = float(raw)
            if value != int(value):
                raise bad("expected an integer")
            return int(value)
        if key in _FLOAT_KEYS:
            if isinstance(raw, bool):
                raise bad("expected a number")
            return float(raw)
        if key == "error_codes":
            items = raw.split(",") if isinstance(raw, str) else raw
            if isinstance(items, int):
                items = [items]
            return tuple(int(x) for x in items)
        if key in ("reject_fields", "lora_adapters"):
            if raw is None:
                return ()
            items = raw.split(",") if isinstance(raw, str) else raw
            if not isinstance(items, list | tuple) or not all(isinstance(x, str) for x in items):
                raise bad("expected a list of request field names")
            return tuple(x.strip() for x in items if x.strip())
        if not isinstance(raw, str):
            raise bad("expected a string")
        return raw
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ProfileError):
            raise
        raise bad(str(exc)) from None


def _build(name: str, values: dict[str, Any]) -> Profile:
    missing = sorted(set(_FIELDS) - set(values))
    if missing:
        raise ProfileError(f"profile {name!r}: missing keys {missing}")
    prof = Profile(name=name, **values)
    _validate(prof)
    return prof


def _validate(p: Profile) -> None:
    def bad(key: str, why: str) -> ProfileError:
        return ProfileError(f"profile {p.name!r}: bad value {getattr(p, key)!r} for {key!r}: {why}")

    if p.kind not in KINDS:
        raise bad("kind", f"expected one of {KINDS}")
    if p.scheduling_policy not in POLICIES:
        raise bad("scheduling_policy", f"expected one of {POLICIES}")
    for key in _FLOAT_KEYS:
        if getattr(p, key) < 0:
            raise bad(key, "must not be negative")
    for key in _PROB_KEYS:
        if not 0.0 <= getattr(p, key) <= 1.0:
            raise bad(key, "must be a probability between 0 and 1")
    for key in (
        "block_size",
        "num_blocks",
        "max_num_seqs",
        "max_num_batched_tokens",
        "max_model_len",
        "default_max_tokens",
        "multi_token_max",
        "image_token_px",
        "embedding_dim",
        "max_loras",
        "replicas",
    ):
        if getattr(p, key) < 1:
            raise bad(key, "must be at least 1")
    for key in ("long_prefill_token_threshold", "retry_after_s", "reasoning_tokens"):
        if getattr(p, key) < 0:
            raise bad(key, "must not be negative")
    if not p.error_codes or any(c not in ERROR_CODES for c in p.error_codes):
        raise bad("error_codes", f"expected a non-empty list drawn from {ERROR_CODES}")
    if not p.model:
        raise bad("model", "must not be empty")
    if p.reasoning_field not in REASONING_FIELDS:
        raise bad("reasoning_field", f"expected one of {REASONING_FIELDS}")
    _validate_fleet(p, bad)
    _validate_gpus(p, bad)
    if p.router not in ROUTER_POLICIES:
        raise bad("router", f"expected one of {ROUTER_POLICIES}")
    if p.router_header and not is_header_name(p.router_header):
        raise bad("router_header", "expected an HTTP header name (letters, digits, -, _ ...)")
    if p.reject_style not in REJECT_STYLES:
        raise bad("reject_style", f"expected one of {REJECT_STYLES}")
    names = set()
    for name in p.lora_adapters:
        if not name or name == p.model or name in names:
            raise bad(
                "lora_adapters",
                f"{name!r}: adapter names must be distinct, non-empty and not the base model's",
            )
        names.add(name)
    for name in p.reject_fields:
        if not _FIELD_NAME.fullmatch(name):
            raise bad("reject_fields", f"{name!r} is not a field name (a, or a.b for a nested one)")


def _validate_fleet(p: Profile, bad: Callable[[str, str], ProfileError]) -> None:
    """The fleet's keys: disaggregated pools, the slow replica."""
    for key in ("prefill_replicas", "decode_replicas"):
        if getattr(p, key) < 0:
            raise bad(key, "must not be negative")
    if (p.prefill_replicas > 0) != (p.decode_replicas > 0):
        key = "decode_replicas" if p.prefill_replicas else "prefill_replicas"
        raise bad(key, "a disaggregated profile needs both prefill_replicas and decode_replicas")
    if p.disaggregated:
        if p.replicas != 1:
            raise bad(
                "replicas",
                "a disaggregated profile's engines are its prefill_replicas "
                "and decode_replicas: leave replicas at 1",
            )
        if p.kind != "engine":
            raise bad("prefill_replicas", "disaggregated serving needs kind: engine")
        if not p.enable_prefix_caching:
            raise bad(
                "prefill_replicas",
                "disaggregated serving needs enable_prefix_caching "
                "(the decode engine finds the transferred blocks in its cache)",
            )
    if p.slow_factor < 1.0:
        raise bad("slow_factor", "must be at least 1 (1 = not slowed)")
    if not -1 <= p.slow_replica < p.engines:
        raise bad("slow_replica", f"expected -1 (none) or an engine index below {p.engines}")


def _validate_gpus(p: Profile, bad: Callable[[str, str], ProfileError]) -> None:
    """The simulated GPUs' keys (gpu_model.py): whole GPUs per engine, a sane range."""
    if p.gpus < 0:
        raise bad("gpus", "must not be negative (0 = no GPU page)")
    if p.gpus % p.engines:
        raise bad("gpus", f"expected a multiple of the profile's {p.engines} engines")
    if p.gpu_max_w < p.gpu_idle_w:
        raise bad("gpu_max_w", f"must be at least gpu_idle_w ({p.gpu_idle_w!r})")
    if p.gpu_memory_mb <= 0:
        raise bad("gpu_memory_mb", "must be positive (each GPU's memory, MiB)")
    if p.gpu_weights_mb + p.gpu_kv_mb > p.gpu_memory_mb:
        raise bad(
            "gpu_kv_mb",
            f"gpu_weights_mb + gpu_kv_mb must fit in gpu_memory_mb ({p.gpu_memory_mb!r})",
        )
    if p.gpus and (not p.gpu_name or any(c in p.gpu_name for c in '"\\\n')):
        raise bad("gpu_name", "expected a GPU model's name, without quotes or backslashes")


def load_profile(name: str = "fixed", **overrides: Any) -> Profile:
    """The named profile with ``overrides`` applied (strings are parsed).

    Raises ProfileError naming the profile, key and value on any problem.
    """
    data = _raw_profiles()
    profiles = data["profiles"]
    if name not in profiles:
        raise ProfileError(
            f"unknown simulator profile {name!r}; known profiles: {', '.join(profile_names())}"
        )
    values: dict[str, Any] = {"model": f"sim-{name}"}  # a profile without its own model id
    for source in (data["defaults"], profiles[name] or {}, overrides):
        for key, raw in source.items():
            values[key] = _coerce(name, key, raw)
    return _build(name, values)
