#!/usr/bin/env bash
# consumer-skip.sh -- the consumer writes only its own event types
# (consumer.event_types, default {"order.created"}) and skips the others
# of a shared queue: deleted, nothing written, never dead-lettered,
# counted as outboxd_consumer_messages_total{outcome="skipped"}, and not
# logged message by message (issue 26, item 7).
#   1. outbox rows written with SQL, published by the relays: an
#      order.cancelled with an order-shaped payload, an invoice.paid, and
#      one order.created.  Only the order.created one becomes a
#      fulfillment; the queue ends empty (nothing in flight) with no dead
#      letter; skipped +2, processed +1, error +0; and after more than the
#      queue's visibility timeout nothing came back (no count moved).
#   2. 4 more of each skipped type, and one message sent straight to the
#      queue without an EventType attribute (not by a relay): skipped
#      +9 more, still one fulfillment, no dead letter; the log at info or
#      above names each skipped type once (3 lines in all), not each of the
#      11 messages.
#   3. Reloaded with event_types = {"order.created", "order.cancelled"}:
#      an order.cancelled row now becomes a fulfillment.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
# A short visibility timeout bounds the wait for a message left undeleted
# to come back.
export STACK_VISIBILITY_TIMEOUT=5
stack_up

CONF=$T_DIR/outbox.conf
OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 outbox_conf_write "$CONF"
. "$T_STACK/env"
outboxd_start "$CONF"
M=$T_DIR/metrics
S='outboxd_consumer_messages_total{outcome="skipped"}'
P='outboxd_consumer_messages_total{outcome="processed"}'
E='outboxd_consumer_messages_total{outcome="error"}'
D='outboxd_consumer_messages_total{outcome="duplicate"}'
scrape "$M.0" || die "first scrape failed"
check "the exposition has the skipped outcome" grep -qF "$S" "$M.0"

# event_row TYPE CUSTOMER -- an order and an outbox row of TYPE with that
# order's payload (order-shaped); prints the order id
event_row() {
	psql -X -v ON_ERROR_STOP=1 -qAt -v type="$1" -v cust="$2" <<'SQL'
WITH o AS (INSERT INTO orders (customer_id, amount_cents) VALUES (:'cust', 111)
	RETURNING id, customer_id, amount_cents, created_at)
INSERT INTO outbox (event_type, ordering_key, payload)
SELECT :'type', o.id::text, jsonb_build_object('orderId', o.id,
	'customerId', o.customer_id, 'amountCents', o.amount_cents,
	'createdAt', o.created_at) FROM o
RETURNING payload->>'orderId';
SQL
}
# invoice_row N -- another service's event: an invoice.paid row
invoice_row() {
	sql "INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('invoice.paid',
		'inv-$1', jsonb_build_object('invoiceId', 'inv-$1', 'amountCents', 500, 'paidAt', now()))"
}
metric_at_least() { scrape "$M.now" && [ "$(delta "$M.0" "$M.now" "$1")" -ge "$2" ]; }
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
# consumer lines at info or above (logfmt), without the start-up lines
# (what it consumes, where its AWS credentials come from)
consumer_lines() {
	grep -E '^time=[^ ]+ level=(info|warn|error) role=consumer' "$OUTBOXD_LOG" |
		grep -v -e 'msg="consuming ' -e 'msg="AWS credentials from ' || true
}
count_lines() { consumer_lines | grep -cF -- "$1" || true; }

# ---- 1: one of each type -------------------------------------------------------
cancelled_id=$(event_row order.cancelled skip-cancelled-1)
invoice_row 1
created_id=$(sql_order skip-created-1 300)
echo "$created_id" >"$T_DIR/created.id"
say "order.cancelled row for order $cancelled_id, invoice.paid row, order.created row for order $created_id"
wait_until 30 "every outbox row sent" all_sent || true
wait_fulfilled 30 "$T_DIR/created.id" || true
wait_until 30 "2 skipped messages" metric_at_least "$S" 2 || true
wait_until 20 "the queue to be empty" queue_empty || true
check_eq "1: outbox rows sent" 3 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "1: fulfillment items: only the order.created one" "$created_id" "$(fulfilled_ids | paste -sd' ')"
check_queue_drained 1 "the consumer to delete every message"
scrape "$M.1" || die "scrape failed"
check_eq "1: skipped (order.cancelled + invoice.paid)" 2 "$(delta "$M.0" "$M.1" "$S")"
check_eq "1: processed" 1 "$(delta "$M.0" "$M.1" "$P")"
check_eq "1: error" 0 "$(delta "$M.0" "$M.1" "$E")"
# Nothing was left undeleted: after more than the visibility timeout no
# message came back to be counted again, and the queue is still empty.
sleep $((STACK_VISIBILITY_TIMEOUT + 2))
scrape "$M.2" || die "scrape failed"
check_eq "1: skipped after the visibility timeout (nothing received twice)" 2 "$(delta "$M.0" "$M.2" "$S")"
check_eq "1: processed + duplicate + error after the visibility timeout" 1 \
	"$(($(delta "$M.0" "$M.2" "$P") + $(delta "$M.0" "$M.2" "$D") + $(delta "$M.0" "$M.2" "$E")))"
