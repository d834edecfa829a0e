"""The package's layers import one way: no cycles, and ``specs`` at the bottom.

The import graph is read from the source with :mod:`ast`, every import
counted: module level, inside functions (a "lazy" import is still a
dependency), under ``TYPE_CHECKING``, and a module loaded by name
(``importlib.import_module("pytest_llmperf...")``, or any string constant that
is exactly a module's name, e.g. ``python -m`` a worker: hiding an import in a
string does not hide the dependency). A node is a sub-package
(``loadgen``, ``specs``, ...) or a top-level module (``plugin``, ``errors``,
...); the package's own ``__init__`` is the node ``pytest_llmperf``. The cycle
and layer checks use that whole graph.

A module *started in another process* by name is no import of the module
that starts it (:data:`PROCESS_STARTS`, each declared: ``python -m`` a local
worker or the simulator, the Ray actor's module loaded inside the actor); the
graph leaves those edges out, and a test checks that each is named by its
starter and never imported by it (nor, inside ``loadgen/``, by anyone).

``loadgen/``'s depth is measured on the *runtime* graph: the same, less the
imports made only under ``if TYPE_CHECKING:`` (annotations: the module is
handed such an object and never loads that module to use it). Each process's
chain is measured: a worker's from its entry module down.

The layers, low to high (each imports only layers before it): ``errors``,
``tokens``, ``tls``, ``redaction``, ``svg``, ``lazy_names`` | ``apis`` | ``workloads``,
``sim`` | ``specs``,
``gpu`` (errors and specs only) | ``client`` | ``managed_server``, ``metrics``,
``server_metrics`` | ``results`` | ``loadgen``,
``slo``, ``analysis`` |
``methodology`` | ``history`` | ``reports``, ``export`` | ``plugin`` and the package's front
door.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest_llmperf

ROOT = Path(pytest_llmperf.__file__).resolve().parent
PACKAGE = ROOT.name
SPECS_MAY_IMPORT = {"errors", "tokens", "apis", "workloads"}  # and, through workloads, tls
SPECS_REACH = SPECS_MAY_IMPORT | {"tls"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def imported_modules(
    name: str, source: str, *, is_package: bool = False, runtime: bool = False
) -> set[str]:
    """The package's modules that module ``name`` imports, anywhere in its ``source``
    (``runtime``: not those imported only under ``if TYPE_CHECKING:``)."""
    here = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()
    for node in _walk(ast.parse(source), runtime=runtime):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*here[: len(here) - node.level + 1], *filter(None, [base])])
            for alias in node.names:  # ``from pytest_llmperf import hooks`` imports a module
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
        elif _is_import_module(node):
            assert isinstance(node, ast.Call)
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.add(arg.value)
        elif isinstance(node, ast.Constant) and node.value in MODULES:
            found.add(node.value)  # a module named by a string: loaded by name somewhere
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}


def _walk(tree: ast.AST, *, runtime: bool) -> Iterable[ast.AST]:
    """Every node of ``tree`` (``runtime``: skipping ``if TYPE_CHECKING:`` bodies)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if runtime and isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def _is_import_module(node: ast.AST) -> bool:
    """``import_module(...)`` or ``importlib.import_module(...)`` with an argument."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name == "import_module"


def layer(module: str) -> str:
    """``pytest_llmperf.loadgen.run`` -> ``loadgen``; ``pytest_llmperf.plugin`` -> ``plugin``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


# (starter, entry): ``starter`` runs ``entry`` in another process, naming it in a string.
PROCESS_STARTS = {
    (f"{PACKAGE}.loadgen.scale_out.workers", f"{PACKAGE}.loadgen.scale_out.worker_process"),
    # the Ray actor's shell (pickled by reference: the actor imports ray_shell, which
    # loads ray_actor by name inside it; the parent's ray_workers hands Ray the shell)
    (f"{PACKAGE}.loadgen.scale_out.ray_shell", f"{PACKAGE}.loadgen.scale_out.ray_actor"),
    (f"{PACKAGE}.sim.process", f"{PACKAGE}.sim"),  # python -m pytest_llmperf.sim
    # python -m pytest_llmperf.managed_server.watchdog: one per process, ends orphaned servers
    (f"{PACKAGE}.managed_server.guard", f"{PACKAGE}.managed_server.watchdog"),
}


