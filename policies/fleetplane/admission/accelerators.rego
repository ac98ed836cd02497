# Accelerator rules: Rules for workloads that ask for GPUs or TPUs:
# quantities, workload type, team, accelerator model, size, capacity type,
# priority class, checkpoints, idle timeout and approval. Every number comes
# from data.fleetplane.config.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.scheduling
import data.fleetplane.lib.workloads

# Accelerator rules run on "full" mode only; an accelerator pod whose images
# change is judged by the image rules alone.
judged if {
	mode == "full"
	accelerator_workload
}

# METADATA
# description: >-
#   The rules of what a workload holds (its maximum, the approval threshold,
#   an unbounded template) run where the template rules do, and on an update
#   of its counts that makes it hold more than it did.
holding_judged if judged

holding_judged if {
	mode == "holding"
	accelerator_workload
	total_devices > old_total_devices
}

# -------------------------------------------------------------- quantities

deny contains sprintf("malformed-quantity: %s", [msg]) if {
	mode == "full"
	some f in facts
	not f.quantities_ok
	some msg in workloads.quantity_problems(f.where, f.entries)
}

deny contains sprintf("accelerator-limits: %s", [msg]) if {
	mode == "full"
	some f in facts
	not f.quantities_ok
	some msg in workloads.limit_problems(f.where, f.entries)
}

# ----------------------------------------------------------- workload type

known_types := concat(", ", sort(object.keys(config.workload_types)))

deny contains msg if {
	judged
	some f in facts
	not f.labels[lib.keys.workload_type]
	msg := sprintf(
		"workload-type: %s has no label %s; add it to the pod template labels with one of: %s",
		[f.where, lib.keys.workload_type, known_types],
	)
}

deny contains msg if {
	judged
	some f in facts
	value := f.labels[lib.keys.workload_type]
	not config.workload_types[value]
	msg := sprintf(
		"workload-type: %s label %s=%q is not a known workload type; use one of: %s",
		[f.where, lib.keys.workload_type, value, known_types],
	)
}

deny contains msg if {
	judged
	declared := {v | some f in facts; v := f.labels[lib.keys.workload_type]}
	count(declared) > 1
	msg := sprintf(
		"workload-type: the pod templates carry different workload types (%s); give every template the same %s label",
		[concat(", ", sort(declared)), lib.keys.workload_type],
	)
}

# ------------------------------------------------------------------- team

deny contains msg if {
	judged
	not team
	msg := sprintf(
		"team: namespace %q belongs to no team, so it may not use accelerators; submit the workload in your team's namespace",
		[namespace],
	)
}

# ---------------------------------------------------------------- models

# METADATA
# description: >-
#   Where each pod template may run, derived once per template: pins_spot and
#   opens_spot (see fleetplane.lib.scheduling), capacity (the price column:
#   spot only when pinned to spot) and, per accelerator family the pod asks
#   for, the node label keys of its models, the label values the template
#   constrains, the models it may land on and the values that match no model.
placement[i] := {
	"pins_spot": spot.pins_spot,
	"opens_spot": spot.opens_spot,
	"capacity": {true: "spot", false: "on-demand"}[spot.pins_spot],
	"families": {family: model_choice(f.spec, family) | some family in families},
} if {
	judged
	some i, f in facts
	spot := scheduling.spot_placement(f.spec)

	# The resource families the template asks for (MIG devices belong to
	# nvidia.com/gpu), inline like the capacity: each function call costs OPA
	# more than the expression.
	families := {lib.family(resource) | some resource, n in f.demand; n > 0}
}

