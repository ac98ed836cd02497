"""The fleetplane runtime controller: one reconcile pass per run.

`fleetplane controller reconcile` (or one concern of the registry in `concerns`: `idle`,
`lifetime`, `spend`, `admission`, `preempt`) observes the cluster (Kubernetes API, DCGM metrics
through Prometheus), decides on that snapshot with pure functions, asks OPA for every side
effect and then acts. All state lives in the cluster
(annotations, a Lease); see controller/README.md.

Layers: `observe` (read-only snapshot and metrics) → `decide` (pure functions) → `act` (side
effects, idempotent, OPA-gated, logged with an Event). `reconcile` wires one pass together
over the concern registry, on the `harness` every pass shares; `cli` is the command line.
"""
