"""The package's layers, read from its imports (every ``import``, also those inside functions): no
module reaches itself again through the modules it imports, and each layer imports only what
ARCHITECTURE.md lets it (faults know no store or cluster, checks read histories, never live systems)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"harness": "eos_harness", "models": "eos_harness.models", "faults": "eos_harness.faults",
           "suites": "eos_harness.suites"}


def _modules() -> dict[str, Path]:
    modules = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports. ``from P import N`` imports the module ``P.N`` when
    there is one, else ``P`` (a package's ``__init__`` run on the way to a submodule is not an edge)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                             for a in node.names}
        graph[name] = {m for m in imported if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 150, "the walk found too few modules"
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the walk sees one
    found = cycles(graph)
    assert not found, "import cycles (each a set of modules that import one another, directly or not):\n" + "\n".join(
        "  " + " <-> ".join(c) + "\n" + "\n".join(f"    {m} imports {sorted(graph[m] & set(c))}" for m in c)
        for c in found)


def test_each_layer_imports_only_what_it_may():
    graph = import_graph()
    broken = []
    for module, imported in graph.items():
        for other in imported:
            if module.startswith("eos_harness.models.") and not other.startswith("eos_harness.models."):
                broken.append(f"{module} (a pure model) imports {other}")
            if module.startswith("eos_harness.faults.") and not other.startswith(("eos_harness.faults.",
                                                                                   "eos_harness.models.")):
                broken.append(f"{module} (faults know no store, broker or cluster) imports {other}")
            if module.startswith("eos_harness.process.") and other.startswith("eos_harness.kafka_streams"):
                broken.append(f"{module} (the store server knows a store's kind only by its Lending) imports {other}")
            if module.endswith(".checks") and other.startswith(("eos_harness.stores", "eos_harness.process",
                                                                "eos_harness.cluster", "eos_harness.broker")):
                broken.append(f"{module} (checks read histories, never live systems) imports {other}")
    assert not broken, "\n".join(sorted(broken))
