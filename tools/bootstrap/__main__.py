"""`python -m tools.bootstrap [--list] [TOOL ...]`."""

import sys

from tools.bootstrap.cli import main

sys.exit(main())
