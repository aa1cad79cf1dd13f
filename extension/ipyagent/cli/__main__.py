"""``python -m ipyagent.cli`` (as ``python -m ipyagent`` and the ``ipyagent`` console script)."""

import sys

from ipyagent.cli import main

sys.exit(main())
