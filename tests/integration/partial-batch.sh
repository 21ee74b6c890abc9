#!/usr/bin/env bash
# partial-batch.sh -- the case from the field: SendMessageBatch answers
# HTTP 200 but one of its 10 entries is in Failed.  The relay must read the
# answer entry by entry: 9 rows become 'sent', the 10th stays 'pending'
# with its attempt and error recorded, and a later pass sends it - and only
# it (no re-send of the 9).  The queue ends with exactly the 10 events.
# Consumers are off so the queue can be inspected.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
stack_up

proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events \
	OB_RELAY_WORKERS=1 OB_BATCH_SIZE=10 OB_CONSUMER_WORKERS=0 \
	outbox_conf_write "$T_DIR/outbox.conf"
. "$T_STACK/env"	# back to the emulator's own endpoint and queue URL
outboxd_start "$T_DIR/outbox.conf"

fault() { curl -sS "$FP/__fault" "$@"; }
fault -X POST --data-binary '{"mode":"partial-batch","min_entries":10,"times":1,"hold_retry":true,"hold_max":30}' >/dev/null

# 10 orders and their 10 outbox rows in ONE transaction (one statement), so
# one relay pass claims them together
sql "WITH o AS (
	INSERT INTO orders (customer_id, amount_cents)
	SELECT 'pb-' || g, 100 * g FROM generate_series(1, 10) g
	RETURNING id, customer_id, amount_cents, created_at)
INSERT INTO outbox (event_type, ordering_key, payload)
SELECT 'order.created', o.id::text,
	jsonb_build_object('orderId', o.id, 'customerId', o.customer_id,
		'amountCents', o.amount_cents, 'createdAt', o.created_at)
FROM o ORDER BY o.customer_id" >/dev/null
check_eq "10 outbox rows inserted in one transaction" 10 "$(sql "SELECT count(*) FROM outbox")"

injected() { [ "$(fault | jq '.stats.injected | length')" -ge 1 ]; }
wait_until 15 "the relay's batch of 10 (fault injected)" injected || true
check_eq "one batch of 10 reached the proxy and got 1 entry failed" "1 10" \
	"$(fault | jq -r '"\(.stats.injected | length) \(.stats.injected[0].entries // 0)"')"
victim_body=$(fault | jq -r '.stats.injected[0].MessageBody // empty')
victim=$(psql -X -qAt -v ON_ERROR_STOP=1 -v body="$victim_body" \
	<<<"SELECT id FROM outbox WHERE payload = :'body'::jsonb" 2>/dev/null || true)
say "failed entry: Id $(fault | jq -r '.stats.injected[0].Id') = outbox row ${victim:-?}"
check "the failed entry's body is one outbox row's payload" [ -n "$victim" ]

nine_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" -ge 9 ]; }
wait_until 15 "9 rows marked sent" nine_sent || true
recorded() { [ "$(sql "SELECT count(*) FROM outbox WHERE id = ${victim:-0} AND last_error IS NOT NULL")" = 1 ]; }
wait_until 5 "the failure recorded on the 10th row" recorded || true
# the retry is held by the proxy: this is the state between the passes
check_eq "after the first pass: rows sent" 9 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "after the first pass: the row not sent is the failed entry" "${victim:-none}" \
	"$(sql "SELECT string_agg(id::text, ',') FROM outbox WHERE status <> 'sent'")"
check_eq "the failed row is still pending (to be retried, not dead)" pending \
	"$(sql "SELECT status FROM outbox WHERE id = ${victim:-0}")"
check "the failed row has attempts >= 1 ($(sql "SELECT attempts FROM outbox WHERE id = ${victim:-0}"))" \
	[ "$(sql "SELECT coalesce(max(attempts), 0) FROM outbox WHERE id = ${victim:-0}")" -ge 1 ]
err=$(sql "SELECT coalesce(last_error, '') FROM outbox WHERE id = ${victim:-0}")
check "the failed row's last_error names the broker's reason: '$err'" \
	grep -Eq 'InternalError|injected' <<<"$err"

curl -sS -X POST -o /dev/null "$FP/__fault/release"
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" = 10 ]; }
wait_until 45 "the failed row sent on a later pass" all_sent || true
check_eq "finally all 10 rows sent" 10 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "entries that reached the queue (no re-send of the 9)" 10 "$(fault | jq .stats.entries_forwarded)"

# read the whole queue straight from the emulator
: >"$T_DIR/msgs.jsonl"
for _ in $(seq 1 10); do
	r=$(aws_call sqs "$SQS_ENDPOINT" ReceiveMessage "$(jq -nc --arg q "$QUEUE_URL" \
		'{QueueUrl:$q, MaxNumberOfMessages:10, VisibilityTimeout:300, WaitTimeSeconds:1, MessageAttributeNames:["All"]}')")
	[ "$(jq '.Messages // [] | length' <<<"$r")" = 0 ] && break
	jq -c '.Messages[]' <<<"$r" >>"$T_DIR/msgs.jsonl"
done
check_eq "messages in the queue" 10 "$(wc -l <"$T_DIR/msgs.jsonl")"
jq -r '.Body | fromjson | tojson' "$T_DIR/msgs.jsonl" 2>/dev/null | jq -cS . | LC_ALL=C sort >"$T_DIR/bodies"
sql "SELECT payload::text FROM outbox" | jq -cS . | LC_ALL=C sort >"$T_DIR/payloads"
check "message bodies are exactly the 10 outbox payloads" cmp -s "$T_DIR/bodies" "$T_DIR/payloads"
check_eq "messages with attribute EventType = order.created" 10 \
	"$(jq -s '[.[] | select(.MessageAttributes.EventType.StringValue == "order.created")] | length' "$T_DIR/msgs.jsonl")"
check_eq "outbox rows failed (dead)" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"
