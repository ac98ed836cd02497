"""An operator's workload is one gang for preemption and fair share (issue 30, item 4).

A TrainJob's, JobSet's, RayJob's, RayCluster's or LeaderWorkerSet's pods are taken together or
not at all: act stops the workload through its own API (`act.victim_stop`), which removes every
pod of it, so a victim that is one of them is judged with all its mates, each a victim in its
own right, as a Volcano gang is. They are grouped by the operator's object their owners and
labels name (`decide.workloads.operator_target`; act climbs from there to the top, confirming
every uid). Other pods keep their PodGroup gang (`decide.workloads.gang_of`).
"""

from __future__ import annotations

from controller.decide.workloads import gang_of, gangs, operator_target
from controller.observe.model import Pod


def workload_key(pod: Pod) -> tuple[str, str] | None:
    """The gang a victim is taken with: its operator's object (namespace, "Kind/name"; a
    PodGroup's name has no "/", so the two never meet), else its PodGroup, else None."""
    target = operator_target(pod)
    if target is not None:
        return (pod.namespace, f"{target.kind}/{target.name}")
    return gang_of(pod)


def victim_gangs(pods: list[Pod]) -> dict[tuple[str, str], list[Pod]]:
    """The PodGroup gangs (`decide.workloads.gangs`) and, beside them, the non-terminal pods
    of every operator workload of more than one pod."""
    out = dict(gangs(pods))
    grouped: dict[tuple[str, str], list[Pod]] = {}
    for pod in pods:
        if pod.terminal or operator_target(pod) is None:
            continue
        key = workload_key(pod)
        assert key is not None
        grouped.setdefault(key, []).append(pod)
    out.update({key: members for key, members in grouped.items() if len(members) > 1})
    return out