def module_graph(*, runtime: bool = False) -> dict[str, set[str]]:
    """Each module's imports of the package (``runtime``: not ``TYPE_CHECKING``-only ones),
    less the process starts."""
    return {
        name: imported_modules(
            name,
            path.read_text(encoding="utf-8"),
            is_package=path.name == "__init__.py",
            runtime=runtime,
        )
        - {name}
        - {entry for starter, entry in PROCESS_STARTS if starter == name}
        for name, path in MODULES.items()
    }


def layer_graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for source, targets in module_graph().items():
        edges[layer(source)] |= {layer(t) for t in targets} - {layer(source)}
    return dict(edges)


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle of ``edges`` as ``[a, b, ..., a]``, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def reachable(edges: Mapping[str, Iterable[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_graph_reader_counts_every_import_and_finds_cycles() -> None:
    source = """
from typing import TYPE_CHECKING
from pytest_llmperf import hooks
from . import plan
if TYPE_CHECKING:
    from pytest_llmperf.specs.run import RunSpec
def later():
    import pytest_llmperf.results.recorder
    from ..methodology.search import max_rate
    importlib.import_module("pytest_llmperf.loadgen.scale_out.ray_actor")
    import_module("ray")
WORKER = "pytest_llmperf.loadgen.scale_out.worker_process"  # python -m, in another process
"""
    runtime = {
        f"{PACKAGE}.hooks",
        f"{PACKAGE}.loadgen.plan",
        f"{PACKAGE}.results.recorder",
        f"{PACKAGE}.methodology.search",
        f"{PACKAGE}.loadgen.scale_out.ray_actor",
        f"{PACKAGE}.loadgen.scale_out.worker_process",
    }
    name = f"{PACKAGE}.loadgen.session"
    assert imported_modules(name, source) == runtime | {f"{PACKAGE}.specs.run"}
    assert imported_modules(name, source, runtime=True) == runtime
    assert layer(f"{PACKAGE}.specs.run") == "specs" and layer(f"{PACKAGE}.plugin") == "plugin"
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}}) is None


def test_no_import_cycle_between_sub_packages() -> None:
    cycle = find_cycle(layer_graph())
    assert cycle is None, "sub-packages import each other in a cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_between_modules() -> None:
    cycle = find_cycle(module_graph())
    assert cycle is None, "modules import each other in a cycle: " + " -> ".join(cycle or [])


def test_specs_import_nothing_above_them() -> None:
    edges = layer_graph()
    direct = edges.get("specs", set())
    assert direct <= SPECS_MAY_IMPORT, f"specs imports {sorted(direct - SPECS_MAY_IMPORT)}"
    above = reachable(edges, "specs") - SPECS_REACH
    assert not above, f"specs reaches {sorted(above)} through its imports"


def test_history_is_below_reports() -> None:
    """The history store is data, like ``metrics``: ``reports`` read it (the history gate,
    the trend page) and the plugin appends to it, so ``history`` reaches neither, and
    nothing below it (the layers it may use) reaches it."""
    edges = layer_graph()
    above = reachable(edges, "history") & {"reports", "plugin", PACKAGE}
    assert not above, f"history reaches {sorted(above)}"
    for lower in ("specs", "workloads", "client", "metrics", "loadgen", "slo", "analysis"):
        assert "history" not in reachable(edges, lower), f"{lower} reaches history"


# "gpu": the process's one NVML loader (gpu/nvml.py), shared with --llm-gpu's sampler so
# that NVML is started once per process whoever asks first
MANAGED_SERVER_MAY_IMPORT = {"client", "errors", "gpu", "lazy_names", "redaction", "workloads"}
GPU_MAY_IMPORT = {"errors", "specs"}


