"""Run-time GPU health: faults found in DCGM series, classified, and remediated node by node
(quarantine, checkpoint- and gang-aware drain, reset or reboot through a hook, validation,
back in service or a person's replacement), every step asked of OPA. See README.md."""
