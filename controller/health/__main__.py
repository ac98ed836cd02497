import sys

from controller.health.cli import main

sys.exit(main())
