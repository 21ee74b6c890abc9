#!/usr/bin/env bash
# wal-kill.sh -- relay.mode = "wal": kill -9 the relay streaming the slot
# while its SendMessageBatch is held by the fault proxy (every batch is
# held 3 s, then forwarded anyway, as a broker that got the request
# would).  relay.workers = 2: one streams, one stands by.  While orders
# keep coming the test SIGKILLs the streaming relay once the proxy holds
# one of its batches.
# Asserts: the standby streams within a few seconds of the kill (the
# master's new relay then stands by); every order that got a 201 has
# exactly one fulfillment and its row is 'sent'; nothing 'failed'; the
# only rows the proxy saw twice are those of the batches in flight at
# the kill or answered just before it (acknowledged, not yet confirmed);
# the queue ends empty.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
command -v ss >/dev/null || die "missing dependency: ss (iproute2)"
PG_WAL_LEVEL=logical stack_up

DELAY=3000
N=${WAL_KILL_ORDERS:-40}

proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
FP_PORT=$PROXY_PORT
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events \
	OB_RELAY_WORKERS=2 OB_BATCH_SIZE=10 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
	relay_conf_write "$T_DIR/outbox.conf" 'mode = "wal"' "timeout = 8000" \
	"backoff_base = 200" "backoff_max = 2000" "max_attempts = 100"
. "$T_STACK/env"
outboxd_start "$T_DIR/outbox.conf"
streamers() { grep -c 'msg="streaming slot outboxd' "$OUTBOXD_LOG" || true; }
wait_until 10 "a relay streaming" test "$(streamers)" -ge 1 || true
relay_pids >"$T_DIR/relays.before"
check_eq "relays running at start" 2 "$(wc -l <"$T_DIR/relays.before")"
reader=$(grep 'msg="streaming slot outboxd' "$OUTBOXD_LOG" | head -1 | grep -o 'pid=[0-9]*' | cut -d= -f2)
check "one relay streams ($reader), the other stands by" grep -q 'standing by' "$OUTBOXD_LOG"

fault_ctl -X POST --data-binary "{\"mode\":\"delay\",\"ms\":$DELAY,\"actions\":[\"SendMessageBatch\"]}" >/dev/null
sql_orders burst- 10
orders_post_bg "$T_DIR/orders" "$N" 0.15 kill

# a SendMessageBatch of the reader held by the proxy; victim_ids: every
# batch it has there
victim_ids=''
find_victim() {
	local st n i port sel='[.inflight[] | select(.action == "SendMessageBatch")]'
	st=$(fault_ctl) || return 1
	n=$(jq "$sel | length" <<<"$st")
	victim_ids=
	for ((i = 0; i < n; i++)); do
		port=$(jq -r "$sel | .[$i].peer_port" <<<"$st")
		[ "$(owner_of_port "$port")" = "$reader" ] || continue
		victim_ids=$victim_ids${victim_ids:+,}$(jq -r "$sel | .[$i].ids | join(\",\")" <<<"$st")
	done
	[ -n "$victim_ids" ]
}
wait_until 15 "a SendMessageBatch of the reader held by the proxy" find_victim || true
[ -n "$victim_ids" ] || die "no SendMessageBatch of the reader seen in flight"
# The master is stopped over the kill, so that it cannot start a new relay
# that takes the slot first: the standby must.
standby_pid=$(awk -v p="$reader" '$2 != p { print $2 }' "$T_DIR/relays.before")
master=$(proc_pid "$OUTBOXD_PIDFILE")
kill -STOP "$master"
on_exit "kill -CONT $master 2>/dev/null"
kill -KILL "$reader"
t_kill=$(now_ms)
nvict=$(tr ',' '\n' <<<"$victim_ids" | grep -c .)
say "killed the reader (pid $reader) with outbox ids {$victim_ids} held by the proxy"
check_eq "right after the kill, the held rows are still pending" "$nvict" \
	"$(sql "SELECT count(*) FROM outbox WHERE id IN ($victim_ids) AND status = 'pending'")"

