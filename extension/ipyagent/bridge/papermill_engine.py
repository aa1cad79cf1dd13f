"""``papermill --engine ipyagent IN OUT [-p NAME VALUE …]``: papermill with the headless frontend.

Papermill's own engine runs nbclient with no frontend: the kernel gets no session, sends no
entries anywhere but journal outputs, and records prompts without cell ids. This engine (the
``papermill.engines`` entry point ``ipyagent``) runs the same nbclient client papermill does —
its parameters, progress bar, output saved after each cell, ``PapermillExecutionError`` — as
``ipyagent run`` runs it (:class:`~ipyagent.bridge.headless.HeadlessRun`): the input's sessions
pushed first, each execute request carrying its cell's id, the bridge answered, and the sessions
written into the output's metadata with widget views replaced by their static views, whatever
stopped the run.

Papermill imports this module only when asked for the engine; ipyagent never imports papermill.
"""

from __future__ import annotations

import json
from typing import Any

import nbformat
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine
from papermill.log import logger
from papermill.utils import merge_kwargs, remove_args

from ipyagent.bridge.headless import HeadlessRun, iopub_wait, with_cell_ids
from ipyagent.store.ipynb import sessions_from_notebook

__all__ = ["IpyagentEngine"]


class IpyagentEngine(NBClientEngine):  # type: ignore[misc]  # papermill carries no types
    """papermill's nbclient engine, answering the ipyagent bridge (see the module)."""

    @classmethod
    def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, log_output: bool = False,
                                 stdout_file: Any = None, stderr_file: Any = None, start_timeout: int = 60,
                                 execution_timeout: int | None = None, **kwargs: Any) -> Any:
        """What papermill's engine does, with :class:`HeadlessRun` attached to its client."""
        with_cell_ids(nb_man.nb)  # the prompts are recorded with their cells' ids
        stored, _ = sessions_from_notebook(json.loads(json.dumps(nb_man.nb)))
        run = HeadlessRun(stored)
        kwargs = remove_args(["input_path", "timeout", "startup_timeout"], **kwargs)
        timeout = execution_timeout or None
        final = merge_kwargs(kwargs, timeout=timeout, startup_timeout=start_timeout, kernel_name=kernel_name,
                             log=logger, log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
                             store_widget_state=False, iopub_timeout=iopub_wait(timeout), **run.hooks())
        client = run.client_class(PapermillNotebookClient)(nb_man, **final)
        run.attach(client)
        try:
            return client.execute()
        finally:
            out = json.loads(json.dumps(nb_man.nb))
            run.finish(out)
            nb_man.nb = nbformat.from_dict(out)
