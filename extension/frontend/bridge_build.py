"""The build step of the JupyterLab bridge: hatch-jupyter-builder's ``build-function``.

With Node.js on ``PATH`` this is hatch-jupyter-builder's npm builder (``jlpm build:prod`` into
``extension/ipyagent/labextension``), then a check that the bundle is there (a standard build
fails without it, as before). Without Node.js the package builds without the bridge and one
warning line says so: sessions then reach the notebook through the journal outputs
(README, "Where the session is stored"). A wheel or sdist built with Node.js carries the bundle,
so installing one of those never needs Node.js.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

BUNDLE = ("extension/ipyagent/labextension/static/style.js", "extension/ipyagent/labextension/package.json")
NO_NODE = ("ipyagent: warning: Node.js not found, so the JupyterLab bridge is not built; installing without it "
           "(sessions are saved through journal outputs; install Node.js 20 and reinstall to get the bridge)")


def build(target_name: str, version: str, **kwargs: Any) -> None:
    if shutil.which("node") is None:
        print(NO_NODE, file=sys.stderr, flush=True)
        return
    from hatch_jupyter_builder import npm_builder

    npm_builder(target_name, version, **kwargs)
    missing = [path for path in BUNDLE if not Path(path).exists()]
    if missing and version == "standard":
        raise ValueError(f"the bridge build did not write {', '.join(missing)}")
