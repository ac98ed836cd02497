"""The base every node workflow stands on (NVIDIA k8s-operator-libs `pkg/upgrade/base/` is the
model): a node's state in one label with its timer and detail annotations (`state`), writing a
state and reading it back (`act.write_node_state`), the common steps and their side effects
(cordon, uncordon, taint, evict, the validator pod: `steps`, `act`, `validator`), pool slots
(`slots`), who holds the GPU (`consumers`), the one pod view and the node view (`pods`,
`nodes`), and which workflow holds a node (`claims`).

Driver upgrades (`controller.upgrade`) and GPU remediation (`controller.remediation`) are two
modes over it, each with its own states table, handlers and planner. This package imports
neither mode, and the modes never import each other (import-linter contracts in
pyproject.toml): what one mode must know of another (whether it holds a node) is in `claims`.
"""
