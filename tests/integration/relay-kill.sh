#!/usr/bin/env bash
# relay-kill.sh -- kill -9 a relay while its SendMessageBatch is in flight.
# The fault proxy holds every SendMessageBatch for 3 s (and then forwards
# it anyway, as a broker that got the request would), relay.workers = 2,
# relay.lease = 8000 ms (twice relay.timeout = 4000 ms, as the
# configuration check asks; webhook.timeout is lowered too, for builds
# whose check compares the lease with it whatever the sink).  While orders keep
# coming, the test waits until the proxy holds a batch whose TCP client is
# a relay process, and SIGKILLs that process.
# Asserts: the rows of that batch are not published again before the lease
# ends, and are 'sent' after it; the master starts a new relay; every order
# that got a 201 has exactly one DynamoDB fulfillment (the killed batch
# reached the queue too, so the consumer saw duplicates and absorbed them);
# nothing 'failed'; the queue ends empty.  10 of the orders are written
# with SQL in one transaction first, so that the batch killed is a full one.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
command -v ss >/dev/null || die "missing dependency: ss (iproute2)"
stack_up

LEASE=8000
DELAY=3000
N=${RELAY_KILL_ORDERS:-40}

proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
FP_PORT=$PROXY_PORT
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events \
	OB_RELAY_WORKERS=2 OB_BATCH_SIZE=10 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
	OB_EXTRA_TOP=$'webhook {\n\ttimeout = 4000\n}' \
	relay_conf_write "$T_DIR/outbox.conf" \
	"lease = $LEASE" "timeout = 4000" "backoff_base = 200" "backoff_max = 2000" \
	"max_attempts = 100"
. "$T_STACK/env"
outboxd_start "$T_DIR/outbox.conf"
relay_pids >"$T_DIR/relays.before"
check_eq "relays running at start" 2 "$(wc -l <"$T_DIR/relays.before")"

fault_ctl -X POST --data-binary "{\"mode\":\"delay\",\"ms\":$DELAY,\"actions\":[\"SendMessageBatch\"]}" >/dev/null
# 10 orders in one transaction (so that a relay claims a full batch), then
# POST /orders keeps coming
sql_orders burst- 10
orders_post_bg "$T_DIR/orders" "$N" 0.15 kill

# find a SendMessageBatch held by the proxy whose client is a relay (the
# largest batch, if several); victim_ids: every batch that relay has in
# flight
victim_pid='' victim_ids='' victim_since=''
find_victim() {
	local st n i port pid sel='[.inflight[] | select(.action == "SendMessageBatch")] | sort_by(-(.ids | length))'
	st=$(fault_ctl) || return 1
	n=$(jq "$sel | length" <<<"$st")
	for ((i = 0; i < n; i++)); do
		port=$(jq -r "$sel | .[$i].peer_port" <<<"$st")
		pid=$(owner_of_port "$port")
		[ -n "$pid" ] || continue
		if [ -z "$victim_pid" ] && awk -v p="$pid" '$2 == p { f = 1 } END { exit !f }' "$T_DIR/relays.before"; then
			victim_pid=$pid
			victim_since=$(jq -r "$sel | .[$i].since" <<<"$st")
		fi
		[ "$pid" = "$victim_pid" ] || continue
		victim_ids=$victim_ids${victim_ids:+,}$(jq -r "$sel | .[$i].ids | join(\",\")" <<<"$st")
	done
	[ -n "$victim_pid" ]
}
wait_until 15 "a relay's SendMessageBatch held by the proxy" find_victim || true
[ -n "$victim_pid" ] || die "no SendMessageBatch of a relay seen in flight"
victim_idx=$(awk -v p="$victim_pid" '$2 == p { print $1 }' "$T_DIR/relays.before")
kill -KILL "$victim_pid"
t_kill=$(now_ms)
nvict=$(tr ',' '\n' <<<"$victim_ids" | grep -c .)
say "killed relay $victim_idx (pid $victim_pid) with SendMessageBatch(es) of outbox ids {$victim_ids} in flight, the largest for $(awk -v k="$t_kill" -v s="$victim_since" 'BEGIN { printf "%d", k - s * 1000 }') ms"
check "the killed batch carried outbox rows ($nvict)" [ "$nvict" -ge 1 ]
check_eq "right after the kill, its rows are still claimed and not sent" "$nvict" \
	"$(sql "SELECT count(*) FROM outbox WHERE id IN ($victim_ids) AND status = 'pending' AND claim IS NOT NULL")"

