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


#: What the schema may read: the declarations it validates a scenario against (each scheme's and transport's
#: options beside its code, the wire's limits, the targets' names, the gradient profiles, the topology
#: builders, the straggler and flow-size draws, the training models and datasets), never a stage that consumes
#: a Scenario.
SCHEMA_READS = ("testbed.errors", "testbed.units", "testbed.topology", "testbed.stragglers", "testbed.gradient_profiles",
                "testbed.traffic.distributions", "testbed.dataplane.wire", "testbed.dataplane.program",
                "testbed.dataplane.targets", "testbed.agents.transport", "testbed.schemes",
                "testbed.training.models", "testbed.training.datasets")


def test_the_schema_reads_declarations_only_and_nothing_that_consumes_a_scenario():
    graph = import_graph()
    below = {m for m in nx.descendants(graph, "testbed.scenario") if not m.startswith("testbed.scenario.")}
    assert below and sorted(m for m in below if not any(m == d or m.startswith(d + ".") for d in SCHEMA_READS)) == []
    # and what it reads never reads it back (the registries see a Scenario only as an argument)
    assert not any(nx.has_path(graph, m, "testbed.scenario") for m in below)
