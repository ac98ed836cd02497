"""Priority preemption: for each workload kept waiting by lower-priority or over-quota work, the
node and the victims that free its accelerators with the least work lost.

Who may wait for preemption (a *preemptor*): a pod that requests accelerators, is unscheduled
with PodScheduled=False/Unschedulable for at least `preemption_pending_seconds`, and is not
being deleted. Preemptors are served highest priority first, then longest waiting.

Who may be a *victim* on a node (`candidates.as_candidate`): a running pod of a team holding a
needed accelerator, not exempt, preemptible (label, else its type's default), past its type's
`min_runtime_seconds`, of strictly lower priority than the preemptor, and not already being
removed by this pass (`freeing`: its accelerators already count as free, so taking it again
would count them twice). Across teams the victim's team must keep at least its guaranteed quota
after losing it and every other victim of that team chosen before it (`Quota`, applied by
`select_victims`); a team's usage leaves out its pods already terminating or freed by this
pass. These are the checks of the `fleetplane/decisions/preempt` policy, which OPA
applies again to every victim before it is evicted: planning a victim the policy refuses (for
instance one of equal priority) would only leave the preemptor waiting. A preemptor whose
workload type is unknown waits, since the policy refuses every victim for it. A pod whose
PodDisruptionBudget allows no disruption right now is skipped (the Eviction API would refuse
it).

Victim order is one comparator, `victim_order`, with numbered tie-breakers:

1. least time since the last checkpoint first (`fleetplane.dev/last-checkpoint`, epoch
   seconds; without one, all the time since the pod started is at stake);
2. then lower priority first;
3. then fewer accelerators first (less work lost when the times are equal);
4. then namespace and name, so the order is total and a pass is reproducible.

Victims are taken in that order until the node fits the preemptor, then any victim not needed
after all is dropped again (latest first), so no more victims than needed are chosen. The node
needing the fewest victims wins (then the least work lost, then the name). Capacity freed by
pods already terminating counts as free, so a pass after a partial or interrupted one does not
evict more than needed. Everything here is decided on the snapshot; `act.preempt` asks OPA for
every victim and evicts through the Eviction API.

A pending *gang* (a Volcano PodGroup with `minMember` above 1 and fewer pods running than that)
is served only if room for all its still-unplaced pods (`minMember` minus those running) is
made at once: its unschedulable pods are placed one after another, the largest first, each on
the node needing the fewest victims given the placements before it (node selector, affinity,
taints and accelerator resource as for one pod; a victim gang's mates free their own nodes,
which a later pod may use), all on one trial ledger. When fewer than that many pods can be
placed, the trial is dropped: nobody is evicted, and the gang is reported (`unserved_gangs`)
with why. A gang whose PodGroup is not in the snapshot waits (its `minMember` is unknown), as
does one with fewer unschedulable pods than it still needs. Victims are whole gangs as for any
preemptor, and a victim gang's devices count against its team's guarantee together. The plan
carries a `replan` on the same snapshot, for act to call without victims the policy refused.

The package, one concern a module (after Kueue's `pkg/scheduler/preemption`): `model` (what a
plan is made of), `ordering` (the victim comparator), `placement` (where a pod may run and the
nodes victims can free for it), `candidates` (who may be a victim, the fewest that make room),
`quota` (what the victims' teams must keep), `ledger` (what a pass reads and has taken),
`gangs` (room for a whole gang at once), `workload_gangs` (an operator's workload is one
gang), `plan` (`plan_preemption`) and `policy_input` (what
OPA is asked about a victim). Import from `controller.decide.preempt`, which names them.
"""

from controller.decide.preempt.candidates import select_victims
from controller.decide.preempt.gangs import GANG_FIRST_CHOICES
from controller.decide.preempt.model import (
    Candidate,
    GangPlacement,
    GangPlan,
    NodeOption,
    Preemption,
    PreemptPlan,
    Replan,
    UnservedGang,
)
from controller.decide.preempt.ordering import victim_order
from controller.decide.preempt.placement import fits, tolerates
from controller.decide.preempt.plan import plan_preemption
from controller.decide.preempt.policy_input import opa_input
from controller.decide.preempt.quota import AnswerKey, Quota, asked_usages, release, take
from controller.decide.preempt.workload_gangs import victim_gangs, workload_key

__all__ = [
    "GANG_FIRST_CHOICES",
    "AnswerKey",
    "Candidate",
    "GangPlacement",
    "GangPlan",
    "NodeOption",
    "PreemptPlan",
    "Preemption",
    "Quota",
    "Replan",
    "UnservedGang",
    "asked_usages",
    "fits",
    "opa_input",
    "plan_preemption",
    "release",
    "select_victims",
    "take",
    "tolerates",
    "victim_gangs",
    "victim_order",
    "workload_key",
]