# The models a template may land on: the keys of the family (the node labels
# that tell its models apart), the values the template selects per key and the
# models they name. Models are looked up by key and value for the values
# selected only: an index of every model, or the keys of every family, would
# cost OPA a pass over config.models each per review, and each element of such
# a pass costs about a dozen allocations.
model_choice(spec, family) := {
	"keys": keys,
	"selection": selection,
	"models": {name |
		some key, values in selection
		some name, m in config.models
		m.node_label == key
		m.label_value in values
	},
	"unknown": {[key, value] |
		some key, values in selection
		some value in values
		count([m | some m in config.models; m.node_label == key; m.label_value == value]) == 0
	},
} if {
	keys := {m.node_label | some m in config.models; m.resource == family}
	selection := {key: values |
		some key in keys
		values := scheduling.label_values(spec, key)
	}
}

# A workload that selects no model could be scheduled on any model, so the
# allowed-model rule could not hold: it is denied, and the message names the
# label to add with the team's default model.
deny contains msg if {
	judged
	team_config
	some i, f in facts
	some family, choice in placement[i].families
	count(choice.keys) > 0
	count(choice.selection) == 0
	msg := model_selection_message(f.where, family, choice.keys)
}

# METADATA
# description: The denial of a workload that selects no model (the fast path gives the same).
model_selection_message(where, family, keys) := sprintf(
	"accelerator-model: %s asks for %s but selects no accelerator model; add %s (team default), or another allowed model: %s",
	[where, family, default_model_hint(family, keys), allowed_model_hint(family)],
)

# The team's default model of the family, else the family's node label keys.
default_model_hint(family, keys) := sprintf("nodeSelector %s: %s", [m.node_label, m.label_value]) if {
	m := config.models[team_config.default_model]
	m.resource == family
} else := sprintf("nodeSelector %s: <model>", [concat(" or ", sort(keys))])

allowed_model_hint(family) := concat(", ", sort([sprintf("%s=%s", [m.node_label, m.label_value]) |
	some name in team_config.allowed_models
	m := config.models[name]
	m.resource == family
]))

deny contains msg if {
	judged
	some i, f in facts
	some family, choice in placement[i].families
	some [key, value] in choice.unknown
	msg := sprintf(
		"accelerator-model: %s selects %s=%s, which is no known %s model; known values: %s",
		[f.where, key, value, family, concat(", ", sort(known_values(family, key)))],
	)
}

known_values(family, key) := {m.label_value | some m in config.models; m.resource == family; m.node_label == key}

deny contains msg if {
	judged
	team_config
	some i, f in facts
	some family, choice in placement[i].families
	some name in choice.models
	not model_allowed(name)
	msg := sprintf(
		"accelerator-model: %s may land on %s, which team %s may not use; select one of: %s",
		[f.where, name, team, allowed_model_hint(family)],
	)
}

model_allowed(name) if name in team_config.allowed_models

# -------------------------------------------------------------------- pools

# A pool reserved for some teams is theirs alone: a template that may land on
# it (a pool of a model it selects, of a capacity type it admits, among the
# pools it selects if it selects any) is refused for any other team. The
# reservations are read from config.reserved_pools (pool name -> teams,
# rendered from each pool's `teams`): only they are walked, so a review costs
# the same however many open pools the fleet has.
deny contains msg if {
	judged
	team_config
	some i, f in facts
	some family, choice in placement[i].families
	count(choice.models) > 0
	some name, teams in config.reserved_pools
	not pool_open(name)
	pool := config.pools[name]
	pool_reachable(pool, name, choice.models, placement[i], f.spec)
	reachable := {other | some other, p in config.pools; pool_reachable(p, other, choice.models, placement[i], f.spec)}
	msg := sprintf(
		"pool: %s may land on pool %s (%s), which is reserved for %s; %s",
		[f.where, name, pool.model, pool_teams(teams), open_pool_hint(reachable, family)],
	)
}

pool_reachable(pool, name, models, p, spec) if {
	pool.model in models
	{"spot": p.opens_spot, "on-demand": not_pinned_to_spot(p)}[pool.capacity_type] == true
	pool_selected(spec, name)
}

not_pinned_to_spot(p) := p.pins_spot == false

pool_selected(spec, name) if name in scheduling.label_values(spec, lib.keys.pool)

