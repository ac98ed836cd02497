# METADATA
# title: Scheduling constraints
# description: >-
#   Reads where a pod spec can be scheduled: the node label values it is
#   pinned to (nodeSelector and required node affinity), spot selection and
#   spot tolerations. Functions take the pod spec.
package fleetplane.lib.scheduling

import data.fleetplane.lib

# METADATA
# description: >-
#   Required node affinity terms (ORed by Kubernetes); empty when the pod has
#   none.
required_terms(spec) := terms if {
	terms := spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
	is_array(terms)
	count(terms) > 0
} else := []

# METADATA
# description: >-
#   The values of node label key the pod can land on: the nodeSelector value,
#   or the union of the In values of every required affinity term when every
#   term constrains the key with In. Undefined when the pod leaves the key
#   open (the pod could then land on any value).
label_values(spec, key) := {value} if value := spec.nodeSelector[key]

label_values(spec, key) := values if {
	not spec.nodeSelector[key]
	terms := required_terms(spec)
	count(terms) > 0
	every term in terms {
		term_constrains(term, key)
	}
	values := {v |
		some term in terms
		some e in term.matchExpressions
		e.key == key
		e.operator == "In"
		some v in e.values
	}
}

term_constrains(term, key) if {
	some e in term.matchExpressions
	e.key == key
	e.operator == "In"
}

# METADATA
# description: >-
#   True when the pod can only run on spot nodes: a spot node selector, or
#   every required affinity term pins a spot label to its spot value.
pins_spot(spec) if {
	some key, value in lib.spot_node_labels
	spec.nodeSelector[key] == value
}

pins_spot(spec) if {
	terms := required_terms(spec)
	count(terms) > 0
	every term in terms {
		term_pins_spot(term)
	}
}

term_pins_spot(term) if {
	some e in term.matchExpressions
	e.operator == "In"
	spot := lib.spot_node_labels[e.key]
	count(e.values) > 0
	every v in e.values {
		v == spot
	}
}

# METADATA
# description: >-
#   True when the pod asks for spot in any way: it pins spot, one of its
#   affinity terms admits a spot value, or it tolerates the spot taint.
opens_spot(spec) if pins_spot(spec)

opens_spot(spec) if {
	some term in required_terms(spec)
	some e in term.matchExpressions
	e.operator == "In"
	lib.spot_node_labels[e.key] in e.values
}

opens_spot(spec) if tolerates_spot(spec)

# METADATA
# description: True when a toleration of the pod matches the spot taint (Kubernetes matching rules).
tolerates_spot(spec) if {
	some toleration in spec.tolerations
	tolerates(toleration, lib.spot_taint)
}

tolerates(toleration, taint) if {
	effect_matches(toleration, taint)
	key_matches(toleration, taint)
}

effect_matches(toleration, _) if object.get(toleration, "effect", "") == ""

effect_matches(toleration, taint) if toleration.effect == taint.effect

# An empty key with operator Exists tolerates every taint.
key_matches(toleration, _) if {
	object.get(toleration, "key", "") == ""
	toleration.operator == "Exists"
}

key_matches(toleration, taint) if {
	toleration.key == taint.key
	toleration.operator == "Exists"
}

key_matches(toleration, taint) if {
	toleration.key == taint.key
	object.get(toleration, "operator", "Equal") == "Equal"
	object.get(toleration, "value", "") == taint.value
}

# METADATA
# description: >-
#   Where a pod spec may run, computed once per template: {pins_spot,
#   opens_spot}, both booleans.
spot_placement(spec) := {"pins_spot": pins, "opens_spot": opens} if {
	pins := pins_spot_flag(spec)
	opens := opens_spot_flag(spec)
}

pins_spot_flag(spec) if {
	pins_spot(spec)
} else := false

opens_spot_flag(spec) if {
	opens_spot(spec)
} else := false
