"""Fleet replay: a GPU trace through fleet scenarios, decided by the real policies and the
controller's own decision code, to measure what they are worth (docs/replay.md).

Layers: `trace` (the trace's facts) → `workloads` (what the trace lacks, from a fixed seed) →
`scenarios` (validated fleet configurations) → `engine` (the event loop and the admission gate)
over `fleet` (the simulated fleet's state), moved by `scheduler`, `autoscaler` (nodes and spot)
and `controller_pass` (the controller's pass), measured by `accounting`, with `opa` (the real
OPA, in batches) →
`results` (figures) → `report` (Markdown, PNG, JSON). `runner` runs scenarios side by side;
`cli` is the command line (`fleetplane replay`).
"""
