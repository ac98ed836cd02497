package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Issue 33: workloads admitted together see each other's reservations made
# at admission.
with_uid(rev, uid) := json.patch(rev, [{"op": "add", "path": "/request/object/metadata/uid", "value": uid}])

long_training := testing.pod(testing.with_spec(testing.training, {"activeDeadlineSeconds": 1000000}))

reservation_of(rev, admitted) := r if {
	r := admission.admission_reservation with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.admitted as admitted
		with time.now_ns as testing.now_ns
}

decision_with(rev, admitted) := {"allowed": allowed, "rules": rules} if {
	allowed := admission.allowed with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.admitted as admitted
		with time.now_ns as testing.now_ns
	rules := {split(m, ":")[0] | some m in admission.deny} with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.admitted as admitted
		with time.now_ns as testing.now_ns
}

test_an_admitted_workload_reserves_its_estimate if {
	r := reservation_of(with_uid(long_training, "uid-1"), {})
	r.team == "research"
	r.uid == "uid-1"
	r.usd > 0
}

test_a_refused_workload_reserves_nothing if {
	not reservation_of(with_uid(testing.pod(testing.with_spec(testing.training, {"priorityClassName": "x"})), "uid-1"), {})
}

test_a_cpu_pod_reserves_nothing if {
	not reservation_of(with_uid(testing.pod(testing.cpu), "uid-1"), {})
}

test_the_second_workload_sees_the_first if {
	first := reservation_of(with_uid(long_training, "uid-1"), {})
	admitted := {"research": {"uid-1": {"usd": first.usd, "expires_at": testing.now + 600}}}

	# alone within the budget, beside the first over it
	decision_with(with_uid(long_training, "uid-2"), {}).allowed == true
	"budget" in decision_with(with_uid(long_training, "uid-2"), admitted).rules

	# the fast path agrees: it stands aside or refuses
	not admission.fast_allowed with input as with_uid(long_training, "uid-2")
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.admitted as admitted
		with time.now_ns as testing.now_ns
}

test_an_own_lapsed_or_kept_admission_reservation_is_not_counted[name] if {
	some name, admitted in {
		"its own": {"research": {"uid-2": {"usd": 40000, "expires_at": testing.now + 600}}},
		"lapsed": {"research": {"uid-1": {"usd": 40000, "expires_at": testing.now - 1}}},
		"another team's": {"serving": {"uid-1": {"usd": 40000, "expires_at": testing.now + 600}}},
	}
	decision_with(with_uid(long_training, "uid-2"), admitted).allowed == true
}

test_an_admission_reservation_the_controller_holds_counts_once if {
	admitted := {"research": {"uid-1": {"usd": 40000, "expires_at": testing.now + 600}}}
	kept := {"research": {"expiring": {}, "workloads": {"uid-1": {"usd": 0, "expires_at": testing.now + 3600}}, "owners": {}}}
	admission.allowed with input as with_uid(long_training, "uid-2")
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.admitted as admitted
		with data.fleetplane.reservations as kept
		with time.now_ns as testing.now_ns
}

test_a_malformed_admission_reservation_refuses if {
	admitted := {"research": {"uid-1": {"usd": "lots", "expires_at": testing.now + 600}}}
	decision_with(with_uid(long_training, "uid-2"), admitted).allowed == false
}
