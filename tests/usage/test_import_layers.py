"""The package's modules import each other one way: no import cycle, counting imports inside functions too.

The graph is read from the source with ast, without importing anything: an edge A -> B for every
`import`/`from ... import` in A that names B (at the top of the file or inside a function or class), and A -> P for
each package P above B that is not above A (importing B runs P's __init__.py first). Imports under
`if TYPE_CHECKING:` are left out: they never run. A cycle fails the test, printed module by module.
"""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = "habana_assist"


def package_modules(root=ROOT, package=PACKAGE):
    """{dotted module name: path} for every .py file of the package (a package by its __init__.py)."""
    modules = {}
    for folder, dirs, files in os.walk(os.path.join(root, package)):
        dirs[:] = sorted(d for d in dirs if os.path.isfile(os.path.join(folder, d, "__init__.py")))
        rel = os.path.relpath(folder, root).split(os.sep)
        for name in sorted(files):
            if name.endswith(".py"):
                parts = rel if name == "__init__.py" else rel + [name[:-3]]
                modules[".".join(parts)] = os.path.join(folder, name)
    return modules


def _is_type_checking(test):
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree):
    """Every Import/ImportFrom node of the tree, outside `if TYPE_CHECKING:` bodies (their `else:` counts)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def import_graph(modules):
    """{module: {modules it imports}} over the package's own modules."""
    graph = {}
    for name, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        is_package = path.endswith("__init__.py")
        here = name.split(".") if is_package else name.split(".")[:-1]  # the package relative imports start from
        targets = set()
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                bases = [alias.name for alias in node.names]
                names = [[] for _ in bases]
            else:
                if node.level:
                    base = here[: len(here) - (node.level - 1)] + ([node.module] if node.module else [])
                    bases = [".".join(base)]
                else:
                    bases = [node.module]
                names = [[alias.name for alias in node.names]]
            for base, imported in zip(bases, names):
                found = [f"{base}.{n}" for n in imported if f"{base}.{n}" in modules]  # `from pkg import module`
                if base in modules and (not imported or len(found) < len(imported)):  # names defined in base
                    found.append(base)
                for target in found:
                    parts = target.split(".")
                    for i in range(1, len(parts) + 1):
                        above = ".".join(parts[:i])
                        # a package above the importer is already being imported: no edge to it
                        if above in modules and not (name == above or name.startswith(above + ".")):
                            targets.add(above)
        targets.discard(name)
        graph[name] = targets
    return graph


def find_cycles(graph):
    """The strongly connected components with more than one module (Tarjan), each sorted, and one cycle through
    each as a list of modules (first == last)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for component in components:
        members = set(component)
        start = component[0]
        # the shortest way back to start, within the component (breadth first)
        previous, frontier = {start: None}, [start]
        cycle = None
        while frontier and cycle is None:
            next_frontier = []
            for v in frontier:
                for w in sorted(graph[v] & members):
                    if w == start:
                        path = [v]
                        while previous[path[-1]] is not None:
                            path.append(previous[path[-1]])
                        cycle = path[::-1] + [start]
                        break
                    if w not in previous:
                        previous[w] = v
                        next_frontier.append(w)
                if cycle is not None:
                    break
            frontier = next_frontier
        cycles.append(cycle)
    return components, cycles


def test_import_graph_reads_the_package():
    """The graph holds the edges everyone knows, so an empty cycle list means something."""
    graph = import_graph(package_modules())
    assert "habana_assist.generation.utils" in graph["habana_assist"], graph["habana_assist"]
    assert "habana_assist.errors" in graph["habana_assist.configuration_utils"], graph[
        "habana_assist.configuration_utils"
    ]


def test_cycle_finder_finds_a_planted_cycle():
    """A cycle through a function-level import and a package's __init__.py is found; one under TYPE_CHECKING is
    not."""
    graph = {"p": {"p.a"}, "p.a": {"q"}, "q": {"q.b"}, "q.b": {"p"}, "r": {"p"}}
    components, cycles = find_cycles(graph)
    assert components == [["p", "p.a", "q", "q.b"]], components
    assert cycles == [["p", "p.a", "q", "q.b", "p"]], cycles


def test_function_and_type_checking_imports(tmp_path):
    """Function-level imports make edges; imports under `if TYPE_CHECKING:` do not; a package above the importer
    is no edge, one above a module imported from elsewhere is."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n"
        "def f():\n    from .sub.c import Y\n"
    )
    (pkg / "b.py").write_text("from . import a\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from .. import b\nfrom . import d\n")
    (pkg / "sub" / "d.py").write_text("import pkg.b\n")
    graph = import_graph(package_modules(str(tmp_path), "pkg"))
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.sub", "pkg.sub.c"},
        "pkg.b": {"pkg.a"},
        "pkg.sub": set(),
        "pkg.sub.c": {"pkg.b", "pkg.sub.d"},
        "pkg.sub.d": {"pkg.b"},
    }, graph


def test_no_import_cycle():
    """No module imports, directly or through others, a module that imports it back (imports inside functions
    count; only `if TYPE_CHECKING:` imports are exempt): each package's base modules sit below what builds on
    them."""
    graph = import_graph(package_modules())
    components, cycles = find_cycles(graph)
    if components:
        lines = []
        for component, cycle in zip(components, cycles):
            lines.append(f"{len(component)} modules import each other: {', '.join(component)}")
            lines.append("  for example: " + " -> ".join(cycle))
        pytest.fail(
            "import cycles (move the shared part down a layer, or import upward only under "
            "`if TYPE_CHECKING:`):\n" + "\n".join(lines),
            pytrace=False,
        )
