"""The placement service: Volcano's `extender` scores nodes for a task by the fragmentation
gradient of Weng et al. (USENIX ATC 2023) over the workload the cluster has been running
(docs/placement.md).

`fgd` (the measure and the score, vectorised) ← `points` (the answer: FGD's order as ranks),
`workload` (the learned distribution) and `volcano_json` (Volcano's request as arrays) ←
`service` (HTTP) ← `cli` (`python -m placement`).
"""
