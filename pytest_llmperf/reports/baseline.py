"""Baseline files: a session's per-test histograms, kept to judge later runs against.

Why histograms, not samples: HDR states are lossless for every percentile at
3 significant digits, a few KB per run, and merge exactly. The file also
records *what* was measured (endpoint identity: URL without credentials,
model, server version when the server tells; the options that shape a run),
so a comparison against a different model, API, load or workload is refused
as inconclusive, naming every differing field with both values
(:mod:`~pytest_llmperf.slo.comparable_runs`; the tokenizer by identity), instead
of failing or passing on apples against oranges; an inconclusive comparison
follows ``--llm-inconclusive`` (it fails by default).

A greedy run's state carries its per-sample output fingerprints (``state.outputs``,
:mod:`pytest_llmperf.results.outputs`): :meth:`Baseline.other_outputs` gives them
to ``output_match`` for the run of the same test and label, whatever its load (the
same workload sends the same prompt for the same sample index under any load).

Format (JSON, ``baseline_version`` 1)::

    {"baseline_version": 1, "created_at": ISO-8601, "endpoint": {...},
     "options": {...}, "fingerprint": {...}, "tests": {nodeid: {"runs": {label:
     {"load", "workload", "state", "server_metrics", "server_process", "gpu"}}}}}

``server_process`` (the run's server process block: startup times and resources) is
there only for a run whose server the gate started; its ``startup.*`` are compared by
default, its resources where ``--llm-baseline-threshold`` names them
(:mod:`~pytest_llmperf.slo.startup_regression`).

``gpu`` (the run's GPU figures by name: ``{"gpu.power_w.mean": 500.0,
"energy_per_output_token_j": 0.25, ...}``, not the whole ``runs[].gpu`` block with its
series) is there only for a run that read its GPUs; compared where
``--llm-baseline-threshold`` names them (:mod:`~pytest_llmperf.slo.gpu_regression`).

``fingerprint`` (:mod:`pytest_llmperf.server_metrics.fingerprint`: server family,
version, model card, engine configuration, chat-template hash, client machine)
was added later; a file without it still loads and compares, its comparisons
``comparable: null`` ("no fingerprint stored"). With it,
:meth:`Baseline.check_comparability` tells whether this session's server is
configured as the baseline's was: every comparison carries ``comparable`` and
``differs``, and a failure message says so; ``--llm-baseline-strict`` makes a
difference a usage error naming the file and what differs.

States gain histograms over time (``itl_request_mean``, the per-request ITL
count the regression bootstrap resamples ITL by); a file without one still
compares, falling back with a note (:func:`~pytest_llmperf.slo.regression.request_count`).

``--llm-baseline-compare=history[:N]`` compares with the ``--llm-history``
store instead (:mod:`pytest_llmperf.history.gate`): :func:`load_comparison`
returns either, both a :class:`~pytest_llmperf.slo.comparison.BaselineSource`
(which holds the comparison loop both share).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.server_metrics.fingerprint import comparability, comparability_text
from pytest_llmperf.slo.comparable_runs import run_differences
from pytest_llmperf.slo.comparison import (
    BaselineSource,
    Reference,
    not_comparable,
    with_differences,
)
from pytest_llmperf.slo.output_match import MatchedAgainst, OtherOutputs, outputs_of_state
from pytest_llmperf.slo.regression import inconclusive_check
from pytest_llmperf.specs.gpu_names import gpu_values

__all__ = [
    "BASELINE_VERSION",
    "Baseline",
    "BaselineSource",
    "build_baseline",
    "inconclusive_check",
    "load_baseline",
    "load_comparison",
    "write_baseline",
]

BASELINE_VERSION = 1
_HISTORY = re.compile(r"^history(:.*)?$")  # --llm-baseline-compare=history[:N]


def load_comparison(compare: str | None, *, history: str | None = None) -> BaselineSource | None:
    """What ``--llm-baseline-compare`` names: nothing, ``history[:N]`` (the last N
    comparable runs in the ``--llm-history`` store) or a baseline file; a usage error
    when it cannot be used."""
    if not compare:
        return None
    if _HISTORY.match(compare.strip()):
        from pytest_llmperf.history.gate import open_history_gate  # loads the store's code

        return open_history_gate(compare, history=history)
    return load_baseline(compare)


def build_baseline(
    data: SessionData,
    *,
    endpoint: Mapping[str, Any],
    options: Mapping[str, Any],
    fingerprint: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The baseline document for this session (every run, gated or not, by label), with
    the session's server ``fingerprint`` when there is one."""
    tests: dict[str, dict[str, Any]] = {}
    for entry in data.measured_tests():
        runs = {
            run.get("label") or f"run{i}": {
                "load": run.get("load", {}),
                "workload": run.get("workload", {}),
                "gated": run.get("gated", True),
                "state": state,
                "server_metrics": run.get("server_metrics"),
                **(
                    {"server_process": run["server_process"]}
                    if run.get("server_process") is not None
                    else {}
                ),
                **({"gpu": gpu_values(run["gpu"])} if run.get("gpu") is not None else {}),
            }
            for i, (run, state) in enumerate(zip(entry.runs, entry.states, strict=False))
        }
        if runs:
            tests[entry.nodeid] = {"endpoint": entry.endpoint, "runs": runs}
    first = next(iter(tests.values()), {}).get("endpoint", {})
    document: dict[str, Any] = {
        "baseline_version": BASELINE_VERSION,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "endpoint": {**dict(endpoint), **{k: v for k, v in first.items() if v is not None}},
        "options": dict(options),
    }
    if fingerprint:
        document["fingerprint"] = dict(fingerprint)
    document["tests"] = tests
    return document


