#!/usr/bin/env bash
# relay-dead-letter.sh -- poison rows become dead letters without holding
# anything else back, and are delivered after a redrive.
# relay: batch_size = 5, max_attempts = 3, backoff 200..1000 ms.  The fault
# proxy fails, entry by entry, every SendMessageBatch entry whose body
# carries a poison customer id:
#   A) 5 orders "dlq-retry-*": Failed with SenderFault false (SQS's per-entry
#      server error, retried) -> 'failed' after exactly 3 attempts;
#   B) 5 orders "dlq-reject-*": Failed with SenderFault true (can never
#      succeed) -> 'failed' at once, after 1 attempt.
# Each group is written in one transaction and followed by a good order
# (POST /orders) with its own ordering key.
# Asserts: each good order is published promptly (outbox created_at ->
# sent_at < 2 s) and fulfilled;
# the poison rows end 'failed' with the expected attempts and last_error
# and no fulfillment; a later row with a failed row's ordering key stays
# pending (the key is held, nothing else is); after the proxy is fixed and
# the failed rows are redriven (outboxctl redrive when it exists, else the
# documented UPDATE) all 10 and the held row are delivered, the held row
# after its key's head.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

MAX_ATTEMPTS=3
PROMPT_MS=${RELAY_DLQ_PROMPT_MS:-2000}

proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events \
	OB_RELAY_WORKERS=2 OB_BATCH_SIZE=5 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
	relay_conf_write "$T_DIR/outbox.conf" \
	"max_attempts = $MAX_ATTEMPTS" "backoff_base = 200" "backoff_max = 1000"
. "$T_STACK/env"
outboxd_start "$T_DIR/outbox.conf"

fault_ctl -X POST --data-binary '{"mode":"fail-entries","rules":[
	{"match":"dlq-retry-","sender_fault":false,"code":"InternalError","message":"injected per-entry server error"},
	{"match":"dlq-reject-","sender_fault":true,"code":"InvalidParameterValue","message":"injected sender fault"}]}' >/dev/null

# five poison orders in one transaction (their own ordering keys, the ids)
poison() { sql_orders "$1" 5; }

# good_order TAG -- POST a good order, wait for its fulfillment; GOOD_ID,
# GOOD_MS = its outbox row's created_at -> sent_at (the relay's part, by
# the database's clock), FULFILL_MS = POST -> fulfillment seen
good_order() {
	local t0
	t0=$(now_ms)
	post_order "$1" 4200
	check_eq "POST /orders for the good order $1" 201 "$HTTP_STATUS"
	GOOD_ID=$(jq -r .id <<<"$HTTP_BODY")
	echo "$GOOD_ID" >"$T_DIR/good.id"
	wait_fulfilled 20 "$T_DIR/good.id" || true
	FULFILL_MS=$(($(now_ms) - t0))
	check "$1: the good order has a fulfillment ($FULFILL_MS ms after its POST)" _all_fulfilled "$T_DIR/good.id"
	GOOD_MS=$(sql "SELECT coalesce(round(1000 * extract(epoch FROM sent_at - created_at)), 99999) FROM outbox WHERE ordering_key = '$GOOD_ID'")
	say "$1: outbox row created -> sent $GOOD_MS ms, attempts $(sql "SELECT attempts FROM outbox WHERE ordering_key = '$GOOD_ID'")"
}

dead() { [ "$(sql "SELECT count(*) FROM outbox o JOIN orders r ON r.id::text = o.ordering_key WHERE r.customer_id LIKE '$1%' AND o.status = 'failed'")" = 5 ]; }
rows_of() { echo "FROM outbox o JOIN orders r ON r.id::text = o.ordering_key WHERE r.customer_id LIKE '$1%'"; }

# ---- A: per-entry server errors, retried until max_attempts ------------------
poison dlq-retry-
good_order good-a
check "A: the good order behind 5 retrying poison rows is published promptly ($GOOD_MS ms <= $PROMPT_MS)" \
	[ "$GOOD_MS" -le "$PROMPT_MS" ]
wait_until 20 "the 5 dlq-retry rows to be failed" dead dlq-retry- || true
say "A: poison rows: $(sql "SELECT string_agg(o.id || ':' || o.status || '/' || o.attempts, ' ' ORDER BY o.id) $(rows_of dlq-retry-)")"
check_eq "A: poison rows 'failed'" 5 "$(sql "SELECT count(*) $(rows_of dlq-retry-) AND o.status = 'failed'")"
check_eq "A: poison rows with attempts = max_attempts ($MAX_ATTEMPTS)" 5 \
	"$(sql "SELECT count(*) $(rows_of dlq-retry-) AND o.attempts = $MAX_ATTEMPTS")"
check_eq "A: poison rows whose last_error names the broker's error" 5 \
	"$(sql "SELECT count(*) $(rows_of dlq-retry-) AND o.last_error LIKE '%InternalError%'")"
say "A: last_error: $(sql "SELECT o.last_error $(rows_of dlq-retry-) LIMIT 1")"
inj=$(fault_ctl | jq '[.stats.injected[] | select(.MessageBody | contains("dlq-retry-"))] | length')
check_eq "A: publishes of the poison rows (5 rows x $MAX_ATTEMPTS attempts)" $((5 * MAX_ATTEMPTS)) "$inj"

# ---- B: sender faults, failed at once -----------------------------------------
poison dlq-reject-
good_order good-b
check "B: the good order behind 5 rejected poison rows is published promptly ($GOOD_MS ms <= $PROMPT_MS)" \
	[ "$GOOD_MS" -le "$PROMPT_MS" ]
