"""The package's layering: no import circle anywhere in ``testbed/``, counting imports inside functions too
(a module that imports another at call time still depends on it)."""

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[2] / "testbed"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> nx.DiGraph:
    """Module -> the project modules it imports: ``from pkg import sub`` depends on ``pkg.sub`` where that is
    a module (loading a submodule while its package loads is no circle), else on ``pkg``."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()

    def owner(name):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    for name, path in modules.items():
        graph.add_node(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [owner(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else owner(base) for a in node.names]
            else:
                continue
            graph.add_edges_from((name, target) for target in targets if target and target != name)
    return graph


def test_no_import_circle_in_the_package():
    graph = import_graph()
    assert graph.number_of_nodes() > 100
    assert list(nx.simple_cycles(graph)) == []


def test_the_simulator_and_the_controller_share_the_path_model_without_importing_each_other_both_ways():
    graph = import_graph()
    assert graph.has_edge("testbed.sim.fluid", "testbed.paths") and graph.has_edge("testbed.controller", "testbed.paths")
    assert not nx.has_path(graph, "testbed.sim", "testbed.controller")