def write_baseline(path: str | os.PathLike[str], document: Mapping[str, Any]) -> Path:
    """Write atomically, so an interrupted save never leaves half a baseline."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n", "utf-8")
    os.replace(tmp, target)
    return target


@dataclass(frozen=True)
class Baseline(BaselineSource):
    """A loaded baseline file."""

    path: str
    document: dict[str, Any]
    # what check_comparability found ("comparability"), kept for every comparison
    _noted: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def endpoint(self) -> dict[str, Any]:
        return dict(self.document.get("endpoint", {}))

    @property
    def created_at(self) -> str:
        return str(self.document.get("created_at", ""))

    @property
    def fingerprint(self) -> dict[str, Any] | None:
        found = self.document.get("fingerprint")
        return dict(found) if isinstance(found, dict) and found else None

    def check_comparability(
        self, current: Mapping[str, Any] | None, *, strict: bool = False
    ) -> dict[str, Any]:
        """This session's fingerprint ``current`` against the file's: ``{"comparable":
        bool | None, "differs": [...], "note": str}``, then on every comparison; with
        ``strict``, a difference is a usage error naming the file and what differs."""
        result = comparability(
            self.fingerprint, current, strict=strict, source=f"baseline {self.path}"
        )
        self._noted["comparability"] = result
        return result

    def describe(self, nodeid: str) -> str:
        text = f"{self.path} ({self.created_at})"
        differs = comparability_text(self._noted.get("comparability"))
        return f"{text}, {differs}" if differs else text

    def run(self, nodeid: str, label: str) -> dict[str, Any] | None:
        run = self.document.get("tests", {}).get(nodeid, {}).get("runs", {}).get(label)
        return run if isinstance(run, dict) else None

    def references(
        self, nodeid: str, results: Sequence[RunResult], endpoint: Mapping[str, Any]
    ) -> Iterator[Reference]:
        """Each run against the baseline run with the same label: not compared (an
        inconclusive check) when there is none, or the model, API, load or workload
        differ, each differing field named with both values."""
        noted = self._noted.get("comparability")
        for result in results:
            stored = self.run(nodeid, result.label)
            if stored is None:
                reason = f"no baseline for {nodeid} [{result.label}] in {self.path}"
                yield Reference(self.path, reason=reason, comparability=noted)
                continue
            differs = self._differences(stored, result, endpoint)
            if differs:
                yield Reference(
                    self.path,
                    reason=not_comparable(differs),
                    comparability=with_differences(noted, differs),
                )
                continue
            yield Reference(
                f"baseline {self.path} ({self.created_at})",
                MetricsAccumulator.from_state(stored["state"]),
                comparability=noted,
                server_metrics=stored.get("server_metrics"),
                server_process=stored.get("server_process"),
                gpu=stored.get("gpu"),
            )

    def other_outputs(
        self, nodeid: str, result: RunResult, endpoint: Mapping[str, Any]
    ) -> OtherOutputs:
        """The baseline run of the same test and label's greedy outputs (empty, with the
        reason, when there is none, the model or API differ, the workload differs or
        the run kept no outputs)."""
        stored = self.run(nodeid, result.label)
        what = f"baseline {self.path} ({self.created_at})"
        reason = ""
        if stored is None:
            reason = f"no baseline for {nodeid} [{result.label}] in {self.path}"
        else:
            differs = self._differences(stored, result, endpoint, load=False)
            reason = not_comparable(differs) if differs else ""
        outputs = outputs_of_state(stored.get("state")) if stored and not reason else None
        if outputs is not None and not outputs:
            reason = f"the baseline run {nodeid} [{result.label}] kept no greedy outputs"
        if outputs is None or reason:
            return OtherOutputs(outputs_of_state(None), MatchedAgainst.BASELINE, what, reason)
        return OtherOutputs(outputs, MatchedAgainst.BASELINE, what)

    def _differences(
        self,
        stored: Mapping[str, Any],
        result: RunResult,
        endpoint: Mapping[str, Any],
        *,
        load: bool = True,
    ) -> list[str]:
        """What differs from the baseline run ``stored`` to ``result`` (model, API, load
        unless not ``load``: greedy outputs match under any load, workload)."""
        mine = self.endpoint
        return run_differences(
            {
                "model": mine.get("model"),
                "api": mine.get("api"),
                "load": stored.get("load", {}) if load else {},
                "workload": stored.get("workload", {}),
            },
            {
                "model": endpoint.get("model"),
                "api": endpoint.get("api"),
                "load": result.load if load else {},
                "workload": result.workload,
            },
        )


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read and check a baseline file; errors name the file and what is wrong."""
    where = str(path)
    try:
        document = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise LlmPerfUsageError(
            "baseline file not found (create one with --llm-baseline-save)", where=where
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LlmPerfUsageError(f"cannot read baseline: {exc}", where=where) from None
    if not isinstance(document, dict) or not isinstance(document.get("tests"), dict):
        raise LlmPerfUsageError("not a pytest-llmperf baseline (no 'tests' mapping)", where=where)
    version = document.get("baseline_version")
    if version != BASELINE_VERSION:
        raise LlmPerfUsageError(
            f"baseline_version {version!r} is not supported (expected {BASELINE_VERSION})",
            where=where,
        )
    return Baseline(where, document)