wait_until 20 "the 5 dlq-reject rows to be failed" dead dlq-reject- || true
say "B: poison rows: $(sql "SELECT string_agg(o.id || ':' || o.status || '/' || o.attempts, ' ' ORDER BY o.id) $(rows_of dlq-reject-)")"
check_eq "B: rejected rows 'failed'" 5 "$(sql "SELECT count(*) $(rows_of dlq-reject-) AND o.status = 'failed'")"
check_eq "B: rejected rows failed after exactly 1 attempt" 5 "$(sql "SELECT count(*) $(rows_of dlq-reject-) AND o.attempts = 1")"
check_eq "B: rejected rows whose last_error names the broker's error" 5 \
	"$(sql "SELECT count(*) $(rows_of dlq-reject-) AND o.last_error LIKE '%InvalidParameterValue%'")"
say "B: last_error: $(sql "SELECT o.last_error $(rows_of dlq-reject-) LIMIT 1")"
check "the log names the dead letters" grep -q 'failed after' "$OUTBOXD_LOG"

# no poison order was fulfilled
sql "SELECT id FROM orders WHERE customer_id LIKE 'dlq-%' ORDER BY 1" >"$T_DIR/poison.ids"
check_eq "poison orders with a fulfillment" 0 "$(LC_ALL=C comm -12 "$T_DIR/poison.ids" <(fulfilled_ids) | wc -l)"

# ---- a failed head holds its key, and only its key -----------------------------
head_key=$(sql "SELECT o.ordering_key $(rows_of dlq-retry-) ORDER BY o.id LIMIT 1")
held_id=$(psql -X -v ON_ERROR_STOP=1 -qAt -v key="$head_key" <<'SQL'
WITH o AS (INSERT INTO orders (customer_id, amount_cents) VALUES ('held-1', 77)
	RETURNING id, customer_id, amount_cents, created_at),
x AS (INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'order.created', :'key', jsonb_build_object('orderId', o.id,
		'customerId', o.customer_id, 'amountCents', o.amount_cents,
		'createdAt', o.created_at) FROM o)
SELECT id FROM o;
SQL
)
good_order good-c
sleep 1.2	# more than one poll_interval: every relay has looked again
check "C: a good order with its own key is published promptly ($GOOD_MS ms <= $PROMPT_MS)" [ "$GOOD_MS" -le "$PROMPT_MS" ]
check_eq "C: the row behind the failed head of its key is still pending, untried" "pending/0" \
	"$(sql "SELECT status || '/' || attempts FROM outbox o JOIN orders r ON o.payload->>'orderId' = r.id::text WHERE r.customer_id = 'held-1'")"
check_eq "C: ... and its order has no fulfillment" 0 "$(fulfilled_ids | grep -cx "$held_id" || true)"

# ---- fix the destination, redrive ----------------------------------------------
fault_ctl -X POST --data-binary '{"mode":"pass"}' >/dev/null
failed_ids=$(sql "SELECT string_agg(id::text, ' ' ORDER BY id) FROM outbox WHERE status = 'failed'")
if "$T_ROOT/outboxctl" -h 2>&1 | grep -q '^  failed'; then
	"$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" failed --limit 100 >"$T_DIR/failed.txt" 2>&1 || true
	say "outboxctl failed: $(wc -l <"$T_DIR/failed.txt") lines; $(head -2 "$T_DIR/failed.txt" | tr -s ' \t\n' ' ')"
	check_eq "outboxctl failed lists exactly the dead letters (its ID column)" "$failed_ids" \
		"$(awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }' "$T_DIR/failed.txt" | sort -n | paste -sd' ')"
fi
if "$T_ROOT/outboxctl" -h 2>&1 | grep -q redrive; then
	say "redrive with outboxctl: $("$T_ROOT/outboxctl" -h 2>&1 | grep redrive | head -2 | tr -s ' \t' ' ')"
	# shellcheck disable=SC2086
	check "outboxctl redrive $failed_ids" "$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" redrive $failed_ids
else
	say "outboxctl has no redrive command yet: redriving with SQL"
	check_eq "rows redriven with SQL" 10 "$(sql "WITH r AS (UPDATE outbox SET status = 'pending', attempts = 0,
		available_at = now(), last_error = NULL WHERE status = 'failed' RETURNING 1) SELECT count(*) FROM r")"
fi
t_redrive=$(now_ms)
{ cat "$T_DIR/poison.ids"; echo "$held_id"; } | LC_ALL=C sort >"$T_DIR/redriven.ids"
wait_fulfilled 20 "$T_DIR/redriven.ids" || true
say "redriven orders fulfilled $(($(now_ms) - t_redrive)) ms after the redrive"
check_eq "redriven orders (10 poison + the held one) without a fulfillment" 0 \
	"$(LC_ALL=C comm -23 "$T_DIR/redriven.ids" <(fulfilled_ids) | wc -l)"
check_eq "outbox rows 'failed' after the redrive" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
wait_until 10 "every row sent" all_sent || true
check_eq "outbox rows not 'sent' in the end" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
check_eq "the held row was sent after its key's head" t \
	"$(sql "SELECT bool_and(h.sent_at > p.sent_at) FROM outbox h JOIN outbox p ON p.ordering_key = h.ordering_key AND p.id < h.id WHERE h.ordering_key = '$head_key'")"
check_eq "fulfillment items in total (one per order)" "$(sql "SELECT count(*) FROM orders")" "$(fulfilled_ids | wc -l)"
check_eq "dead-letter queue of SQS empty (dead letters stay in the outbox)" 0 \
	"$(sqs_attr "$SQS_ENDPOINT" "$DLQ_URL" ApproximateNumberOfMessages)"
