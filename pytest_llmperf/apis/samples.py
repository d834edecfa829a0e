"""What a format's body builder reads of a request: the workload's sample, by shape.

The formats sit below the workloads (a workload builds a sample for an API, so
it may ask a format what it takes), so they cannot import
:class:`~pytest_llmperf.workloads.base.Sample`; these protocols name the
attributes the builders read, and the workloads' classes have them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["ContractLike", "ImageLike", "SampleLike"]


class ImageLike(Protocol):
    """One image of a prompt (:class:`~pytest_llmperf.workloads.base.ImageInput`)."""

    @property
    def data(self) -> str: ...  # the file's bytes in base64
    @property
    def media_type(self) -> str: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def data_url(self) -> str: ...


class ContractLike(Protocol):
    """What a sample's output must be
    (:class:`~pytest_llmperf.workloads.output_contract.OutputContract`)."""

    @property
    def schema(self) -> Mapping[str, Any] | None: ...
    @property
    def schema_name(self) -> str: ...
    @property
    def tools(self) -> tuple[Mapping[str, Any], ...]: ...
    @property
    def tool_choice(self) -> str | Mapping[str, Any] | None: ...
    @property
    def greedy(self) -> bool: ...
    @property
    def greedy_seed(self) -> int: ...
    @property
    def checks_output(self) -> bool: ...
    @property
    def named_tool(self) -> str | None: ...


class SampleLike(Protocol):
    """One request to send (:class:`~pytest_llmperf.workloads.base.Sample`)."""

    @property
    def prompt(self) -> str: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def history(self) -> tuple[Mapping[str, str], ...]: ...
    @property
    def extra_body(self) -> Mapping[str, Any]: ...
    @property
    def images(self) -> tuple[ImageLike, ...]: ...
    @property
    def inputs(self) -> tuple[str, ...]: ...
    @property
    def contract(self) -> ContractLike | None: ...

    def messages(self) -> list[dict[str, str]]: ...
