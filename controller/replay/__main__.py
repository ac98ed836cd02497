import sys

from controller.replay.cli import main

sys.exit(main())
