#!/usr/bin/env bash
# valgrind.sh -- outboxd under valgrind's memcheck through an ordinary day:
# start, orders (201), bad requests (400, 404, 415), delivery to SQS and
# DynamoDB, /metrics, a retention pass that deletes, a reload (SIGHUP: a
# new generation of workers), an order after it, and a stop.
# Asserts: every order is fulfilled and the old sent rows are deleted, and
# valgrind reports no error (invalid read or write, uninitialised value,
# bad free, definite leak) in any process: the master and the workers of
# both generations.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
command -v valgrind >/dev/null || die "valgrind is not installed (tests/lib/deps.sh installs it)"
stack_up

sql "INSERT INTO outbox (event_type, ordering_key, payload, status, attempts, created_at, sent_at)
	SELECT 'test.old', 'old-' || g, '{}', 'sent', 1, now() - interval '10 days', now() - interval '10 days'
	FROM generate_series(1, 700) g" >/dev/null
# valgrind runs everything ~20x slower: room for the stop and the reload.
OB_SHUTDOWN_TIMEOUT=30000 OB_EXTRA_TOP="pidfile = \"$T_DIR/outboxd-own.pid\"" relay_conf_write "$T_DIR/outbox.conf" "retention = 3600"
OUTBOXD_WRAP="valgrind --leak-check=full --errors-for-leak-kinds=definite --log-file=$T_DIR/vg.%p.log" \
	outboxd_start "$T_DIR/outbox.conf"
master=$(proc_pid "$OUTBOXD_PIDFILE")

: >"$T_DIR/ids"
n201=0
for i in $(seq 1 20); do
	post_order "vg-$i" "$i"
	[ "$HTTP_STATUS" = 201 ] && n201=$((n201 + 1)) && jq -r .id <<<"$HTTP_BODY" >>"$T_DIR/ids"
done
check_eq "orders answered 201" 20 "$n201"
http POST /orders -H 'Content-Type: application/json' --data-binary '{"customerId":'
check_eq "malformed JSON: HTTP status" 400 "$HTTP_STATUS"
http POST /orders -H 'Content-Type: text/plain' --data-binary 'x'
check_eq "a text/plain body: HTTP status" 415 "$HTTP_STATUS"
http GET /orders/00000000-0000-0000-0000-000000000000
check_eq "an unknown order: HTTP status" 404 "$HTTP_STATUS"
http GET /metrics
check_eq "GET /metrics: HTTP status" 200 "$HTTP_STATUS"
LC_ALL=C sort -o "$T_DIR/ids" "$T_DIR/ids"
wait_fulfilled 60 "$T_DIR/ids" || true
check_eq "orders with a fulfillment item in DynamoDB" 20 "$(fulfilled_ids | LC_ALL=C comm -12 - "$T_DIR/ids" | wc -l)"
old_gone() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.old'")" = 0 ]; }
wait_until 60 "retention to delete the old sent rows" old_gone || true
check_eq "old sent rows left after the first retention pass" 0 "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.old'")"

kill -HUP "$master"
reloaded() { grep -q 'reload done: generation' "$OUTBOXD_LOG"; }
wait_until 60 "the reload" reloaded || true
check "the reload finished (logged)" reloaded
post_order vg-after-reload 21
check_eq "an order after the reload: HTTP status" 201 "$HTTP_STATUS"
jq -r .id <<<"$HTTP_BODY" >"$T_DIR/ids2"
wait_fulfilled 60 "$T_DIR/ids2" || true
check "  ... fulfilled" _all_fulfilled "$T_DIR/ids2"

outboxd_stop
check "the pidfile outboxd wrote is removed at the stop" [ ! -e "$T_DIR/outboxd-own.pid" ]
logs=("$T_DIR"/vg.*.log)
# master + 2 HTTP, 2 relays, 1 consumer, twice (the reload's new workers)
check "valgrind logs, one per process: ${#logs[@]} (at least 11)" [ "${#logs[@]}" -ge 11 ]
bad=$(grep -L 'ERROR SUMMARY: 0 errors' "${logs[@]}" || true)
check_eq "processes with a valgrind error" "" "$bad"
for f in $bad; do
	grep -E -A 14 'Invalid|uninitialised|definitely lost in|Mismatched|ERROR SUMMARY' "$f" | head -40
done
