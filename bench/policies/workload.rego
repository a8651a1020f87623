# The peer workload in Rego, as an expert writes it for regorus: tables in `data`, batch-level
# facts as complete rules (each computed at most once per evaluation), "first failing rule" as
# an else chain, the URL host extracted by the workload's regex and lower-cased.
# Entry point: data.gate.decisions -> ["allow" | rule id, ...], one per input.calls entry.
package gate

import rego.v1

host_re := `^[hH][tT][tT][pP][sS]?://(?:[^/?#@]*@)?([A-Za-z0-9.\-]+)(?::[0-9]*)?(?:[/?#]|$)`

# R2 pre-scan: the latch fact, or any ingest call anywhere in the batch.
latch_active if input.facts.latched == true

latch_active if {
	some c in input.calls
	data.tools[c.tool] == "ingest"
}

# R4a: the last 10 messages sent by the client.
client_messages := [m | some m in input.facts.messages; m.from == "client"]

window := array.slice(client_messages, count(client_messages) - 10, count(client_messages))

media_ok if {
	some m in window
	some k in m.media
	data.media_kinds[k]
}

# R4b
phone_ok if {
	is_string(input.facts.fields.phone)
	input.facts.fields.phone != ""
}

# R4c: an earlier successful call; the current batch does not count.
verified if {
	some c in input.facts.called
	c.tool == "verify_identity"
	c.ok == true
}

stage_ok(call) if {
	is_string(call.tool)
	data.tools[call.tool]
	data.stages[input.facts.stage][call.tool]
}

host_ok(url) if {
	is_string(url)
	m := regex.find_all_string_submatch_n(host_re, url, 1)
	count(m) == 1
	allowed_host(lower(m[0][1]))
}

allowed_host(h) if data.hosts[h]

allowed_host(h) if {
	some s in data.host_suffixes
	endswith(h, s)
}

amount_ok(a) if {
	is_number(a)
	a <= 250
}

decision(call) := "R1_stage_whitelist" if {
	not stage_ok(call)
} else := "R2_capability_latch" if {
	data.tools[call.tool] == "write"
	latch_active
} else := "R3_host_allowlist" if {
	call.tool == "web_fetch"
	not host_ok(call.args.url)
} else := "R4a_client_media" if {
	call.tool == "authorise_bacs_payout"
	not media_ok
} else := "R4b_phone" if {
	call.tool == "authorise_bacs_payout"
	not phone_ok
} else := "R4c_verify_identity" if {
	call.tool == "authorise_bacs_payout"
	not verified
} else := "R4d_amount" if {
	call.tool == "authorise_bacs_payout"
	not amount_ok(call.args.amount)
} else := "allow"

decisions := [decision(c) | some c in input.calls]