check_eq "1: queue still empty (visible + in flight)" "0+0" "$(queue_in_queue)"
check_eq "1: 'cannot be mapped' lines" 0 "$(count_lines 'cannot be mapped')"

# ---- 2: more of each, and one message without an EventType ---------------------
for i in 2 3 4 5; do
	event_row order.cancelled "skip-cancelled-$i" >/dev/null
	invoice_row "$i"
done
aws_call sqs "$SQS_ENDPOINT" SendMessage "$(jq -nc --arg q "$QUEUE_URL" \
	'{QueueUrl:$q, MessageBody:({orderId:"no-attribute-1", customerId:"x", amountCents:1} | tostring)}')" >/dev/null ||
	fail "2: SendMessage without attributes"
wait_until 30 "every outbox row sent" all_sent || true
wait_until 30 "11 skipped messages" metric_at_least "$S" 11 || true
wait_until 20 "the queue to be empty" queue_empty || true
scrape "$M.3" || die "scrape failed"
check_eq "2: skipped in all (5 order.cancelled, 5 invoice.paid, 1 without EventType)" 11 "$(delta "$M.0" "$M.3" "$S")"
check_eq "2: processed + duplicate + error" 1 \
	"$(($(delta "$M.0" "$M.3" "$P") + $(delta "$M.0" "$M.3" "$D") + $(delta "$M.0" "$M.3" "$E")))"
check_eq "2: fulfillment items: still only the order.created one" "$created_id" "$(fulfilled_ids | paste -sd' ')"
check_queue_drained 1 "the consumer to delete every message"
consumer_lines >"$T_DIR/consumer.lines"
say "consumer lines at info or above: $(wc -l <"$T_DIR/consumer.lines")"
sed 's/^/    /' "$T_DIR/consumer.lines"
check_eq "2: info+ lines naming order.cancelled (one per type, not per message)" 1 "$(count_lines 'event_type=order.cancelled')"
check_eq "2: info+ lines naming invoice.paid" 1 "$(count_lines 'event_type=invoice.paid')"
check_eq "2: info+ lines about messages without an EventType" 1 "$(count_lines 'without an EventType')"
check_eq "2: consumer lines at info or above in all (the 3 above)" 3 "$(wc -l <"$T_DIR/consumer.lines")"

# ---- 3: order.cancelled listed too ------------------------------------------------
old_consumer=$(master_child "consumer 1")
sed -i 's/^\([[:space:]]*wait_time = .*\)$/\1\n\tevent_types = {"order.created", "order.cancelled"}/' "$CONF"
grep -q 'event_types = {"order.created", "order.cancelled"}' "$CONF" || die "3: could not edit $CONF"
kill -HUP "$(proc_pid "$OUTBOXD_PIDFILE")"
reloaded() { grep -q 'msg="reload done: generation 2"' "$OUTBOXD_LOG"; }
old_gone() { ! kill -0 "$old_consumer" 2>/dev/null; }
wait_until 15 "reload done: generation 2" reloaded || true
wait_until 15 "the old consumer (pid $old_consumer) to exit" old_gone || true
check "3: the new consumer names both event types at start-up" \
	grep -q 'event types written: order.created, order.cancelled;' "$OUTBOXD_LOG"
listed_id=$(event_row order.cancelled skip-listed-1)
echo "$listed_id" >"$T_DIR/listed.id"
wait_fulfilled 30 "$T_DIR/listed.id" || true
check "3: a listed order.cancelled row became a fulfillment" _all_fulfilled "$T_DIR/listed.id"
wait_until 20 "the queue to be empty" queue_empty || true
scrape "$M.4" || die "scrape failed"
check_eq "3: skipped in all (unchanged)" 11 "$(delta "$M.0" "$M.4" "$S")"
check_eq "3: fulfillment items" 2 "$(fulfilled_ids | wc -l)"
check_queue_drained 1 "the consumer to delete every message"
