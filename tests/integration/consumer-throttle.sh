#!/usr/bin/env bash
# consumer-throttle.sh -- DynamoDB throttles the consumer's PutItems (the
# fault proxy in front of dynalite answers HTTP 400
# ProvisionedThroughputExceededException, then ThrottlingException): every
# order still ends as exactly one fulfillment item and every message is
# deleted; the consumer backs off (a bounded number of PutItems reach the
# throttled table, no busy loop) and says so in its log.  Also: the
# consumer.concurrency key's range at -t.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

proxy_start ddbfault fault-proxy.py --upstream "$DDB_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
fault() { curl -sS --max-time 10 "$FP/__fault" "$@"; }
DDB_ENDPOINT=$FP OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
	outbox_conf_write "$T_DIR/outbox.conf"
. "$T_STACK/env"	# the emulator's own endpoint again, for the checks

# consumer.concurrency: 1..16, refused outside with the file and line
sed 's/^\(\s*wait_time = .*\)$/\1\n\tconcurrency = 17/' "$T_DIR/outbox.conf" >"$T_DIR/bad.conf"
out=$("$T_ROOT/outboxd" -t -c "$T_DIR/bad.conf" 2>&1) && rc=0 || rc=$?
check "consumer.concurrency = 17 refused by -t (exit $rc)" [ "$rc" -ne 0 ]
line=$(grep -n 'concurrency = 17' "$T_DIR/bad.conf" | cut -d: -f1)
check "  ... naming the file, the line and the range: $out" \
	grep -q "bad.conf:$line: .*concurrency.*1.*16" <<<"$out"
sed -i 's/^\(\s*wait_time = .*\)$/\1\n\tconcurrency = 4/' "$T_DIR/outbox.conf"
check "consumer.concurrency = 4 passes -t" "$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf"

# Throttled for 4 s from the first PutItem on.
fault -X POST --data-binary '{"mode":"status","status":400,
	"code":"ProvisionedThroughputExceededException",
	"message":"The level of configured provisioned throughput for the table was exceeded",
	"seconds":4,"actions":["PutItem"]}' >/dev/null
outboxd_start "$T_DIR/outbox.conf"
grep -q 'up to 10 messages a batch, 4 batches at once' "$OUTBOXD_LOG" &&
	pass "the consumer's start-up line gives its batches at once" ||
	fail "no start-up line with '4 batches at once' in the log"

N=120
sql_orders thr- "$N"

throttled_some() { [ "$(fault | jq '.stats.faulted_requests')" -ge 1 ]; }
wait_until 15 "the first throttled PutItem" throttled_some || true
t_thr=$(now_ms)
items_all() { [ "$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")" -ge "$N" ]; }
wait_until 60 "$N fulfillment items despite the throttling" items_all || true
say "items complete $(($(now_ms) - t_thr)) ms after the first throttled PutItem"
faulted=$(fault | jq '.stats.faulted_requests')
puts=$(fault | jq '.stats.by_action.PutItem // 0')
say "PutItems: $puts in all, $faulted throttled (4 s window)"
# Without backoff a consumer with 40 messages in hand sends a PutItem per
# ~1 ms round trip while throttled: thousands in 4 s.  With it, each
# message tries 4 times with 100..800 ms between tries and no batch is
# received meanwhile.
check "throttled PutItems bounded by the backoff: $faulted <= 400" [ "$faulted" -le 400 ]
check "  ... and at least one per message in hand was throttled ($faulted >= 10)" [ "$faulted" -ge 10 ]
check "the log says DynamoDB throttled and the consumer backs off" \
	grep -q 'DynamoDB throttled [0-9]* PutItem(s): retrying in [0-9]* ms, no messages received meanwhile' "$OUTBOXD_LOG"

ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" >"$T_DIR/items.json"
check_eq "fulfillment items, one per order" "$N" "$(jq length "$T_DIR/items.json")"
sql "SELECT id || E'\t' || customer_id || E'\t' || amount_cents FROM orders ORDER BY 1" >"$T_DIR/orders.tsv"
jq -r '.[] | [.orderId.S, .customerId.S, .amountCents.N] | @tsv' "$T_DIR/items.json" | LC_ALL=C sort >"$T_DIR/items.tsv"
check "every item matches its order (id, customerId, amountCents)" cmp -s "$T_DIR/orders.tsv" "$T_DIR/items.tsv"
check_queue_drained 30 "every message deleted after its write"

# ThrottlingException, a few requests only: retried in place, no
# redelivery needed.
fault -X POST --data-binary '{"mode":"status","status":400,"code":"ThrottlingException",
	"message":"Rate of requests exceeds the allowed throughput.","times":3,"actions":["PutItem"]}' >/dev/null
curl -sS -X POST "$FP/__fault/reset" >/dev/null
sql_orders thr2- 20
t0=$(now_ms)
items_more() { [ "$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")" -ge $((N + 20)) ]; }
wait_until 30 "20 more items through 3 ThrottlingExceptions" items_more || true
took=$(($(now_ms) - t0))
check_eq "fulfillment items after the second burst" $((N + 20)) "$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")"
# A redelivery would wait for the visibility timeout (STACK_VISIBILITY_TIMEOUT).
check "  ... retried in place, faster than a redelivery ($took ms < ${STACK_VISIBILITY_TIMEOUT:-10}000)" \
	[ "$took" -lt "${STACK_VISIBILITY_TIMEOUT:-10}000" ]
check_queue_drained 30 "every message of the second burst deleted"
http GET /metrics; m=$HTTP_BODY
check_eq "outboxd_consumer_messages_total{outcome=\"processed\"}" $((N + 20)) \
	"$(awk '/^outboxd_consumer_messages_total\{.*outcome="processed"/ {s += $2} END {print s + 0}' <<<"$m")"

outboxd_stop
check "no secret in the log" bash -c '! grep -qF "$1" "$2"' _ "${AWS_TEST_SECRET_ACCESS_KEY:-outboxd-test-secret}" "$OUTBOXD_LOG"
