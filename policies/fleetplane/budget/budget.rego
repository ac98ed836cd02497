# METADATA
# title: Budget
# description: >-
#   Month-to-date spend per team (pushed by the controller to
#   data.fleetplane.spend), the reservations of workloads admitted since
#   (data.fleetplane.reservations, kept by the controller), the estimated
#   cost of a workload, and the verdict against the team's monthly budget.
#   Ratios and budgets come from data.fleetplane.config; nothing here reads
#   input.
package fleetplane.budget

import data.fleetplane.config

# METADATA
# description: The calendar month (UTC) of a time in nanoseconds, as "YYYY-MM".
month(now_ns) := sprintf("%04d-%02d", [year, month_number]) if {
	[year, month_number, _] := time.date(now_ns)
}

# METADATA
# description: >-
#   The month OPA is in now; the controller pushes spend for this month.
month_now := month(time.now_ns())

# METADATA
# description: >-
#   USD a team has spent this month. A team absent from spend, or whose record
#   is for another month, has spent nothing. Undefined when the record for this
#   month is malformed (see spend_problems), so callers fail closed.
spent(team, now_ns) := 0 if {
	not has_record(team)
} else := usd if {
	record := data.fleetplane.spend[team]
	record.month == month(now_ns)
	usd := record.usd
	is_number(usd)
	usd >= 0
} else := 0 if {
	is_string(data.fleetplane.spend[team].month)
	data.fleetplane.spend[team].month != month(now_ns)
}

has_record(team) if _ = data.fleetplane.spend[team]

# METADATA
# description: What is wrong with a team's spend record, if anything.
spend_problems(team, now_ns) := {msg |
	has_record(team)
	not spent(team, now_ns)
	msg := sprintf(
		"data.fleetplane.spend.%s must be {\"month\": \"YYYY-MM\", \"usd\": <non-negative number>}, got %s",
		[team, json.marshal(data.fleetplane.spend[team])],
	)
}

# METADATA
# description: >-
#   USD reserved for the team's workloads admitted but not yet in its spend:
#   the unexpired entries of data.fleetplane.reservations[team], a map from a
#   workload's uid to {usd, expires_at (epoch seconds), uids (optional: the
#   uids of objects whose pods the reservation already covers, such as a
#   Deployment's ReplicaSets)}. An entry whose key or uids name one of uids
#   (the object under review and its owners) is that object's own
#   reservation and is not counted twice. A team without entries has none;
#   undefined when an entry is malformed (see reservation_problems), so
#   callers fail closed.
reserved(team, now_ns, uids) := kept + admitted_reserved(team, now_ns, uids) if {
	kept := kept_reserved(team, now_ns, uids)
}

# The controller's reservations of a team (data.fleetplane.reservations), as
# reserved describes them.
kept_reserved(team, now_ns, uids) := 0 if {
	not has_reservations(team)
} else := amount if {
	# By expiry (what the controller writes): a decision reads the team's few
	# expiry buckets and its own entries, not every workload of the team.
	doc := data.fleetplane.reservations[team]
	is_object(doc.expiring)
	amount := reserved_by_expiry(doc, now_ns, uids)
} else := sum(amounts) if {
	entries := data.fleetplane.reservations[team]
	is_object(entries)
	not entries.expiring
	count([e |
		some e in entries
		is_number(e.usd)
		e.usd >= 0
		is_number(e.expires_at)
		is_array(object.get(e, "uids", []))
	]) == count(entries)
	amounts := [e.usd |
		some key, e in entries
		e.expires_at * 1000000000 > now_ns
		not own_reservation(key, e, uids)
	]
}

has_reservations(team) if _ = data.fleetplane.reservations[team]

# A workload the controller's reservations hold (by expiry, or as the older
# flat map).
kept_reservation(team, key) if _ = data.fleetplane.reservations[team].workloads[key]

kept_reservation(team, key) if {
	not data.fleetplane.reservations[team].expiring
	_ = data.fleetplane.reservations[team][key]
}

# METADATA
# description: >-
#   USD reserved at admission (issue 33, the budget race): the admission
#   front (controller/admission_front.py) writes an entry {usd, expires_at}
#   under data.fleetplane.admitted[team][workload uid] as part of admitting a
#   workload, before answering the API server, so a workload admitted next
#   sees it though no pod of the first exists yet. The unexpired entries
#   count but the object's own (its uids) and those the controller's
#   reservations already hold (the same workload uid: its pods exist and
#   are priced there). A team without entries has none; undefined when an
#   entry is malformed, so callers fail closed.
admitted_reserved(team, now_ns, uids) := 0 if {
	not data.fleetplane.admitted[team]
	now_ns == now_ns
	uids == uids
} else := sum(amounts) if {
	entries := data.fleetplane.admitted[team]
	is_object(entries)
	count([key | some key, e in entries; not well_formed_entry(e)]) == 0
	amounts := [e.usd |
		some key, e in entries
		e.expires_at * 1000000000 > now_ns
		not key in uids
		not kept_reservation(team, key)
	]
}

# METADATA
# description: >-
#   USD reserved in a team's document by expiry: {expiring: {<expires_at,
#   epoch seconds>: USD of the entries expiring then}, workloads: {uid:
#   entry}, owners: {uid of an object between a workload and its pods: the
#   workload's uid}}. The unexpired buckets' sum, less the unexpired entries
#   of the object under review (its uids, or a workload they are between);
#   undefined when a bucket or one of those entries is malformed. Its cost
#   grows with the hours reservations reach ahead, not with the workloads.
reserved_by_expiry(doc, now_ns, uids) := total - own if {
	count([at |
		some at, usd in doc.expiring
		not valid_bucket(at, usd)
	]) == 0
	total := sum([usd |
		some at, usd in doc.expiring
		to_number(at) * 1000000000 > now_ns
	])
	keys := {uid | some uid in uids; doc.workloads[uid]} | {key | some uid in uids; key := doc.owners[uid]}
	count([key | some key in keys; not well_formed_entry(doc.workloads[key])]) == 0
	own := sum([e.usd |
		some key in keys
		e := doc.workloads[key]
		e.expires_at * 1000000000 > now_ns
	])
}

