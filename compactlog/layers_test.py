"""The floors, checked on the source (record < storage < cleaner < coordinator < server / spark <
api < cli): the coordinators import neither the broker nor the CLI, every API is declared in
``server/apis/``, the CLI and ``api.py`` reach the broker and the coordinators through their
packages' public names only, and no module of compactlog imports itself back through another.
And the tests follow their modules (architecture.md, "Tests"): a test file in compactlog/ is named
after a module or package beside it."""

from __future__ import annotations

import ast
import functools
import os

import compactlog
from compactlog import coordinator, server
from compactlog.server.dispatch import DECLARED_APIS

PACKAGE = os.path.dirname(os.path.abspath(compactlog.__file__))
ROOT = os.path.dirname(PACKAGE)


def _modules(include_tests: bool = False) -> dict[str, str]:
    """dotted name -> path of every module of compactlog."""
    out = {}
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if not name.endswith(".py"):
                continue
            if not include_tests and (name.endswith("_test.py") or name == "conftest.py"):
                continue
            path = os.path.join(folder, name)
            out[os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__")] = path
    return out


@functools.lru_cache(maxsize=None)
def _tree(path: str) -> ast.AST:
    with open(path) as f:
        return ast.parse(f.read())


def _imports(dotted: str, path: str) -> list[tuple[str, tuple[str, ...]]]:
    """(module imported, names taken from it) for each import of the file, at any level."""
    package = dotted.split(".") if path.endswith("__init__.py") else dotted.split(".")[:-1]
    out = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            out.append((".".join(p for p in (base, node.module) if p), tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            out.extend((a.name, ()) for a in node.names)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for dotted, path in modules.items():
        deps = set()
        for target, names in _imports(dotted, path):
            for name in names or ("",):
                candidate = f"{target}.{name}"
                deps.add(candidate if candidate in modules else target)
        graph[dotted] = {d for d in deps if d in modules and d != dotted}
    return graph


def test_the_coordinators_import_only_record_and_storage():
    allowed = ("compactlog.record", "compactlog.storage", "compactlog.errors", "compactlog.lazy", "compactlog.coordinator")
    bad = sorted(f"{m} imports {t}" for m, path in _modules().items() if m.startswith("compactlog.coordinator")
                 for t, _ in _imports(m, path)
                 if t.startswith("compactlog") and not t.startswith(allowed))
    assert bad == []


def test_every_api_is_declared_in_server_apis():
    assert all(a.handler.__module__.startswith("compactlog.server.apis.") for a in DECLARED_APIS)
    declared_elsewhere = []
    for dotted, path in _modules().items():
        if dotted.startswith("compactlog.server.apis."):
            continue
        for node in ast.walk(_tree(path)):
            called = getattr(node.func, "id", getattr(node.func, "attr", None)) if isinstance(node, ast.Call) else None
            if called == "ApiHandler":
                declared_elsewhere.append(dotted)
    assert declared_elsewhere == []
    assert sum(a.coordinator for a in DECLARED_APIS) == 20     # 14 group APIs, 5 transaction ones, InitProducerId


def test_the_cli_and_the_api_use_public_names_only():
    public = {"compactlog.server": set(server.__all__), "compactlog.coordinator": set(coordinator.__all__)}
    bad = []
    for dotted, path in _modules().items():
        if not (dotted.startswith("compactlog.cli") or dotted == "compactlog.api"):
            continue
        for target, names in _imports(dotted, path):
            for package, exported in public.items():
                if target.startswith(package + "."):
                    bad.append(f"{dotted} imports {target}")
                elif target == package and not set(names) <= exported:
                    bad.append(f"{dotted} imports {sorted(set(names) - exported)} from {package}")
    assert bad == []


def test_public_names_resolve():
    for package in (server, coordinator):
        for name in package.__all__:
            assert getattr(package, name) is not None, (package.__name__, name)


def test_no_import_cycle_in_compactlog():
    graph = _graph()

    def reaches(start, goal, seen):
        for nxt in graph[start]:
            if nxt == goal or (nxt not in seen and not seen.add(nxt) and reaches(nxt, goal, seen)):
                return True
        return False
    assert sorted(m for m in graph if reaches(m, m, set())) == []


# the unit tests' files that check several modules at once, each named after what it checks
CROSS_CUTTING_TESTS = {
    "layers_test.py",                   # this file: the floors of the whole package
    "server/floors_test.py",            # server/ beside spark/, not on it
    "record/kafka_vectors_test.py",     # Kafka's own bytes through the whole record codec
}


def test_every_test_file_sits_beside_its_module():
    """``X_test.py`` tests the module ``X.py`` (or the package ``X/``) in its folder, and
    ``X_aspect_test.py`` one aspect of it (``batch_fuzz_test.py``, ``log_append_faults_test.py``):
    a test file named after a module that moved or no longer exists is found here."""
    stray = []
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if not name.endswith("_test.py"):
                continue
            rel = os.path.relpath(os.path.join(folder, name), PACKAGE)
            if rel in CROSS_CUTTING_TESTS:
                continue
            parts = name[:-len("_test.py")].split("_")
            if not any(os.path.isfile(os.path.join(folder, "_".join(parts[:n]) + ".py"))
                       or os.path.isdir(os.path.join(folder, "_".join(parts[:n])))
                       for n in range(len(parts), 0, -1)):
                stray.append(rel)
    assert sorted(stray) == []