pool_selected(spec, _) if not scheduling.label_values(spec, lib.keys.pool)

# A pool no reservation names is open to every team.
pool_open(name) if not config.reserved_pools[name]

pool_open(name) if team in config.reserved_pools[name]

pool_teams(teams) := sprintf("teams %s", [concat(", ", teams)]) if {
	is_array(teams)
} else := sprintf("nobody (its teams are %s, not a list)", [json.marshal(teams)])

open_pool_hint(reachable, _) := sprintf(
	"select pools open to team %s with nodeSelector %s: one of %s",
	[team, lib.keys.pool, concat(", ", sort(open))],
) if {
	open := {name | some name in reachable; pool_open(name)}
	count(open) > 0
} else := sprintf("no pool open to team %s has that model; select another model", [team])

# --------------------------------------------------------------- size

deny contains msg if {
	holding_judged
	total_devices > type_config.max_accelerators
	msg := sprintf(
		"max-accelerators: the workload holds %d accelerators at once (replicas x devices per pod)%s; %s workloads may hold at most %d, so reduce replicas or devices",
		[total_devices, surge_hint, workload_type, type_config.max_accelerators],
	)
}

deny contains msg if {
	holding_judged
	total_devices >= config.approval.threshold_accelerators
	some f in facts
	reason := approval_refusal(object.get(f.annotations, lib.keys.approval_id, null), total_devices, object_uids, f.where)
	msg := sprintf(
		"approval: the workload holds %d accelerators%s (approval needed from %d); %s",
		[total_devices, surge_hint, config.approval.threshold_accelerators, reason],
	)
}

# METADATA
# description: >-
#   The uids that identify the object under review to approvals and
#   reservations: its own and those of its owners (a ReplicaSet's
#   Deployment, a Job's CronJob, a pod's ReplicaSet or Job).
object_uids := {uid |
	metadata := workloads.as_object(object.get(input.request.object, "metadata", {}))
	some uid in array.concat(
		[object.get(metadata, "uid", null)],
		[object.get(workloads.as_object(owner), "uid", null) | some owner in workloads.as_array(object.get(metadata, "ownerReferences", []))],
	)
	is_string(uid)
}

# METADATA
# description: >-
#   Why the approval id (null when none is set) does not cover a workload of
#   the team that holds held accelerators, identified by uids; undefined when
#   it does. Approvals are data.fleetplane.approvals[id] = {team,
#   max_accelerators, expires_at (epoch seconds), uid (null until the
#   controller binds the approval to the first workload that uses it)}.
approval_refusal(id, held, uids, where) := sprintf(
	"set annotation %s on %s to an approved request id",
	[lib.keys.approval_id, where],
) if {
	not is_string(id)
} else := sprintf(
	"approval %q on %s is unknown; set annotation %s to an approved request id",
	[id, where, lib.keys.approval_id],
) if {
	not data.fleetplane.approvals[id]
} else := sprintf(
	"approval %q is malformed in data.fleetplane.approvals (it must be {team, max_accelerators, expires_at, uid}); ask the platform team",
	[id],
) if {
	not approval_well_formed(data.fleetplane.approvals[id])
} else := sprintf(
	"approval %q was granted to team %s, not to team %s",
	[id, data.fleetplane.approvals[id].team, team],
) if {
	not data.fleetplane.approvals[id].team == team
} else := sprintf(
	"approval %q covers at most %d accelerators; ask for a new approval",
	[id, data.fleetplane.approvals[id].max_accelerators],
) if {
	held > data.fleetplane.approvals[id].max_accelerators
} else := sprintf(
	"approval %q expired at %s; ask for a new approval",
	[id, time.format(data.fleetplane.approvals[id].expires_at * 1000000000)],
) if {
	data.fleetplane.approvals[id].expires_at * 1000000000 <= now_ns
} else := sprintf(
	"approval %q is bound to another workload (uid %s); ask for a new approval",
	[id, data.fleetplane.approvals[id].uid],
) if {
	not object.get(data.fleetplane.approvals[id], "uid", null) in array.concat([null], [u | some u in uids])
}

