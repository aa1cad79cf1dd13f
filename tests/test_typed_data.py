"""Typed data in ``extension/ipyagent``: collaborators are named by their class or a Protocol, never
``Any``, and "the text of a message's content" is written once (``session/messages.text_of``)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "extension" / "ipyagent"

# Collaborators typed Any on purpose: a hook call's session (ipyagent/hooks.py sits below the core
# it would name) and the MCP SDK's client session (agent/mcp/hub.py: a third-party object).
ANY_ALLOWED = {("hooks.py", "session"), ("agent/mcp/hub.py", "session")}


def _modules() -> list[tuple[str, ast.Module]]:
    return [(p.relative_to(PACKAGE).as_posix(), ast.parse(p.read_text(encoding="utf-8")))
            for p in sorted(PACKAGE.rglob("*.py"))]


def _any_typed(tree: ast.Module, names: set[str]) -> list[tuple[str, int]]:
    """(name, line) of every parameter or annotated name in ``names`` whose annotation is ``Any``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            found += [(a.arg, a.lineno) for a in args if a.arg in names and _is_any(a.annotation)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in names \
                and _is_any(node.annotation):
            found.append((node.target.id, node.lineno))
    return found


def _is_any(annotation: ast.expr | None) -> bool:
    return (isinstance(annotation, ast.Name) and annotation.id == "Any") \
        or (isinstance(annotation, ast.Constant) and annotation.value == "Any")


def test_no_session_or_runtime_is_typed_any():
    offenders = [f"{path}:{line} {name}: Any" for path, tree in _modules()
                 for name, line in _any_typed(tree, {"session", "runtime"}) if (path, name) not in ANY_ALLOWED]
    assert offenders == []


def _filters_text_blocks(node: ast.expr) -> bool:
    """A comprehension that reads the ``"text"`` of the blocks whose type is ``"text"``."""
    if not isinstance(node, (ast.GeneratorExp, ast.ListComp)):
        return False
    reads_text = any(isinstance(x, ast.Constant) and x.value == "text" for x in ast.walk(node.elt))
    return reads_text and any(isinstance(c, ast.Compare) and any(isinstance(x, ast.Constant) and x.value == "text"
                                                   for x in [c.left, *c.comparators])
               for gen in node.generators for cond in gen.ifs for c in ast.walk(cond))


def test_the_text_of_a_content_is_joined_only_by_text_of():
    """``"…".join(b["text"] for b in blocks if b["type"] == "text")`` written by hand is a second
    meaning of "the text of a content" (a string content, a block without text, a non-dict block)."""
    offenders = [f"{path}:{node.lineno}" for path, tree in _modules() if path != "session/messages.py"
                 for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
                 and node.args and _filters_text_blocks(node.args[0])]
    assert offenders == []


# Issue 32: at most half of the 507 lines that named ``dict[str, Any]`` at 706a5c3. A shape with known
# fields is a TypedDict (``shapes.py``, or the module's own wire shapes); a value read from outside
# is ``Mapping[str, object]`` (readers check each value) — an alias of ``dict[str, Any]`` counts as it.
MOST_DICT_STR_ANY = 507 // 2


def test_dict_str_any_stays_at_most_half_of_what_it_was():
    lines = [f"{path}:{number}" for path in sorted(PACKAGE.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if "dict[str, Any]" in line]
    assert len(lines) <= MOST_DICT_STR_ANY, f"{len(lines)} lines name dict[str, Any]"
