# The reservation made as part of admitting a workload (issue 33, the budget
# race): the controller's reservations (data.fleetplane.reservations) are
# written from pods, so workloads admitted together were each priced as if
# the others did not exist. The admission front
# (controller/admission_front.py), which the API server calls in OPA's
# place, asks for this document after OPA allowed a review and writes it
# under data.fleetplane.admitted before it answers, one review of a team at
# a time, so the next review of the team counts it (budget.reserved).
package fleetplane.admission

# METADATA
# description: >-
#   What an allowed CREATE of an accelerator workload in a team namespace
#   reserves: {team, uid (the object's, as the controller's reservations key
#   it), usd (the gate's estimate), expires_at (epoch seconds: the front
#   adds how long the entry holds until the controller's reservations cover
#   the pods)}. Undefined for anything else.
admission_reservation := {"team": team, "uid": uid, "usd": estimate_usd} if {
	mode == "full"
	input.request.operation == "CREATE"
	allowed
	uid := input.request.object.metadata.uid
	is_string(uid)
	uid != ""
	is_number(estimate_usd)
	estimate_usd > 0
}
