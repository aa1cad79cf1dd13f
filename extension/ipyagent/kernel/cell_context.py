"""Which cell is running (:func:`cell_identity`), and the kernel's side of the agent loop's
:class:`~ipyagent.agent.prompt.notebook_context.NotebookContext` (activity since the session's
previous prompt; environment and instruction files) and of
interpolation's :class:`~ipyagent.agent.prompt.interpolate.Lookup` (``{In[n]}``, ``{Out[n]}``,
``{Err[n]}``, ``{name}``).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any, Protocol

from ipyagent.agent.containment import PathVerdict
from ipyagent.agent.prompt.activity_block import format_error
from ipyagent.agent.prompt.instructions import AllowRead, InstructionSearch, search_instruction_files
from ipyagent.agent.prompt.notebook_context import NotebookActivity, SystemContext
from ipyagent.agent.skills.discovery import SkillSearch, find_skills
from ipyagent.agent.tools.tool import ApprovalCallback
from ipyagent.kernel.configurable import AgentSettings
from ipyagent.kernel.persistence import LoadResult
from ipyagent.kernel.ports.activity_recorder import ActivityRecorder
from ipyagent.kernel.ports.namespace import bounded_repr, type_name
from ipyagent.store.hydration import find_notebook_path

_MISSING = object()


class RuntimeFacts(Protocol):
    """What this module reads of the kernel's :class:`~ipyagent.kernel.runtime.AgentRuntime`
    (which imports this module: the part it reads is described here, not imported)."""

    @property
    def shell(self) -> Any: ...
    @property
    def config(self) -> AgentSettings: ...
    @property
    def load_result(self) -> LoadResult | None: ...
    @property
    def instruction_reads(self) -> dict[str, bool]: ...
    @property
    def activity(self) -> ActivityRecorder: ...
    @property
    def bridge(self) -> Any: ...  # the frontend bridge (bridge/comm.py), or None


def cell_identity(shell: Any) -> tuple[str | None, int | None]:
    """(cell id, execution count) of the cell being run (cell id: JupyterLab/nbformat id, or None).

    The id is in the execute request's metadata: ipykernel's shell gives that request with
    ``get_parent()``; JupyterLite's Pyodide kernel keeps it on its kernel object instead."""
    cell_id = None
    get_parent = getattr(shell, "get_parent", None)
    if not callable(get_parent):
        get_parent = getattr(getattr(shell, "kernel", None), "get_parent", None)
    if callable(get_parent):
        try:
            parent = get_parent() or {}
            cell_id = (parent.get("metadata") or {}).get("cellId")
        except Exception:  # noqa: BLE001 - no parent message: a cell without an id
            cell_id = None
    # The running cell's number: IPython 9 has already advanced ``execution_count`` to the next
    # cell while this one runs; the display hook's prompt count is this cell's in 8 and 9.
    count = getattr(getattr(shell, "displayhook", None), "prompt_count", None)
    if not isinstance(count, int):
        count = getattr(shell, "execution_count", None)
    return (cell_id if isinstance(cell_id, str) and cell_id else None), (count if isinstance(count, int) else None)


def kernel_notebook_path(shell: Any, explicit: str | None) -> tuple[Path | None, str]:
    """Where this kernel's notebook is (:func:`~ipyagent.store.hydration.find_notebook_path`, with
    the running cell's id for JupyterLite's ``/drive``), and how that was learnt."""
    return find_notebook_path(getattr(shell, "user_ns", None), os.environ, explicit, cell_id=cell_identity(shell)[0])


def notebook_path(runtime: RuntimeFacts) -> Path | None:
    """This kernel's notebook, if the kernel can tell: the sources hydration uses, then the path
    the page's bridge gave (what ``%agent status`` shows), found in the kernel's folder."""
    path: Path | str | None
    try:
        path, _ = kernel_notebook_path(runtime.shell, runtime.config.notebook_path)
    except Exception:  # noqa: BLE001 - no notebook path can be found: none
        path = None
    if path is None and runtime.load_result is not None:
        path = runtime.load_result.path
    if path is None:  # the page's (the bridge's hello): relative to the server's root, in the kernel's folder
        shown = runtime.bridge.path if runtime.bridge is not None else None
        if isinstance(shown, str) and shown.endswith(".ipynb") and Path(Path(shown).name).is_file():
            path = Path(shown).name
    return Path(path).resolve() if path is not None else None


