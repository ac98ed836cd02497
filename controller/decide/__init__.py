"""Pure decisions over a snapshot: no I/O, no clock (time is an argument), no randomness.

`idle` (which workloads to warn, clear, reclaim), `spend` (month-to-date cost per team and the
accumulator kept on the team namespace), `preempt` (which victims, on which node, for which
waiting workload). `workloads` holds the shared facts about pods and owners.
"""
