#!/usr/bin/env bash
# relay-sqs-outage.sh -- SQS answers HTTP 500 to everything for 30 s while
# orders keep coming (50 POST /orders during the outage), then recovers.
# Asserts: every order that got a 201 is delivered (exactly one DynamoDB
# fulfillment each, nothing else); in the middle of the outage the new rows
# are pending with last_error = the 500 and nothing reached the queue; by
# the database's clock no outage row was sent before the outage ended and
# all were sent within backoff_max + 5 s after it; rows written during the
# outage were retried with backoff
# (attempts >= 2 each, the early ones many times, but no busy loop) and
# none is 'failed'; the queue and the dead-letter queue end empty.
# relay: backoff_base 200 ms, backoff_max 2000 ms, max_attempts 100.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

OUTAGE=${RELAY_OUTAGE_SECONDS:-30}
N=${RELAY_OUTAGE_ORDERS:-50}
BACKOFF_MAX=2000

proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events \
	OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
	relay_conf_write "$T_DIR/outbox.conf" \
	"backoff_base = 200" "backoff_max = $BACKOFF_MAX" "max_attempts = 100" \
	"timeout = 3000"
. "$T_STACK/env"	# the emulator's own endpoint again, for the checks
outboxd_start "$T_DIR/outbox.conf"

# ---- before: the chain works -------------------------------------------------
orders_post_bg "$T_DIR/before" 5 0 before
wait "$ORDERS_BG_PID"
orders_201_ids "$T_DIR/before" >"$T_DIR/before.ids"
check_eq "before the outage: POST /orders answered 201" 5 "$(wc -l <"$T_DIR/before.ids")"
wait_fulfilled 20 "$T_DIR/before.ids" || true
check_eq "before the outage: orders without a fulfillment" 0 \
	"$(LC_ALL=C comm -23 "$T_DIR/before.ids" <(fulfilled_ids) | wc -l)"

# ---- the outage ----------------------------------------------------------------
fwd0=$(fault_ctl | jq .stats.entries_forwarded)
fault_ctl -X POST --data-binary "{\"mode\":\"status\",\"status\":500,\"code\":\"InternalError\",\"message\":\"injected outage\",\"seconds\":$OUTAGE}" >/dev/null
t_out=$(now_ms)
t_out_end=$((t_out + OUTAGE * 1000))	# the proxy's own end is at most this
say "SQS answers 500 to every request for ${OUTAGE}s; posting $N orders meanwhile"
# spread the orders over the outage, ending ~10 s before it does
interval=$(awk -v s="$OUTAGE" -v n="$N" 'BEGIN { printf "%.3f", (s - 10) / n - 0.03 }')
orders_post_bg "$T_DIR/during" "$N" "$interval" during