def instruction_approver(decisions: dict[str, bool], approve: ApprovalCallback | None,
                         what: str = "instruction file") -> AllowRead:
    """Whether to read an instruction file outside the project: the user's answer, asked once per
    real path and kept for the kernel's life in ``decisions`` (never in the notebook, which anyone
    may have written). Asked through the run's approver as a ``read`` of that path; without one
    (``%agent context``, ``tool_approval = "auto"``) or where nobody can answer (a headless run),
    the file is not read."""

    def allow(verdict: PathVerdict, folder: Path) -> bool:
        if verdict.real in decisions:
            return decisions[verdict.real]
        if approve is None:
            return False  # not decided: asked at the next run that can ask
        purpose = (f"the system prompt: the {what} {verdict.path} leads to {verdict.real}, "
                   f"outside {verdict.root}")
        try:
            decisions[verdict.real] = bool(approve("read", {"path": verdict.real, "for": purpose}))
        except Exception:  # noqa: BLE001 - nobody to ask (headless), or the approver failed: not read
            decisions[verdict.real] = False
        return decisions[verdict.real]

    return allow


def system_context(runtime: RuntimeFacts, approve: ApprovalCallback | None = None) -> SystemContext:
    cwd = os.getcwd()
    path = notebook_path(runtime)
    names = [n for n in runtime.config.instruction_files if isinstance(n, str) and n.strip()]
    try:
        allow = instruction_approver(runtime.instruction_reads, approve)
        found = search_instruction_files(path.parent if path else cwd, names=names, allow=allow) if names \
            else InstructionSearch()
    except OSError:
        found = InstructionSearch()
    try:
        skills = find_skills(path.parent if path else cwd,
                             allow=instruction_approver(runtime.instruction_reads, approve, "skill")) \
            if runtime.config.skills else SkillSearch()
    except OSError:
        skills = SkillSearch()
    return SystemContext(str(path) if path else None, cwd, platform.python_version(), found.files, found.skipped,
                         skills.skills, skills.skipped)


class KernelNotebookContext:
    """One session's view: the activity since its previous prompt, and the environment."""

    def __init__(self, runtime: RuntimeFacts, session: str):
        self.runtime = runtime
        self.session = session

    @property
    def recorder(self) -> ActivityRecorder:
        return self.runtime.activity

    def system_context(self, approve: ApprovalCallback | None = None) -> SystemContext:
        return system_context(self.runtime, approve)

    def activity(self) -> NotebookActivity:
        try:
            return self.recorder.activity(self.session)
        except Exception:  # noqa: BLE001 - a namespace that cannot be walked: no block rather than no prompt
            return NotebookActivity()

    def prompt_sent(self) -> None:
        try:
            self.recorder.mark(self.session)
        except Exception:  # noqa: BLE001 - marking what the prompt saw must never fail a run
            pass


class KernelLookup:
    """Cell sources, values and errors, and user variables, for interpolation."""

    def __init__(self, shell: Any, recorder: ActivityRecorder | None):
        self.shell = shell
        self.recorder = recorder

    def source(self, count: int) -> str | None:
        history = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", None) or []
        if 0 < count < len(history) and isinstance(history[count], str):
            return str(history[count])
        return None

    def output(self, count: int) -> str | None:
        shown = getattr(getattr(self.shell, "history_manager", None), "output_hist_reprs", {}).get(count)
        if isinstance(shown, str):
            return shown
        out = self.shell.user_ns.get("Out")
        if isinstance(out, dict) and count in out:
            return bounded_repr(out[count])
        return None

    def error(self, count: int) -> str | None:
        error = self.recorder.error(count) if self.recorder is not None else None
        return format_error(error) if error is not None else None

    def variable(self, name: str) -> tuple[str, str] | None:
        user_ns = self.shell.user_ns
        if name not in user_ns:
            return None
        value = user_ns[name]
        hidden = getattr(self.shell, "user_ns_hidden", {}) or {}
        if hidden.get(name, _MISSING) is value:  # IPython's own (In, Out, exit, get_ipython…)
            return None
        return bounded_repr(value), type_name(value)