approval_well_formed(approval) if {
	is_string(approval.team)
	is_number(approval.max_accelerators)
	is_number(approval.expires_at)
	uid := object.get(approval, "uid", null)
	true in {uid == null, is_string(uid)}
}

# spec.nodeName binds the pod to a node without the scheduler: no taint, no
# model, pool or capacity rule applies; so it is refused for every pod (a
# pod without accelerators on an accelerator node reaches its devices).
deny contains msg if {
	pod_rules_apply
	some f in facts
	workloads.non_empty_string(f.spec.nodeName)
	msg := sprintf(
		"node-name: %s sets spec.nodeName, which bypasses the scheduler, the nodes' taints and every placement rule; remove it and select nodes with nodeSelector",
		[f.where],
	)
}

# ---------------------------------------------------------- capacity type

deny contains msg if {
	judged
	type_config.capacity == "on-demand"
	some i, f in facts
	placement[i].opens_spot
	msg := sprintf(
		"capacity-type: %s workloads run on on-demand capacity only; remove the spot node selector, affinity and the toleration of %s from %s",
		[workload_type, lib.spot_taint.key, f.where],
	)
}

deny contains msg if {
	judged
	type_config.capacity == "spot"
	some i, f in facts
	not placement[i].pins_spot
	msg := sprintf(
		"capacity-type: %s workloads run on spot capacity only; add nodeSelector %s: spot and a toleration of %s=spot:NoSchedule to %s",
		[workload_type, lib.keys.capacity_type, lib.spot_taint.key, f.where],
	)
}

# --------------------------------------------------------- priority class

deny contains msg if {
	judged
	some f in facts
	not priority_allowed(f)
	msg := priority_class_message(f.where, f.spec, workload_type, type_config.priority_classes)
}

# METADATA
# description: The priority-class denial (the fast path gives the same).
priority_class_message(where, spec, type_name, classes) := sprintf(
	"priority-class: %s has priorityClassName %s; %s workloads must use one of: %s",
	[where, json.marshal(object.get(spec, "priorityClassName", null)), type_name, concat(", ", classes)],
)

priority_allowed(f) if f.spec.priorityClassName in type_config.priority_classes

# ------------------------------------------------------------ checkpoints

deny contains msg if {
	judged
	type_config.checkpoint_required_on_spot == true
	some i, f in facts
	placement[i].opens_spot
	not declares_checkpoint(f)
	msg := sprintf(
		"checkpoint: %s workloads on spot must declare where they checkpoint; set annotation %s on %s to a URI such as s3://bucket/path",
		[workload_type, lib.keys.checkpoint_location, f.where],
	)
}

declares_checkpoint(f) if checkpoint_uri(f.annotations[lib.keys.checkpoint_location])

checkpoint_uri(value) if {
	is_string(value)
	regex.match(`^[a-z][a-z0-9+.-]*://[^\s]+$`, value)
}

# ----------------------------------------------------------- idle timeout

deny contains msg if {
	judged
	maximum := type_config.max_idle_timeout_seconds
	is_number(maximum)
	some f in facts
	not declares_idle_timeout(f.annotations, maximum)
	msg := idle_timeout_message(workload_type, f.where, maximum)
}

# METADATA
# description: The idle-timeout denial (the fast path gives the same).
idle_timeout_message(type_name, where, maximum) := sprintf(
	"idle-timeout: %s workloads must declare an idle timeout; set annotation %s on %s to a whole number of seconds from 1 to %d",
	[type_name, lib.keys.idle_timeout_seconds, where, maximum],
)

declares_idle_timeout(annotations, maximum) if {
	seconds := workloads.parse_count(annotations[lib.keys.idle_timeout_seconds])
	seconds > 0
	seconds <= maximum
}
