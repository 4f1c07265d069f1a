"""The apps import each other top-down, and no two modules import each other, however far round.

The house reads: doors (api, mcp_api, dashboard, the admin modules, management
commands) call services and selectors (memories), which call telemetry, knowledge and
search; knowledge reads search's visibility snapshot; all of them sit on the store
(memoryproject's settings, database backend and the domain vocabulary every app speaks).
Every import counts, at the top of a module or inside a function. ``memoryproject``
holds both the project's entry points, which Django loads by name and which import the
doors, and the platform below every app; they are two nodes here, and no module may
import an entry point.
"""

import ast
import functools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("memories", "search", "knowledge", "telemetry", "oauth", "api", "mcp_api", "dashboard", "memoryproject")
# Loaded by name (ROOT_URLCONF, ASGI_APPLICATION, WSGI_APPLICATION), imported by no module.
ENTRY_POINTS = {"memoryproject.urls", "memoryproject.asgi", "memoryproject.wsgi"}
ENTRY_NODE = "memoryproject (entry points)"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for app in APPS for path in sorted((ROOT / app).rglob("*.py"))}


def _imported(module: str, path: Path) -> list[tuple[str, int]]:
    """Return (module imported, line) for every import statement in ``path``, relative ones resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # "from memoryproject import urls" imports the module memoryproject.urls.
            found.extend((f"{base}.{alias.name}", node.lineno) for alias in node.names)
    return found


def _node(module: str) -> str | None:
    """The graph node a project module belongs to, or None for a module outside the apps."""
    top = module.split(".")[0]
    if top not in APPS:
        return None
    if any(module == entry or module.startswith(f"{entry}.") for entry in ENTRY_POINTS):
        return ENTRY_NODE
    return top


@functools.cache
def _edges() -> dict[tuple[str, str], list[str]]:
    """Return {(importer node, imported node): ["path:line imports module", ...]} between different nodes."""
    edges = defaultdict(list)
    for module, path in _modules().items():
        source = _node(module)
        for target_module, line in _imported(module, path):
            target = _node(target_module)
            if target is not None and target != source:
                edges[(source, target)].append(f"{path.relative_to(ROOT)}:{line} imports {target_module}")
    return edges


@functools.cache
def _module_edges() -> dict[tuple[str, str], list[str]]:
    """Return {(importer module, imported module): ["path:line imports name", ...]} between the apps' modules.

    A name imported from a module (``from memories.selectors import memory_recall``) counts as an import of
    that module; a package's own ``__init__`` is the package's module.
    """
    modules = _modules()

    def module_of(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges = defaultdict(list)
    for module, path in modules.items():
        for name, line in _imported(module, path):
            target = module_of(name)
            if target is not None and target != module:
                edges[(module, target)].append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return edges


def _cycle(edges) -> list[str] | None:
    """Return one cycle of the graph as [a, b, ..., a], or None when it has none."""
    graph = defaultdict(set)
    for source, target in edges:
        graph[source].add(target)
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _explain(edges, cycle: list[str]) -> str:
    lines = [" -> ".join(cycle)]
    for source, target in zip(cycle, cycle[1:]):
        lines.append(f"{source} -> {target}:")
        lines.extend(f"    {where}" for where in edges[(source, target)])
    return "\n".join(lines)


def test_the_import_reader_sees_imports_inside_functions_and_resolves_relative_ones(tmp_path):
    module = tmp_path / "example.py"
    module.write_text("from . import lifecycle\n\n\ndef f():\n    from telemetry.models import Injection\n")
    assert _imported("memories.services.example", module) == [
        ("memories.services.lifecycle", 1),
        ("telemetry.models.Injection", 5),
    ]


def test_the_cycle_finder_finds_a_cycle_and_accepts_a_layered_graph():
    assert _cycle({("api", "memories"): [], ("memories", "telemetry"): [], ("telemetry", "memories"): []}) == [
        "memories",
        "telemetry",
        "memories",
    ]
    assert _cycle({("api", "memories"): [], ("memories", "search"): [], ("api", "search"): []}) is None


def test_every_app_and_entry_point_is_found():
    modules = _modules()
    for app in APPS:
        assert app in modules, f"{app}/__init__.py was not found under {ROOT}"
    assert ENTRY_POINTS <= set(modules)


def test_the_apps_import_each_other_without_a_cycle():
    edges = _edges()
    cycle = _cycle(edges)
    assert cycle is None, f"The apps import each other in a circle:\n{_explain(edges, cycle)}"


def test_no_module_imports_another_that_imports_it_back_however_far_round():
    edges = _module_edges()
    cycle = _cycle(edges)
    assert cycle is None, f"Modules import each other in a circle:\n{_explain(edges, cycle)}"


def test_the_module_reader_resolves_an_imported_name_to_its_module():
    edges = _module_edges()
    assert (
        "memories/selectors/conflicts.py:11 imports memories.validation"
        in edges[("memories.selectors.conflicts", "memories.validation")]
    )
    listing = edges[("memories.selectors.listing", "memories.models")]
    assert any(where.endswith(" imports memories.models.Memory") for where in listing)


def test_search_imports_no_other_project_app():
    edges = _edges()
    # Only the platform below every app: the database seam (memoryproject.dialect) and migration operations.
    found = [
        where
        for (source, target), lines in edges.items()
        if source == "search" and target != "memoryproject"
        for where in lines
    ]
    assert found == [], "search must stay below every app:\n" + "\n".join(found)


def test_knowledge_imports_only_search_of_the_other_apps():
    found = [
        where
        for (source, target), lines in _edges().items()
        if source == "knowledge" and target not in ("search", "memoryproject")
        for where in lines
    ]
    assert found == [], "knowledge sits below memories and beside telemetry, on search:\n" + "\n".join(found)


def test_telemetry_imports_nothing_of_memories():
    found = _edges().get(("telemetry", "memories"), [])
    assert found == [], "telemetry sits below memories:\n" + "\n".join(found)


def test_only_the_doors_and_the_entry_points_import_oauth():
    importers = {source for source, target in _edges() if target == "oauth"}
    assert importers <= {"api", "mcp_api", ENTRY_NODE}, importers


def test_memories_reaches_telemetry_rows_only_through_telemetry_services_and_selectors():
    found = [
        where
        for where in _edges().get(("memories", "telemetry"), [])
        if where.rpartition(" imports ")[2].startswith("telemetry.models")
    ]
    assert found == [], "telemetry writes and deletes its own rows (telemetry.services):\n" + "\n".join(found)


def test_the_project_package_below_its_entry_points_imports_no_app():
    found = [where for (source, _), lines in _edges().items() if source == "memoryproject" for where in lines]
    assert found == [], "memoryproject's settings, backend and vocabulary sit below every app:\n" + "\n".join(found)


def test_no_module_imports_an_entry_point():
    found = [where for (_, target), lines in _edges().items() if target == ENTRY_NODE for where in lines]
    assert found == [], "The entry points are loaded by name only:\n" + "\n".join(found)