def test_gpu_sits_on_errors_and_specs() -> None:
    """``gpu/`` (NVML, DCGM pages, amdsmi, the energy arithmetic, ``runs[].gpu``) imports
    only ``errors`` and ``specs`` (and third-party libraries): the server metrics read its
    DCGM parser for a ``gpu`` page, the results hold its figures, the load generator runs
    its sampler, the managed server shares its NVML loader; it reaches none of them."""
    edges = layer_graph()
    direct = edges.get("gpu", set())
    assert direct <= GPU_MAY_IMPORT, f"gpu imports {sorted(direct - GPU_MAY_IMPORT)}"
    above = reachable(edges, "gpu") - GPU_MAY_IMPORT - SPECS_REACH
    assert not above, f"gpu reaches {sorted(above)} through its imports"


def test_managed_server_sits_beside_server_metrics() -> None:
    """The server under test is started, watched and stopped below the load generator:
    ``managed_server`` imports the client (its first-token request), ``errors`` and
    ``redaction`` (and ``workloads``' Sample), and reaches nothing that measures, judges
    or reports; ``loadgen`` and the plugin import it."""
    edges = layer_graph()
    direct = edges.get("managed_server", set())
    assert direct <= MANAGED_SERVER_MAY_IMPORT, f"managed_server imports {sorted(direct)}"
    above = reachable(edges, "managed_server") & {
        "metrics",
        "loadgen",
        "slo",
        "analysis",
        "methodology",
        "history",
        "reports",
        "plugin",
        "server_metrics",
        PACKAGE,
    }
    assert not above, f"managed_server reaches {sorted(above)}"


def test_the_simulator_serves_the_formats_it_imports() -> None:
    """The simulator imports only ``tokens``, ``apis`` (each format's server half, at the
    end of its module), ``lazy_names`` (a leaf: its names loaded on first use) and
    itself; ``apis`` imports only ``errors``, ``tokens`` and itself, never the
    simulator: a format's both halves sit in one module below both."""
    edges = layer_graph()
    allowed = {"tokens", "apis", "lazy_names"}
    assert edges.get("sim", set()) <= allowed, sorted(edges.get("sim", set()))
    assert edges.get("apis", set()) <= {"errors", "tokens"}, sorted(edges.get("apis", set()))


def test_results_sit_below_the_load_generator() -> None:
    """The load generator writes a run into ``results/`` (records, accumulators,
    ``RunResult``, progress snapshots); verdicts, analyses, reports and the history read
    them there and never reach the load generator."""
    edges = layer_graph()
    assert "loadgen" not in reachable(edges, "results"), "results reaches loadgen"
    for reader in ("slo", "analysis", "reports", "history"):
        assert "loadgen" not in reachable(edges, reader), f"{reader} reaches loadgen"


def test_methodology_is_above_loadgen_slo_and_analysis() -> None:
    edges = layer_graph()
    for lower in ("loadgen", "slo", "analysis", "specs", "client", "metrics"):
        assert "methodology" not in reachable(edges, lower), f"{lower} reaches methodology"


LOADGEN = f"{PACKAGE}.loadgen"
# Issue 23's bound: no chain of runtime imports inside loadgen/ longer than 7 modules.
LOADGEN_MAX_DEPTH = 7


def depth(edges: Mapping[str, Iterable[str]], node: str, memo: dict[str, int]) -> int:
    """Modules on the longest import chain from ``node`` (``edges`` has no cycle)."""
    if node not in memo:
        memo[node] = 1 + max((depth(edges, n, memo) for n in edges.get(node, ())), default=0)
    return memo[node]


def loadgen_graph() -> dict[str, set[str]]:
    """``loadgen/``'s modules and their runtime imports of each other (its ``__init__``
    files, which only re-export, left out)."""
    inside = {
        m for m, p in MODULES.items() if m.startswith(LOADGEN + ".") and p.name != "__init__.py"
    }
    return {m: t & inside for m, t in module_graph(runtime=True).items() if m in inside}


