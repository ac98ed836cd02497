import sys

from controller.upgrade.cli import main

sys.exit(main())
