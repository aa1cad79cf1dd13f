"""Notebook parameters, papermill's way: ``ipyagent run NB -p NAME VALUE -f params.yaml``.

The convention (papermill's, so one notebook serves both): the cell tagged ``parameters`` holds
the defaults; the values given go into a new code cell right after it, tagged
``injected-parameters`` (at the top when no cell is tagged ``parameters``), one assignment a
line; a run of a notebook that holds an injected cell already replaces it. A ``%%agent`` prompt
takes a parameter with ``{name}``.

A value given with ``-p`` is read as papermill reads it: ``True``, ``False``, ``None``, an integer,
a float, else the text (``-r`` keeps the text as it is); a YAML file's values are taken as YAML
gives them (nested lists and mappings too). Each is written as a Python literal.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ipyagent.shapes import Ipynb

__all__ = ["INJECTED_TAG", "PARAMETERS_TAG", "ParameterError", "inject_parameters", "parameters_from_yaml",
           "parse_value"]

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
INJECTED_ID = "injected-parameters"  # the injected cell's id (the same in every run: a stable diff)


class ParameterError(ValueError):
    """A parameter that cannot be given (a name that is no Python name, a file that is no mapping)."""


def parse_value(text: str) -> Any:
    """``-p NAME VALUE``'s value, read as papermill reads it."""
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parameters_from_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML file holds (``-f params.yaml``)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ParameterError(f"{path} is not YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ParameterError(f"{path} must hold a mapping of names to values, not a {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def _literal(value: Any) -> str:
    """``value`` as Python source (what YAML and ``-p`` give: text, numbers, booleans, None,
    lists and mappings of them; anything else as its text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_literal(str(k))}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(str(value))


def _tags(cell: Any) -> list[Any]:
    tags = (cell.get("metadata") or {}).get("tags") if isinstance(cell, dict) else None
    return tags if isinstance(tags, list) else []


def inject_parameters(nb: Ipynb, parameters: Mapping[str, Any]) -> Ipynb:
    """``nb`` with ``parameters`` in its injected-parameters cell (see the module); returns ``nb``."""
    if not parameters:
        return nb
    for name in parameters:
        if not name.isidentifier():
            raise ParameterError(f"{name!r} is not a Python name: a parameter is assigned as a variable")
    lines = ["# Parameters", *(f"{name} = {_literal(value)}" for name, value in parameters.items())]
    cells: list[Any] = nb.setdefault("cells", [])
    at = next((i for i, c in enumerate(cells) if INJECTED_TAG in _tags(c)), None)
    if at is not None:
        del cells[at]
    else:
        at = next((i + 1 for i, c in enumerate(cells) if PARAMETERS_TAG in _tags(c)), 0)
    taken = {c.get("id") for c in cells if isinstance(c, dict)}
    cell_id = INJECTED_ID if INJECTED_ID not in taken else uuid.uuid4().hex[:8]
    cells.insert(at, {"cell_type": "code", "id": cell_id, "execution_count": None,
                      "metadata": {"tags": [INJECTED_TAG]}, "outputs": [], "source": "\n".join(lines) + "\n"})
    return nb
