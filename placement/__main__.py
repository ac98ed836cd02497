"""`python -m placement`: the service (placement.cli)."""

from placement.cli import main

raise SystemExit(main())
