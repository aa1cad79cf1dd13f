"""``python -m ipyagent``: the ``ipyagent`` command line."""

import sys

from ipyagent.cli import main

sys.exit(main())
