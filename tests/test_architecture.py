"""The package's shape, checked: the folder tree reads as the architecture (no folder of more than
16 modules), no module imports another in a cycle, imports point inward (a layer never imports
one above it), code outside ``agent/`` touches no private attribute of the agent's objects, and
the old import paths saved notebooks and older bridges use still import."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "extension" / "ipyagent"
MAX_MODULES = 16

# lower rank = inner layer; a module may import its own rank and below (README "Layout")
RANKS = {
    "text": 0, "patterns": 0,
    "session": 1,
    "hooks": 2, "compaction": 2,
    "core": 3, "providers": 3,
    "agent": 4,
    "display": 5, "explorer": 5, "store": 5, "bridge": 5, "testing": 5,
    "kernel": 6,
    "cli": 7, "notebook": 7,  # notebook/: the old import paths, thin re-exports
    "__init__": 8, "__main__": 8,
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "labextension" in path.parts:
            continue
        parts = ["ipyagent", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The ipyagent modules ``path`` imports (anywhere in it, lazily or not)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            out |= subs
            if len(subs) < len(node.names) and node.module in MODULES:
                out.add(node.module)  # names from the module itself, not only submodules of a package
    return out


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_no_folder_holds_more_than_sixteen_modules():
    crowded = {}
    for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > MAX_MODULES:
            crowded[str(folder.relative_to(PACKAGE.parent))] = len(modules)
    assert crowded == {}


def test_no_module_imports_another_in_a_cycle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []
    counter = 0
    for root in sorted(GRAPH):  # Tarjan's strongly connected components, iteratively
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    assert cycles == []


def test_imports_point_inward():
    assert {_layer(m) for m in MODULES} <= RANKS.keys()
    # (the root package is the public facade every import loads first: ``ipyagent.__version__``)
    outward = sorted(f"{module} -> {target}" for module, targets in GRAPH.items() for target in targets
                     if target != "ipyagent" and RANKS[_layer(target)] > RANKS[_layer(module)])
    assert outward == []


def _private(attr: str) -> bool:
    return attr.startswith("_") and not attr.startswith("__")


def test_no_code_outside_agent_touches_a_private_attribute_of_an_agent():
    """No ``agent._summarizer = …``, ``probe._request(…)`` (an Agent named otherwise) or the like
    outside ``agent/``: a private name of a class of ``agent/``, used on anything but ``self``."""
    private = set()
    for name, path in MODULES.items():
        if _layer(name) != "agent":
            continue
        for cls in (n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                    private.add(node.name)
                elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                      and node.value.id == "self" and _private(node.attr)):
                    private.add(node.attr)
    assert {"_summarizer", "_ports", "_run"} & private  # the check sees the agent's private names
    found = []
    for name, path in MODULES.items():
        if _layer(name) == "agent":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in private
                    and ast.unparse(node.value) not in ("self", "cls")):
                found.append(f"{name}: {ast.unparse(node)}")
    assert found == []


@pytest.mark.parametrize("path, names", [
    ("ipyagent.notebook.bridge", ["receive_push", "pending_push", "peek_push", "KernelBridge"]),
    ("ipyagent.notebook.extension", ["get_runtime", "load", "unload"]),
    ("ipyagent.notebook.widget", ["system_tools_tokens", "budget_facts", "static_bundle"]),
    ("ipyagent.notebook.ipynb", ["session_from_notebook_file", "read_notebook"]),
    ("ipyagent.compaction.hooks", ["hooks", "HookRegistry"]),
])
def test_the_old_import_paths_still_import(path, names):
    module = importlib.import_module(path)
    assert all(callable(getattr(module, n, None)) or getattr(module, n, None) is not None for n in names)


def test_the_old_ipynb_reader_string_still_reads_a_notebook(tmp_path):
    """Older releases registered ``ipyagent.notebook.ipynb:session_from_notebook_file``."""
    from ipyagent.core import Session
    from ipyagent.session.messages import user_message
    from ipyagent.store.ipynb import new_notebook, save_session_to_notebook_file, write_notebook

    session = Session()
    session.append_message(user_message("hello"))
    write_notebook(tmp_path / "empty.ipynb", new_notebook())
    save_session_to_notebook_file(session, tmp_path / "empty.ipynb", tmp_path / "one.ipynb")
    module_name, _, function = "ipyagent.notebook.ipynb:session_from_notebook_file".partition(":")
    read = getattr(importlib.import_module(module_name), function)(tmp_path / "one.ipynb")
    assert [e["id"] for e in read.entries] == [e["id"] for e in session.entries]