# the state in the middle of the outage, as a user sees it (fast queries
# only; skipped if the machine was too slow to take it inside the outage)
sleep $((OUTAGE / 2 - 2))
snap_fwd=$(fault_ctl | jq .stats.entries_forwarded)
snap=$(sql "SELECT count(*) FILTER (WHERE status = 'pending') || ' ' ||
	count(*) FILTER (WHERE status = 'failed') || ' ' ||
	count(*) FILTER (WHERE status = 'sent' AND created_at > to_timestamp($t_out / 1000.0)) || ' ' ||
	count(*) FILTER (WHERE status = 'pending' AND attempts > 0 AND last_error LIKE '%500%')
	FROM outbox")
snap_items=$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")
t_snap=$(now_ms)
read -r s_pending s_failed s_sent s_tried <<<"$snap"
if [ "$t_snap" -lt $((t_out_end - 2000)) ]; then
	say "$((t_snap - t_out)) ms into the outage: $s_pending pending ($s_tried tried, last_error HTTP 500), $s_sent sent, $s_failed failed; $snap_items items"
	check "mid-outage: orders written during the outage are pending ($s_pending)" [ "$s_pending" -ge 5 ]
	check_eq "mid-outage: rows of the outage 'sent'" 0 "$s_sent"
	check_eq "mid-outage: rows 'failed'" 0 "$s_failed"
	check "mid-outage: pending rows were tried and record the broker's HTTP 500 ($s_tried of $s_pending)" \
		[ "$s_tried" -ge $((s_pending - 3)) ] && [ "$s_tried" -ge 1 ]
	check_eq "mid-outage: messages that reached the queue since the outage began" 0 $((snap_fwd - fwd0))
	check_eq "mid-outage: fulfillment items (only the 5 from before)" 5 "$snap_items"
else
	say "SKIP the mid-outage checks: the snapshot took until $((t_snap - t_out)) ms (machine too slow)"
fi

wait "$ORDERS_BG_PID"
t_posted=$(now_ms)
say "$N POSTs done $((t_posted - t_out)) ms into the outage: $(orders_codes "$T_DIR/during")"
orders_201_ids "$T_DIR/during" >"$T_DIR/during.ids"
check_eq "during the outage: POST /orders answered 201 (the API does not need SQS)" "$N" "$(wc -l <"$T_DIR/during.ids")"

# ---- recovery ----------------------------------------------------------------
left=$((t_out_end - $(now_ms)))
[ $left -le 0 ] || sleep "$(awk -v ms="$left" 'BEGIN { printf "%.3f", ms / 1000 }')"
say "outage over"
cat "$T_DIR/before.ids" "$T_DIR/during.ids" | LC_ALL=C sort >"$T_DIR/all.ids"
NALL=$(wc -l <"$T_DIR/all.ids")
wait_fulfilled 60 "$T_DIR/all.ids" || true
say "every order fulfilled (seen $(($(now_ms) - t_out_end)) ms after the outage ended)"

# when the outage rows went out, by the database's clock
during_ids="'$(paste -sd, "$T_DIR/during.ids" | sed "s/,/','/g")'"
q="FROM outbox WHERE ordering_key IN ($during_ids)"
first_ms=$(sql "SELECT round(extract(epoch FROM min(sent_at)) * 1000) - $t_out_end $q")
last_ms=$(sql "SELECT round(extract(epoch FROM max(sent_at)) * 1000) - $t_out_end $q")
say "outage rows sent from $first_ms ms to $last_ms ms after the outage's end"
echo "TIMING relay-sqs-outage outage_end_to_last_sent_ms=$last_ms orders=$NALL"
check "no outage row was published during the outage (first sent ${first_ms} ms after its end)" \
	[ "${first_ms:--99999}" -ge -1000 ]
check "every outage row published within backoff_max + 5 s after the outage (last ${last_ms} ms)" \
	[ "${last_ms:-99999}" -le $((BACKOFF_MAX + 5000)) ]
fulfilled_ids >"$T_DIR/fulfilled"
check_eq "orders (201) without a fulfillment" 0 "$(LC_ALL=C comm -23 "$T_DIR/all.ids" "$T_DIR/fulfilled" | wc -l)"
check_eq "fulfillment items (exactly one per order, no strays)" "$NALL" "$(wc -l <"$T_DIR/fulfilled")"
check_eq "distinct fulfillment order ids" "$NALL" "$(LC_ALL=C sort -u "$T_DIR/fulfilled" | wc -l)"
check_eq "outbox rows" "$NALL" "$(sql "SELECT count(*) FROM outbox")"
check_eq "outbox rows 'sent'" "$NALL" "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "outbox rows 'failed'" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"
check_eq "'sent' rows with last_error left over" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND last_error IS NOT NULL")"

# attempts of the rows written during the outage (the order ids the API
# returned); each was tried during the outage and once more after it
say "attempts of the outage rows: $(sql "SELECT 'min ' || min(attempts) || ', avg ' || round(avg(attempts), 1) || ', max ' || max(attempts) $q")"
say "attempts histogram (attempts:rows): $(sql "SELECT string_agg(a || ':' || n, ' ' ORDER BY a) FROM (SELECT attempts a, count(*) n $q GROUP BY 1) h")"
check_eq "outage rows with attempts < 2 (not retried)" 0 "$(sql "SELECT count(*) $q AND attempts < 2")"
# a row written in the first 5 s of the outage waited >= 25 s; with the
# delay capped at 2 s (jitter: 1..2 s) it must have been tried often...
early=$(sql "SELECT coalesce(min(attempts), 0) $q AND created_at < to_timestamp($t_out / 1000.0) + interval '5 s'")
check "rows of the outage's first 5 s retried >= 8 times (min $early)" [ "$early" -ge 8 ]
# ...but not in a busy loop: at most one try per second once at the cap
maxa=$(sql "SELECT max(attempts) $q")
check "no row retried in a busy loop: max attempts $maxa <= $((OUTAGE + 12))" [ "$maxa" -le $((OUTAGE + 12)) ]
check "the proxy failed requests during the outage ($(fault_ctl | jq .stats.faulted_requests))" \
	[ "$(fault_ctl | jq .stats.faulted_requests)" -gt 0 ]

check_queue_drained 20 "the queue to drain"
check "outboxd still running" proc_alive "$OUTBOXD_PIDFILE"
