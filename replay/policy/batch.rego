# METADATA
# title: Replay batch
# description: >-
#   Evaluates many inputs of the real admission gate and decision policies in
#   one query, for the fleet replay (controller/replay). Each answer is what a
#   single query of the same input would return: the AdmissionReview response
#   of data.system.main (with the clock set to the submission's time and
#   data.fleetplane.spend set to the document the controller last published,
#   input.spend), or the
#   {allow, reasons} document of a decision. Answers carry the index of their
#   input, so a missing answer is noticed instead of shifting the others, and
#   the marker the replay wrote into the configuration, so a configuration
#   replaced by someone else is noticed too. Nothing here decides anything
#   itself. Not loaded by the platform's OPA.
package replay.batch

import data.fleetplane.decisions.preempt
import data.fleetplane.decisions.reclaim
import data.system

# METADATA
# entrypoint: true
# description: '{"marker": m, "admission": [[i, response]], "reclaim": [[i, decision]], "preempt": [[i, decision]]}'
answers := {
	"marker": object.get(data.fleetplane.config, "replay_marker", null),
	"admission": [[i, response] |
		some i, item in input.admission
		response := system.main.response with input as item.review
			with time.now_ns as item.now_ns
			with data.fleetplane.spend as input.spend
	],
	"reclaim": [[i, decision] |
		some i, item in input.reclaim
		decision := reclaim.decision with input as item
	],
	"preempt": [[i, decision] |
		some i, item in input.preempt
		decision := preempt.decision with input as item
	],
}
