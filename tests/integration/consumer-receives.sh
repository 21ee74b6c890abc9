#!/usr/bin/env bash
# consumer-receives.sh -- a consumer worker with a backlog keeps several
# ReceiveMessage calls in flight (one per free batch slot,
# consumer.concurrency), so that one SQS round trip per batch does not
# bound its drain; an idle queue gets one long poll at a time.  The fault
# proxy in front of fauxqs holds every ReceiveMessage 250 ms (a far SQS)
# and records when each began and ended.  Every order still ends as one
# item and every message is deleted.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

proxy_start sqsfault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
SQS_ENDPOINT=$FP OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
	outbox_conf_write "$T_DIR/outbox.conf"
. "$T_STACK/env"	# the emulator's own endpoint again, for the checks

fault_ctl -X POST --data-binary '{"mode":"delay","ms":250,
	"actions":["ReceiveMessage"]}' >/dev/null

# The most ReceiveMessage calls in flight at one instant, from the proxy's
# records (those still in flight end now).
receives_at_once() {
	fault_ctl | jq --argjson now "$(date +%s.%N)" '
		[.stats.requests_done[], .inflight[]]
		| map(select(.action == "ReceiveMessage"))
		| [.[] | [.since, 1], [(.done // $now), -1]]
		| sort_by(.[0], .[1])
		| reduce .[] as $e ({c: 0, m: 0}; .c += $e[1] | .m = ([.m, .c] | max))
		| .m'
}
receives() {
	fault_ctl | jq '[.stats.requests_done[], .inflight[]]
		| map(select(.action == "ReceiveMessage")) | length'
}

N=300
sql_orders rcv- "$N"
outboxd_start "$T_DIR/outbox.conf"
items_all() { [ "$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")" -ge "$N" ]; }
wait_until 60 "$N fulfillment items" items_all || true
check_queue_drained 30 "every message deleted after its write"
ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" >"$T_DIR/items.json"
check_eq "fulfillment items, one per order" "$N" "$(jq length "$T_DIR/items.json")"
check_eq "  ... each for an order of this run" "$N" \
	"$(jq '[.[] | select(.customerId.S | startswith("rcv-"))] | length' "$T_DIR/items.json")"

busy=$(receives_at_once)
say "backlog: $(receives) ReceiveMessage calls, at most $busy at once"
check "with a backlog, several ReceiveMessage calls in flight at once ($busy >= 2)" \
	[ "$busy" -ge 2 ]
check "  ... never more than consumer.concurrency, 4 ($busy <= 4)" [ "$busy" -le 4 ]

# Idle: one long poll (wait_time = 1 s) at a time, once the polls the
# backlog left in flight have come back empty (1.25 s at most).
sleep 2
fault_ctl /reset -X POST >/dev/null
sleep 4
idle=$(receives_at_once) n=$(receives)
say "idle for 4 s: $n ReceiveMessage calls, at most $idle at once"
check "idle, the worker still polls ($n >= 2 receives in 4 s)" [ "$n" -ge 2 ]
check_eq "idle, one ReceiveMessage at a time" 1 "$idle"

# The stop: answers to receives held 1 s after fauxqs took their
# messages, a backlog of 300, SIGTERM once several
# receives are in flight.
fault_ctl -X POST --data-binary '{"mode":"delay","ms":1000,"after":true,
	"actions":["ReceiveMessage"]}' >/dev/null
sql_orders stop- "$N"
relayed() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
wait_until 30 "the relay to send the second $N" relayed || true
in_flight() { fault_ctl | jq '[.inflight[] | select(.action == "ReceiveMessage")] | length'; }
several() { [ "$(in_flight)" -ge 2 ]; }
wait_until 30 "several receives in flight" several || true
f=$(in_flight)
outboxd_stop
items=$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")
hidden=$(sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessagesNotVisible)
shown=$(sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessages)
say "stop with $f receives in flight: $((items - N)) items written, $shown messages visible, $hidden in flight"
check "the stop came with receives in flight ($f >= 2)" [ "$f" -ge 2 ]
check_eq "after the stop, no message left in flight (invisible until its visibility timeout)" 0 "$hidden"
check_eq "  ... each message of the second $N written or still queued" "$N" "$((items - N + shown))"
check "the log says the stop waits for the receives in flight" \
	grep -q 'stopping after the [0-9]* message(s) in hand and what [0-9]* receive(s) in flight bring' "$OUTBOXD_LOG"
