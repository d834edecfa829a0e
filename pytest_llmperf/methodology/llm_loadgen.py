"""What the ``llm_loadgen`` fixture hands a test: the load generator plus the draft's procedures.

:class:`LlmLoadgen` is the configured
:class:`~pytest_llmperf.loadgen.generator.LoadGenerator` (``run()``,
``attach()``, ``stop()``, ``for_endpoint()``) with the methodology's
procedures as methods: ``sweep()``, ``max_rate()``, ``max_concurrency()``,
``warm_up()``.

Why a subclass here rather than methods on ``LoadGenerator``: the
procedures are built on the generator (they call ``run()`` again and again,
and judge SLOs on the results), so they sit a layer above it. Methods on
``LoadGenerator`` would have to import them from there, lazily, and that is
an import going up (``loadgen -> methodology -> loadgen``). Defined here,
every import points down: the fixture's object is a load generator that
knows the procedures, and ``loadgen`` knows nothing of them.
"""

from __future__ import annotations

from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.methodology.search import max_concurrency, max_rate
from pytest_llmperf.methodology.sweep import latency_sweep
from pytest_llmperf.methodology.warm_up import warm_up

__all__ = ["LlmLoadgen"]


class LlmLoadgen(LoadGenerator):
    """A :class:`LoadGenerator` with the methodology's sweeps, searches and warm-up.

    Each procedure's runs are ungated (reported, not judged) unless it
    confirms its answer with one gated run, and each attaches its table or
    curve to the test's reports unless ``attach=False``; keyword
    ``overrides`` are ``run()`` overrides applied to every run it makes. The
    methods *are* the module functions (``gen.sweep(...)`` is
    ``latency_sweep(gen, ...)``), so signatures and docs cannot drift apart.
    """

    sweep = latency_sweep  # latency-vs-load curve over offered rates, knee and saturation
    max_rate = max_rate  # highest offered rate meeting the SLOs (binary search)
    max_concurrency = max_concurrency  # highest closed-loop concurrency (double, then bisect)
    warm_up = warm_up  # warm-up with verification: probes until latency settles
