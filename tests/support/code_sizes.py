"""The size of every class (methods defined in its body) and function (lines from its ``def`` to
its last line, nested functions included) of a package, read with ``ast``: what
tests/test_architecture.py holds to its limits and tests/benchmarks/code_sizes.py prints."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Size:
    name: str  # module.Class.method, module.function, module.function.inner
    kind: str  # "class" or "function"
    size: int  # methods of a class, lines of a function

    def __str__(self) -> str:
        return f"{self.size} {'methods' if self.kind == 'class' else 'lines'}"


def sizes(modules: Mapping[str, Path]) -> Iterator[Size]:
    """Every class and function of ``modules`` (dotted module name -> its file)."""
    for module, path in modules.items():
        yield from _visit(ast.parse(path.read_text(encoding="utf-8")), module)


def _visit(node: ast.AST, prefix: str) -> Iterator[Size]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            name = f"{prefix}.{child.name}"
            yield Size(name, "class", sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in child.body))
            yield from _visit(child, name)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}.{child.name}"
            assert child.end_lineno is not None
            yield Size(name, "function", child.end_lineno - child.lineno + 1)
            yield from _visit(child, name)
        else:
            yield from _visit(child, prefix)


def package_modules(package: Path) -> dict[str, Path]:
    """The modules of the package at ``package`` (its ``__init__`` as the package's own name),
    the built labextension left out."""
    found = {}
    for path in package.rglob("*.py"):
        if "labextension" in path.parts:
            continue
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found