taken_over() { [ "$(streamers)" -ge 2 ]; }
wait_until 10 "another relay streaming" taken_over || true
check "another relay streams the slot" taken_over
t_over=$(grep 'msg="streaming slot outboxd' "$OUTBOXD_LOG" | sed -n 2p | sed 's/^time=\([^ ]*\).*/\1/' || true)
over_ms=$(( $(date -d "${t_over:-2100-01-01}" +%s%3N) - t_kill ))
say "takeover $over_ms ms after the kill"
check "  ... within 5 s of the kill ($over_ms ms)" [ "$over_ms" -le 5000 ]
new_reader=$(grep 'msg="streaming slot outboxd' "$OUTBOXD_LOG" | sed -n 2p | grep -o 'pid=[0-9]*' | cut -d= -f2 || true)
check_eq "  ... the standby ($standby_pid)" "$standby_pid" "$new_reader"
check_eq "  ... one reader active" 1 \
	"$(sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'outboxd' AND active")"
kill -CONT "$master"
wait_until 10 "the master to start a relay in place of the killed one" \
	test "$(relay_pids | wc -l)" -eq 2 || true
check_eq "relays running after the master's restart of the killed one" 2 "$(relay_pids | wc -l)"
check_eq "outboxd_wal_streaming counts the new reader, not the killed one" 1 \
	"$(curl -fsS --max-time 5 "$OUTBOXD_URL/metrics" | awk '$1 == "outboxd_wal_streaming" { print $2 }')"

wait "$ORDERS_BG_PID"
say "POST /orders: $(orders_codes "$T_DIR/orders")"
orders_201_ids "$T_DIR/orders" >"$T_DIR/ids"
check_eq "POST /orders answered 201" "$N" "$(wc -l <"$T_DIR/ids")"
sql "SELECT id FROM orders WHERE customer_id LIKE 'burst-%'" >>"$T_DIR/ids"
LC_ALL=C sort -o "$T_DIR/ids" "$T_DIR/ids"
N=$((N + 10))
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" = "$N" ]; }
wait_until 40 "every outbox row sent" all_sent || true
check_eq "outbox rows 'sent'" "$N" "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "outbox rows 'failed'" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"
wait_fulfilled 40 "$T_DIR/ids" || true
fulfilled_ids >"$T_DIR/fulfilled"
check_eq "orders (201) without a fulfillment" 0 "$(LC_ALL=C comm -23 "$T_DIR/ids" "$T_DIR/fulfilled" | wc -l)"
check_eq "fulfillment items (exactly one per order)" "$N" "$(wc -l <"$T_DIR/fulfilled")"

# What the proxy saw: rows published twice must be the held ones, or ones
# whose first publish was answered less than 1 s before the kill.
fault_ctl | jq -r --argjson k "$t_kill" --arg v "$victim_ids" '
	[.stats.requests_done[], .inflight[]] | map(select(.action == "SendMessageBatch"))
	| [.[] | . as $r | ($r.ids // [])[] | {id: ., since: $r.since, done: ($r.done // 1e12)}]
	| group_by(.id) | map(select(length > 1) | sort_by(.since) | .[0])
	| map(select(((.id | tostring) as $i | ($v | split(",")) | index($i)) == null
		and (.done * 1000) < ($k - 1000)) | .id) | join(" ")' >"$T_DIR/bad_dups"
dups=$(fault_ctl | jq '[.stats.requests_done[], .inflight[]] | map(select(.action == "SendMessageBatch")) | [.[].ids[]?] | group_by(.) | map(select(length > 1)) | length')
say "rows the proxy saw more than once: $dups (held at the kill: $nvict)"
check_eq "rows published twice that were neither held at the kill nor answered just before it" "" "$(cat "$T_DIR/bad_dups")"
check_queue_drained 30 "consumers to delete every message"