def _import_statement_targets(path: Path) -> set[str]:
    """What ``import`` and ``from ... import`` statements of ``path`` name (absolute ones:
    ``loadgen/`` imports no other way)."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            named |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return named


def test_a_process_start_names_its_entry_and_never_imports_it() -> None:
    """A process start is no import only if the starter never loads the entry itself;
    and no module of ``loadgen/`` imports a worker's entry module (the parent process
    would then run the worker side's imports)."""
    for starter, entry in PROCESS_STARTS:
        path = MODULES[starter]
        named = imported_modules(starter, path.read_text(encoding="utf-8"))
        assert entry in named, f"{starter} no longer starts {entry}: update PROCESS_STARTS"
        assert entry not in _import_statement_targets(path), f"{starter} imports {entry}"
        if entry.startswith(LOADGEN + "."):
            importers = [m for m, p in MODULES.items() if entry in _import_statement_targets(p)]
            assert not importers, f"{entry} is imported by {importers}"


def test_loadgen_is_no_deeper_than_its_bound() -> None:
    edges = loadgen_graph()
    memo: dict[str, int] = {}
    deepest = max(edges, key=lambda m: depth(edges, m, memo))
    chain = [deepest]
    while edges.get(chain[-1]):
        chain.append(max(edges[chain[-1]], key=lambda m: memo[m]))
    assert len(chain) <= LOADGEN_MAX_DEPTH, "loadgen/ is too deep: " + " -> ".join(chain)


def names_at_runtime(source: str, name: str) -> bool:
    """Whether ``source`` uses ``name`` as a value: imports it outside ``if TYPE_CHECKING:``
    or names it anywhere but in an annotation (docstrings and comments are no use)."""
    tree = ast.parse(source)
    annotations: set[int] = set()
    for node in ast.walk(tree):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        annotations |= {id(n) for a in found if a is not None for n in ast.walk(a)}
    for node in _walk(tree, runtime=True):
        if id(node) in annotations:
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            named = {(a.asname or a.name).split(".")[-1] for a in node.names}
        elif isinstance(node, ast.Name):
            named = {node.id}
        elif isinstance(node, ast.Attribute):
            named = {node.attr}
        else:
            continue
        if name in named:
            return True
    return False


def test_the_runtime_name_reader_skips_annotations_and_type_checking() -> None:
    passes = '''
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from pytest_llmperf.specs.run import RunSpec
def run(spec: RunSpec) -> RunSpec:
    """Takes a RunSpec."""
    x: RunSpec = spec
    return x
'''
    assert not names_at_runtime(passes, "RunSpec")
    assert names_at_runtime("from pytest_llmperf.specs.run import RunSpec", "RunSpec")
    assert names_at_runtime("import pytest_llmperf.specs.run as r\nr.RunSpec()", "RunSpec")
    assert names_at_runtime("def f(s: 'RunSpec'):\n    isinstance(s, RunSpec)", "RunSpec")


def test_only_the_planner_and_the_dispatcher_read_a_run_spec() -> None:
    """Below the plan everything takes the plan: ``RunSpec`` is used at runtime (imported
    outside ``TYPE_CHECKING``, constructed, checked against) only by the planner, which
    plans one and derives the spec a generator's run runs (overrides, ``--llm-scale``,
    the session's tokenizer), and by the dispatcher (today it needs none). A module
    that only passes a spec through may name it in annotations. (An attribute read on
    a spec handed in as a parameter is not seen here; the generator reads none, its
    ``run`` and ``execute_spec`` have the planner's ``effective_spec`` and
    ``sized_spec`` do it.)"""
    readers = {
        m
        for m, p in MODULES.items()
        if m.startswith(LOADGEN + ".")
        and names_at_runtime(p.read_text(encoding="utf-8"), "RunSpec")
    }
    allowed = {f"{LOADGEN}.plan.planner", f"{LOADGEN}.scale_out.dispatcher"}
    assert readers <= allowed, f"these read RunSpec: {sorted(readers - allowed)}"


APIS_MAY_IMPORT = {"errors", "tokens"}


def test_the_api_formats_are_a_floor_below_client_sim_and_workloads() -> None:
    """``apis/`` (one module per wire format, and their registry) imports only
    ``errors``, ``tokens`` and itself: the client, the simulator and the workloads ask
    a format what they need, so no format may reach back up to them."""
    edges = layer_graph()
    direct = edges.get("apis", set())
    assert direct <= APIS_MAY_IMPORT, f"apis imports {sorted(direct - APIS_MAY_IMPORT)}"
    above = reachable(edges, "apis") - APIS_MAY_IMPORT
    assert not above, f"apis reaches {sorted(above)} through its imports"