wait "$ORDERS_BG_PID"
say "POST /orders: $(orders_codes "$T_DIR/orders")"
orders_201_ids "$T_DIR/orders" >"$T_DIR/ids"
check_eq "POST /orders answered 201" "$N" "$(wc -l <"$T_DIR/ids")"
sql "SELECT id FROM orders WHERE customer_id LIKE 'burst-%'" >>"$T_DIR/ids"
LC_ALL=C sort -o "$T_DIR/ids" "$T_DIR/ids"
N=$((N + 10))

victim_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE id IN ($victim_ids) AND status = 'sent'")" = "$nvict" ]; }
wait_until 30 "the killed relay's rows to be sent by another relay" victim_sent || true
check_eq "the killed relay's rows are 'sent' in the end" "$nvict" \
	"$(sql "SELECT count(*) FROM outbox WHERE id IN ($victim_ids) AND status = 'sent'")"
# per killed row: when the proxy saw it first (the killed relay's request,
# just after its claim) and when again (the next relay's request, after
# the lease): the gap must be at least the lease, and not much more
gaps=$(fault_ctl | jq -r --arg v "$victim_ids" '
	[.stats.requests_done[], .inflight[]] as $r
	| [$v | split(",")[] as $id
	   | [$r[] | select((.ids // []) | index($id)) | .since] | sort
	   | if length >= 2 then ((.[1] - .[0]) * 1000 | floor) else -1 end]
	| map(tostring) | join(" ")')
say "killed rows: ms between the dead relay's publish and the next one: $gaps (lease $LEASE ms)"
check_eq "killed rows published again (seen twice by the proxy)" "$nvict" \
	"$(for g in $gaps; do [ "$g" -lt 0 ] || echo "$g"; done | wc -l)"
check_eq "killed rows published again before their lease ended (gap < lease - 300 ms)" 0 \
	"$(for g in $gaps; do [ "$g" -ge $((LEASE - 300)) ] || echo "$g"; done | wc -l)"
check_eq "killed rows published again more than poll_interval + 3 s after the lease" 0 \
	"$(for g in $gaps; do [ "$g" -le $((LEASE + 4000)) ] || echo "$g"; done | wc -l)"

wait_fulfilled 40 "$T_DIR/ids" || true
fulfilled_ids >"$T_DIR/fulfilled"
check_eq "orders (201) without a fulfillment" 0 "$(LC_ALL=C comm -23 "$T_DIR/ids" "$T_DIR/fulfilled" | wc -l)"
check_eq "fulfillment items (exactly one per order)" "$N" "$(wc -l <"$T_DIR/fulfilled")"
check_eq "outbox rows 'sent'" "$N" "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "outbox rows 'failed'" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"

fwd=$(fault_ctl | jq .stats.entries_forwarded)
dups=$(grep -c 'duplicate delivery' "$OUTBOXD_LOG" || true)
say "messages that reached the queue: $fwd for $N orders; consumer log lines 'duplicate delivery': $dups"
check "the killed batch reached the queue as well (duplicates to absorb: $fwd > $N)" [ "$fwd" -ge $((N + nvict)) ]
check "the consumer absorbed duplicates ($dups logged)" [ "$dups" -ge 1 ]

respawned() { [ "$(relay_pids | wc -l)" = 2 ] && ! relay_pids | awk '{ print $2 }' | grep -qx "$victim_pid"; }
wait_until 10 "a new relay $victim_idx" respawned || true
check "the master started a new relay $victim_idx ($(relay_pids | tr '\n' ' '))" respawned
check "the master logged the relay's death" grep -Eq "relay $victim_idx pid=$victim_pid .*(signal|killed|KILL)" "$OUTBOXD_LOG"

check_queue_drained 20 "the queue to drain"
