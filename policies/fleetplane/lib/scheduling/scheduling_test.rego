package fleetplane.lib.scheduling_test

import data.fleetplane.lib.scheduling

key := "nvidia.com/gpu.product"

terms(list) := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list}}}}

expr(k, op, values) := {"key": k, "operator": op, "values": values}

label_value_cases := {
	"node selector": {"spec": {"nodeSelector": {key: "A"}}, "want": {"A"}},
	"node selector wins over affinity": {"spec": object.union({"nodeSelector": {key: "A"}}, terms([{"matchExpressions": [expr(key, "In", ["B"])]}])), "want": {"A"}},
	"one term": {"spec": terms([{"matchExpressions": [expr(key, "In", ["A", "B"])]}]), "want": {"A", "B"}},
	"terms are ORed": {"spec": terms([{"matchExpressions": [expr(key, "In", ["A"])]}, {"matchExpressions": [expr(key, "In", ["C"])]}]), "want": {"A", "C"}},
}

test_label_values[name] if {
	some name, tc in label_value_cases
	scheduling.label_values(tc.spec, key) == tc.want
}

open_cases := {
	"nothing": {},
	"another key": {"nodeSelector": {"zone": "a"}},
	"one open term": terms([{"matchExpressions": [expr(key, "In", ["A"])]}, {"matchExpressions": [expr("zone", "In", ["a"])]}]),
	"not in": terms([{"matchExpressions": [expr(key, "NotIn", ["A"])]}]),
	"exists": terms([{"matchExpressions": [{"key": key, "operator": "Exists"}]}]),
	"empty terms": terms([]),
}

test_label_left_open[name] if {
	some name, spec in open_cases
	not scheduling.label_values(spec, key)
}

pin_cases := {
	"fleetplane selector": {"spec": {"nodeSelector": {"fleetplane.dev/capacity-type": "spot"}}, "pins": true, "opens": true},
	"karpenter selector": {"spec": {"nodeSelector": {"karpenter.sh/capacity-type": "spot"}}, "pins": true, "opens": true},
	"eks selector": {"spec": {"nodeSelector": {"eks.amazonaws.com/capacityType": "SPOT"}}, "pins": true, "opens": true},
	"gke selector": {"spec": {"nodeSelector": {"cloud.google.com/gke-spot": "true"}}, "pins": true, "opens": true},
	"on-demand selector": {"spec": {"nodeSelector": {"karpenter.sh/capacity-type": "on-demand"}}, "pins": false, "opens": false},
	"every term pins spot": {
		"spec": terms([{"matchExpressions": [expr("cloud.google.com/gke-spot", "In", ["true"])]}, {"matchExpressions": [expr("karpenter.sh/capacity-type", "In", ["spot"])]}]),
		"pins": true, "opens": true,
	},
	"one term admits on-demand": {
		"spec": terms([{"matchExpressions": [expr("cloud.google.com/gke-spot", "In", ["true"])]}, {"matchExpressions": [expr("zone", "In", ["a"])]}]),
		"pins": false, "opens": true,
	},
	"a term admits both": {"spec": terms([{"matchExpressions": [expr("karpenter.sh/capacity-type", "In", ["spot", "on-demand"])]}]), "pins": false, "opens": true},
	"empty values": {"spec": terms([{"matchExpressions": [expr("karpenter.sh/capacity-type", "In", [])]}]), "pins": false, "opens": false},
	"toleration only": {"spec": {"tolerations": [{"key": "fleetplane.dev/capacity-type", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}]}, "pins": false, "opens": true},
	"nothing": {"spec": {}, "pins": false, "opens": false},
}

pins(spec) if {
	scheduling.pins_spot(spec)
} else := false

opens(spec) if {
	scheduling.opens_spot(spec)
} else := false

tolerates(toleration) if {
	scheduling.tolerates(toleration, taint)
} else := false

test_pins_spot[name] if {
	some name, tc in pin_cases
	pins(tc.spec) == tc.pins
}

test_opens_spot[name] if {
	some name, tc in pin_cases
	opens(tc.spec) == tc.opens
}

taint := {"key": "fleetplane.dev/capacity-type", "value": "spot", "effect": "NoSchedule"}

toleration_cases := {
	"equal with value": [{"key": "fleetplane.dev/capacity-type", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}, true],
	"operator defaults to equal": [{"key": "fleetplane.dev/capacity-type", "value": "spot"}, true],
	"exists on the key": [{"key": "fleetplane.dev/capacity-type", "operator": "Exists"}, true],
	"exists on every key": [{"operator": "Exists"}, true],
	"empty effect matches all effects": [{"key": "fleetplane.dev/capacity-type", "operator": "Equal", "value": "spot", "effect": ""}, true],
	"another value": [{"key": "fleetplane.dev/capacity-type", "operator": "Equal", "value": "on-demand"}, false],
	"another effect": [{"key": "fleetplane.dev/capacity-type", "operator": "Exists", "effect": "NoExecute"}, false],
	"another key": [{"key": "nvidia.com/gpu", "operator": "Exists"}, false],
	"empty key with equal": [{"operator": "Equal", "value": "spot"}, false],
}

test_tolerates[name] if {
	some name, [toleration, want] in toleration_cases
	tolerates(toleration) == want
}
