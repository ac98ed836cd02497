"""fleetplane: GPU and TPU fleets as code. The `fleetplane` command is `fleetplane.cli:main`."""
