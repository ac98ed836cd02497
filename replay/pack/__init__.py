"""Pack mode: the packing experiment of Weng et al., "Beware of Fragmentation: Scheduling
GPU-Sharing Workloads with Fragmentation Gradient Descent" (USENIX ATC 2023), on the trace's
node list, with the paper's placement policies and the one fleetplane's Volcano configuration
makes side by side (docs/replay.md, "Pack mode").

`cluster` (the nodes' free resources, as arrays) → `fragmentation` (the paper's measure, per
node and per typical pod) → `policies` (where each policy puts a pod; `volcano` models the
shipped scheduler configuration) → `experiment` (pods arrive until the cluster is full,
repeated) → `report`.
"""