valid_bucket(at, usd) if {
	is_number(to_number(at))
	is_number(usd)
	usd >= 0
}

well_formed_entry(e) if {
	is_number(e.usd)
	e.usd >= 0
	is_number(e.expires_at)
	is_array(object.get(e, "uids", []))
}

own_reservation(key, _, uids) if key in uids

own_reservation(_, entry, uids) if {
	some uid in entry.uids
	uid in uids
}

# METADATA
# description: What is wrong with a team's reservations, if anything.
reservation_problems(team, now_ns, uids) := {msg |
	has_reservations(team)
	not reserved(team, now_ns, uids)
	msg := sprintf(
		"data.fleetplane.reservations.%s must map workload uids to {\"usd\": <non-negative number>, \"expires_at\": <epoch seconds>, \"uids\": [<uid>]}, got %s",
		[team, json.marshal(data.fleetplane.reservations[team])],
	)
}

# METADATA
# description: >-
#   Estimated USD of a workload: the sum over items {devices,
#   price_per_hour_usd, seconds} of devices x hourly price x hours.
#   One item (the common case) is its own sum: sum costs OPA as much as a
#   product of floats.
estimate_usd(items) := ((item.devices * item.price_per_hour_usd) * item.seconds) / 3600 if {
	count(items) == 1
	item := items[0]
} else := sum([cost |
	some item in items
	cost := ((item.devices * item.price_per_hour_usd) * item.seconds) / 3600
])

# METADATA
# description: >-
#   True when the workload type does not get denied for budget, as the
#   configuration model defines it (components/config.py): the type is
#   budget_exempt ("teams may list this type") and the team lists it in
#   budget_exempt_types ("types that keep running over budget"). Either
#   alone exempts nothing.
exempt(team, workload_type) if {
	config.workload_types[workload_type].budget_exempt == true
	workload_type in config.teams[team].budget_exempt_types
}

# METADATA
# description: >-
#   The verdict for a workload identified by uids (see reserved): {level,
#   total_usd, spent_usd, reserved_usd, estimate_usd, budget_usd}; the total
#   is spend + reservations + estimate. level is "deny" over deny_ratio x
#   budget (or "exempt" for budget-exempt types), "warn" over warn_ratio x
#   budget, otherwise "ok". Reaching a ratio exactly is still under it.
#   Undefined when spend, reservations or configuration is malformed.
verdict(team, workload_type, estimate, now_ns, uids) := {
	"level": level(team, workload_type, total),
	"total_usd": total,
	"spent_usd": spent_usd,
	"reserved_usd": reserved_usd,
	"estimate_usd": estimate,
	"budget_usd": config.teams[team].monthly_budget_usd,
} if {
	spent_usd := spent(team, now_ns)
	reserved_usd := reserved(team, now_ns, uids)
	total := (spent_usd + reserved_usd) + estimate
}

level(team, workload_type, total) := "ok" if {
	# The common case first, with one product (a product of floats costs OPA
	# ~40 allocations): at or under the warning line when that line is at or
	# under the limit (warn_ratio <= deny_ratio and a budget of at least 0),
	# the total is under both lines. Otherwise the chain below decides.
	ratios := config.budget
	limit := config.teams[team].monthly_budget_usd
	is_number(limit)
	limit >= 0
	is_number(ratios.deny_ratio)
	ratios.warn_ratio <= ratios.deny_ratio
	total <= ratios.warn_ratio * limit
} else := "exempt" if {
	total > line(team, "deny_ratio")
	exempt(team, workload_type)
} else := "deny" if {
	total > line(team, "deny_ratio")
} else := "warn" if {
	total > line(team, "warn_ratio")
} else := "ok" if {
	is_number(config.budget.warn_ratio)
	is_number(config.budget.deny_ratio)
	is_number(config.teams[team].monthly_budget_usd)
}

# A line of a team's budget: ratio ("warn_ratio" or "deny_ratio") x monthly
# budget. A function so that OPA computes the product once per decision (it
# remembers calls with the same arguments) though level may compare twice.
line(team, ratio) := config.budget[ratio] * config.teams[team].monthly_budget_usd

# METADATA
# description: A verdict as one sentence for users; percent is of the monthly budget.
describe(team, v) := sprintf(
	"team %s would reach %s of its monthly budget ($%s spent this month + $%s estimated for this workload, budget $%s)",
	[team, percent(v), usd(v.spent_usd), usd(v.estimate_usd), usd(v.budget_usd)],
) if {
	object.get(v, "reserved_usd", 0) == 0
} else := sprintf(
	"team %s would reach %s of its monthly budget ($%s spent this month + $%s reserved for workloads admitted since + $%s estimated for this workload, budget $%s)",
	[team, percent(v), usd(v.spent_usd), usd(v.reserved_usd), usd(v.estimate_usd), usd(v.budget_usd)],
)

percent(v) := sprintf("%d%%", [round((v.total_usd * 100) / v.budget_usd)]) if {
	v.budget_usd > 0
} else := "more than all"

usd(x) := sprintf("%v", [round(x)])
