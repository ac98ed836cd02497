package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# The gate's deny set and warnings with the controller's workload records.
with_records(rev, rule) := result if {
	result := admission[rule] with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.workloads as testing.workload_records
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

rules_with_records(rev) := {split(m, ":")[0] | some m in with_records(rev, "deny")}

daemonset(tmpl) := testing.of_kind("apps", "v1", "DaemonSet", {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {"template": tmpl}})

pytorch_job(master, workers, tmpl) := testing.of_kind("kubeflow.org", "v1", "PyTorchJob", {
	"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
	"spec": {"pytorchReplicaSpecs": {
		"Master": {"replicas": master, "template": tmpl},
		"Worker": {"replicas": workers, "template": tmpl},
	}},
})

notebook_server(tmpl) := testing.of_kind("kubeflow.org", "v1", "Notebook", {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": "nb"}, "spec": {"template": tmpl}})

holding_cases := {
	"accelerator daemonset": [daemonset(testing.training), {"unbounded-holding"}],
	"cpu daemonset": [daemonset(testing.cpu), set()],
	"operator job within the maximum": [pytorch_job(1, 2, testing.training), set()],
	"operator job over the maximum": [pytorch_job(1, 8, testing.training), {"max-accelerators", "approval"}],
	"operator job whose templates break rules": [pytorch_job(1, 1, testing.with_spec(testing.training, {"priorityClassName": "x"})), {"priority-class"}],
	"operator kind without a count": [notebook_server(testing.notebook), {"unbounded-holding"}],
	"operator kind without a count, no accelerators": [notebook_server(testing.cpu), set()],
	"cronjob allowing overlapping runs": [testing.cronjob(testing.training, {}), {"cronjob-concurrency"}],
	"cronjob replacing its run": [object.union(testing.cronjob(testing.training, {}), {"request": {"object": {"spec": {"concurrencyPolicy": "Replace"}}}}), set()],
	"cpu cronjob allowing overlaps": [testing.cronjob(testing.cpu, {}), set()],
}

test_holdings[name] if {
	some name, [rev, want] in holding_cases
	rules(rev) == want
}

test_holding_messages_say_what_to_set if {
	some_message(holding_cases["accelerator daemonset"][0], "unbounded-holding: spec.template asks for accelerators, but a DaemonSet runs one pod on every node it selects")
	some_message(holding_cases["operator kind without a count"][0], "set replicas (or maxReplicas)")
	some_message(holding_cases["cronjob allowing overlapping runs"][0], `cronjob-concurrency: concurrencyPolicy "Allow" lets the runs`)
	some_message(holding_cases["operator job over the maximum"][0], "the workload holds 72 accelerators at once")
}

# ------------------------------------------------------------------ scale

scale_cases := {
	"statefulset within the maximum": [testing.scale("apps", "statefulsets", "s", "uid-s", 1, 3), set()],
	"statefulset over the maximum": [testing.scale("apps", "statefulsets", "s", "uid-s", 1, 9), {"max-accelerators", "approval"}],
	"statefulset to the approval threshold": [testing.scale("apps", "statefulsets", "s", "uid-s", 1, 4), {"approval"}],
	"approved workload to the threshold": [testing.scale("argoproj.io", "rollouts", "r", "uid-r", 1, 4), set()],
	"scaling down": [testing.scale("apps", "statefulsets", "s", "uid-s", 20, 9), set()],
	"cpu workload": [testing.scale("apps", "replicasets", "web", "uid-web", 1, 500), set()],
	"unrecorded statefulset": [testing.scale("apps", "statefulsets", "new", "uid-new", 1, 2), {"scale"}],
	"unrecorded custom kind": [testing.scale("argoproj.io", "rollouts", "new", "uid-new", 0, 1), {"scale"}],
	"record of another object of the same name": [testing.scale("apps", "statefulsets", "s", "uid-recreated", 1, 2), {"scale"}],
	"unrecorded deployment (its ReplicaSet is judged)": [testing.scale("apps", "deployments", "new", "uid-new", 1, 50), set()],
	"recorded deployment over its maximum": [testing.scale("apps", "deployments", "d", "uid-d", 1, 17), {"max-accelerators"}],
	"in a system namespace": [testing.in_namespace(testing.scale("apps", "statefulsets", "new", "uid-new", 1, 2), "kube-system"), set()],
}

test_scale[name] if {
	some name, [rev, want] in scale_cases
	rules_with_records(rev) == want
}

test_scale_messages if {
	msgs := with_records(scale_cases["statefulset over the maximum"][0], "deny")
	"max-accelerators: statefulsets.apps/s at 9 replicas would hold 72 accelerators (8 per replica); training workloads may hold at most 64, so use at most 8 replicas" in msgs
	some m in with_records(scale_cases["unrecorded statefulset"][0], "deny")
	startswith(m, "scale: the gate has no record of what one replica of statefulsets.apps/new holds")
}

test_scale_of_a_core_kind_is_keyed_without_group if {
	admission.record_key("", "replicationcontrollers", "rc") == "replicationcontrollers/rc"
}

test_scale_without_whole_replicas_is_malformed if {
	rev := object.union(testing.scale("apps", "statefulsets", "s", "uid-s", 1, 2), {"request": {"object": {"spec": {"replicas": "2"}}}})
	"malformed-request: the Scale object's spec.replicas must be a non-negative integer" in with_records(rev, "deny")
	not with_records(rev, "allowed")
}

test_scale_reads_the_uid_of_the_new_object_without_an_old_one if {
	rev := json.remove(testing.scale("apps", "statefulsets", "s", "uid-s", 1, 9), ["request/oldObject"])
	rules_with_records(rev) == {"max-accelerators", "approval"}
}

test_malformed_record_is_refused if {
	records := {"ml-research": {"statefulsets.apps/s": {"uid": "uid-s", "workload_type": "nope", "devices_per_replica": 8}}}
	msgs := admission.deny with input as testing.scale("apps", "statefulsets", "s", "uid-s", 1, 2)
		with data.fleetplane.config as testing.config
		with data.fleetplane.workloads as records
	some m in msgs
	startswith(m, "scale: data.fleetplane.workloads.ml-research.statefulsets.apps/s must be")
}

test_scale_is_allowed_with_a_record if {
	with_records(scale_cases["statefulset within the maximum"][0], "allowed")
	not with_records(scale_cases["unrecorded statefulset"][0], "allowed")
}

# ------------------------------------------------------------ autoscalers

statefulset_s := {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s"}

autoscaler_cases := {
	"within the maximum": [testing.autoscaler(statefulset_s, 3), set()],
	"over the maximum": [testing.autoscaler(statefulset_s, 9), {"max-accelerators", "approval"}],
	"a custom kind found by kind": [testing.autoscaler({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "r"}, 9), {"max-accelerators", "approval"}],
	"an unrecorded target": [testing.autoscaler({"apiVersion": "apps/v1", "kind": "Deployment", "name": "new"}, 100), set()],
}

test_autoscaler[name] if {
	some name, [rev, want] in autoscaler_cases
	rules_with_records(rev) == want
}

test_autoscaler_message_names_the_autoscaler if {
	some m in with_records(autoscaler_cases["over the maximum"][0], "deny")
	endswith(m, "(HorizontalPodAutoscaler h may scale it to maxReplicas 9)")
}

test_unrecorded_autoscaler_target_is_warned_about if {
	some w in with_records(autoscaler_cases["an unrecorded target"][0], "warnings")
	startswith(w, `autoscaler: the gate has no record of Deployment "new" yet`)
}

test_api_group if {
	admission.api_group("apps/v1") == "apps"
	admission.api_group("v1") == ""
}

# ---------------------------------------------------- updates of the counts

# A training template the rules of today refuse (admitted under older ones).
legacy := testing.with_spec(testing.training, {"volumes": [{"name": "h", "hostPath": {"path": "/data"}}], "priorityClassName": "old-class"})

# Rolled out without surge, so the counts are the replicas (lifetime_test
# judges the surge).
scaled(tmpl, old, new) := testing.as_update(recreated(testing.deployment(tmpl, new)), recreated(testing.deployment(tmpl, old)).request.object)

recreated(rev) := object.union(rev, {"request": {"object": {"spec": {"strategy": {"type": "Recreate"}}}}})

cron_update(old_fields, new_fields) := testing.as_update(
	object.union(testing.cronjob(testing.training, {}), {"request": {"object": {"spec": new_fields}}}),
	object.union(testing.cronjob(testing.training, {}), {"request": {"object": {"spec": old_fields}}}).request.object,
)

count_update_cases := {
	"a legacy workload scaled down": [scaled(legacy, 4, 2), set()],
	"a legacy workload scaled up within the maximum": [scaled(legacy, 1, 3), set()],
	"a legacy workload scaled past the maximum": [scaled(legacy, 2, 9), {"max-accelerators", "approval"}],
	"a workload scaled to the approval threshold": [scaled(testing.training, 1, 4), {"approval"}],
	"a legacy workload's template changed": [testing.as_update(testing.deployment(testing.with_spec(legacy, {"nodeName": "n1"}), 1), testing.deployment(legacy, 1).request.object), {"host-path", "priority-class", "node-name"}],
	"a legacy cronjob suspended": [cron_update({}, {"suspend": true}), set()],
	"a cronjob allowed to overlap again": [cron_update({"concurrencyPolicy": "Forbid"}, {"concurrencyPolicy": "Allow"}), {"cronjob-concurrency"}],
}

test_count_updates[name] if {
	some name, [rev, want] in count_update_cases
	rules(rev) == want
}

test_count_update_mode if {
	eval(count_update_cases["a legacy workload scaled down"][0], "mode") == "holding"
	eval(count_update_cases["a legacy workload's template changed"][0], "mode") == "full"
	eval(count_update_cases["a legacy workload scaled up within the maximum"][0], "old_total_devices") == 8
}
