"""`python -m fleetplane` is the `fleetplane` command."""

import sys

from fleetplane.cli import main

sys.exit(main())