# Where an API's name may be compared as a string: its own modules (the simulator's
# side of each is at the end of its module), nowhere else.
API_NAME_HOMES = ("apis",)


def _api_like(node: ast.expr) -> bool:
    """A name or attribute called ``api`` or ending in ``api`` (``self._api``,
    ``endpoint.api``), or ``(api or self.api)``."""
    if isinstance(node, ast.BoolOp):
        return any(_api_like(v) for v in node.values)
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return isinstance(name, str) and name.lower().endswith("api")


def _strings(node: ast.expr) -> set[str]:
    """The string constants ``node`` is, or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {v for e in node.elts for v in _strings(e)}
    return set()


def api_name_comparisons(source: str, names: Iterable[str]) -> list[str]:
    """Each comparison in ``source`` of an ``api``-like name against a string constant
    that is one of the API ``names`` (``api == "chat"``, ``api in ("responses", ...)``)."""
    names = set(names)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_api_like(o) for o in operands) and any(_strings(o) & names for o in operands):
                found.append((node.lineno, node.col_offset, ast.unparse(node)))
    return [f"line {line}: {text}" for line, _, text in sorted(found)]


def test_the_api_comparison_finder_finds_them() -> None:
    names = {"chat", "messages", "embeddings"}
    source = """
if api == "chat" or self._api != "embeddings": pass
if (api or self.api) == "messages": pass
if endpoint.api in ("chat", "completions"): pass
if api == "tok" or kind == "chat" or fmt.streams_tokens: pass
"""
    assert [f.split(":")[0] for f in api_name_comparisons(source, names)] == [
        "line 2",
        "line 2",
        "line 3",
        "line 4",
    ]


def test_no_api_name_is_compared_outside_the_registry() -> None:
    """The API registry rule: code outside ``apis/`` asks a format
    (:class:`pytest_llmperf.apis.format.ApiFormat`'s attributes) and never compares an
    API's name, so a new API is one module and a line in the registry."""
    from pytest_llmperf.apis import Api

    names = {a.value for a in Api}
    found = [
        f"{module} {hit}"
        for module, path in MODULES.items()
        if layer(module) not in API_NAME_HOMES
        for hit in api_name_comparisons(path.read_text(encoding="utf-8"), names)
    ]
    assert not found, "API names compared outside apis/: " + "; ".join(found)


PYTEST_SIDE_MAX_LINES = 300  # issue 23's limit on the pytest side (issue 38, item 4)


def test_the_pytest_side_is_small() -> None:
    """No module of the pytest side (``plugin/``, ``hooks.py``, ``hook_calls.py``) is over
    300 lines: the hooks live in small modules with one job each, over one plain state
    object (``plugin/state.py``), so following one hook means reading one file."""
    side = [
        path
        for name, path in MODULES.items()
        if name == f"{PACKAGE}.plugin"
        or name.startswith(f"{PACKAGE}.plugin.")
        or name in (f"{PACKAGE}.hooks", f"{PACKAGE}.hook_calls")
    ]
    assert len(side) > 3, "the pytest side was not found"
    lengths = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in side
    }
    long = {name: n for name, n in lengths.items() if n > PYTEST_SIDE_MAX_LINES}
    assert not long, f"over {PYTEST_SIDE_MAX_LINES} lines: {long}"


def test_exports_read_finished_results_only() -> None:
    """``export/`` sends a finished session's report (and its runs' event logs) to
    OpenTelemetry and MLflow: it reads results and never reaches what measures, judges or
    reports (it runs after them), and only the plugin imports it."""
    edges = layer_graph()
    above = reachable(edges, "export") & {
        "loadgen",
        "slo",
        "analysis",
        "methodology",
        "history",
        "reports",
        "plugin",
        PACKAGE,
    }
    assert not above, f"export reaches {sorted(above)}"
    importers = {node for node, targets in edges.items() if "export" in targets} - {"export"}
    assert importers <= {"plugin"}, f"export is imported by {sorted(importers)}"
