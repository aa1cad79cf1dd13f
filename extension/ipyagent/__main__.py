import sys

from ipyagent.cli import main

sys.exit(main())
