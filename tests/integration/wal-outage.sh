#!/usr/bin/env bash
# wal-outage.sh -- relay.mode = "wal" under a big transaction and a broker
# outage:
#   1. one transaction of 10,000 outbox rows (100 keys): every row is
#      delivered once and marked sent, and the slot's confirmed position
#      passes the transaction;
#   2. SQS (the fault proxy in front of it) answers 500 to every
#      SendMessageBatch for 30 s while a writer commits a row every 200
#      ms: outboxd_wal_slot_lag_bytes and
#      outboxd_wal_oldest_unacked_seconds rise during the outage, and once
#      SQS is back every row is delivered and both fall to 0.
# Nothing is confirmed early: after the outage the queue holds every row.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
PG_WAL_LEVEL=logical stack_up

proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events \
	OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=0 \
	relay_conf_write "$T_DIR/outbox.conf" 'mode = "wal"' "backoff_base = 200" \
	"backoff_max = 1000" "max_attempts = 1000" "wal_lag_warning = 4096"
. "$T_STACK/env"
outboxd_start "$T_DIR/outbox.conf"
metric() { curl -fsS --max-time 5 "$OUTBOXD_URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" -ge "$1" ]; }

# ---- 1. a 10,000-event transaction ----
BIG=10000
t0=$(now_ms)
sql "INSERT INTO outbox (event_type, ordering_key, payload)
     SELECT 'wal.big', 'k-' || (n % 100), jsonb_build_object('n', n) FROM generate_series(1, $BIG) n" >/dev/null
lsn_big=$(sql "SELECT pg_current_wal_lsn()")
wait_until 120 "the $BIG rows sent" sent "$BIG" || true
say "$BIG rows of one transaction sent in $(($(now_ms) - t0)) ms"
check_eq "rows of the big transaction sent" "$BIG" "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
past() { [ "$(sql "SELECT confirmed_flush_lsn >= '$lsn_big' FROM pg_replication_slots WHERE slot_name = 'outboxd'")" = t ]; }
wait_until 10 "the slot confirmed past the transaction" past || true
check "the slot's confirmed position passes the big transaction ($lsn_big)" past
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --count "$BIG" --idle 5 >"$T_DIR/big.tsv" || true
cut -f4- "$T_DIR/big.tsv" | jq -r .n | sort -n >"$T_DIR/big"
check "every row of it received once" cmp -s <(seq 1 "$BIG") "$T_DIR/big"

# ---- 2. SQS answers 500 for 30 s ----
OUTAGE=30
fault_ctl -X POST --data-binary "{\"mode\":\"status\",\"status\":500,\"code\":\"InternalError\",\"seconds\":$OUTAGE,\"actions\":[\"SendMessageBatch\"]}" >/dev/null
t_out=$(now_ms)
{
	for i in $(seq 1 $(((OUTAGE + 5) * 5))); do
		printf "INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('wal.outage', 'o-%d', '{\"n\": %d}');\nSELECT pg_sleep(0.2);\n" $((i % 7)) "$i"
	done
} >"$T_DIR/writer.sql"
psql -X -v ON_ERROR_STOP=1 -qAt -f "$T_DIR/writer.sql" >/dev/null 2>&1 &
WRITER=$!
max_lag=0 max_age=0 samples="" sent_during=0
while [ $(($(now_ms) - t_out)) -lt $((OUTAGE * 1000 - 3000)) ]; do
	# rows sent so far, well inside the outage
	sent_during=$(sql "SELECT count(*) FROM outbox WHERE event_type = 'wal.outage' AND status = 'sent'")
	lag=$(metric outboxd_wal_slot_lag_bytes || echo 0)
	age=$(metric outboxd_wal_oldest_unacked_seconds || echo 0)
	samples="$samples ${lag:-?}"
	[ "${lag:-0}" -le "$max_lag" ] || max_lag=$lag
	max_age=$(awk -v a="${age:-0}" -v m="$max_age" 'BEGIN { print (a > m) ? a : m }')
	sleep 2
done
say "slot lag during the outage (bytes, every 2 s):$samples; oldest unacknowledged up to ${max_age} s"
check "the slot lag rose during the outage (max $max_lag bytes)" [ "$max_lag" -gt 4096 ]
check "the oldest unacknowledged event aged during the outage (max ${max_age} s)" \
	awk -v a="$max_age" 'BEGIN { exit !(a >= 20) }'
check_eq "nothing marked sent during the outage (up to $((OUTAGE - 3)) s into it)" 0 "$sent_during"
check "the lag warning was logged" grep -q 'slot outboxd is [0-9]* bytes behind the server.s WAL (relay.wal_lag_warning 4096)' "$OUTBOXD_LOG"
wait "$WRITER"
NOUT=$(sql "SELECT count(*) FROM outbox WHERE event_type = 'wal.outage'")
wait_until 40 "every row sent after the outage" sent $((BIG + NOUT)) || true
check_eq "rows written during the outage: sent once SQS is back" "$NOUT" "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'wal.outage' AND status = 'sent'")"
lag0() { [ "$(metric outboxd_wal_slot_lag_bytes)" = 0 ] && [ "$(metric outboxd_wal_oldest_unacked_seconds)" = 0.000 ]; }
wait_until 15 "the lag metrics back to 0" lag0 || true
check "outboxd_wal_slot_lag_bytes and outboxd_wal_oldest_unacked_seconds back to 0 ($(metric outboxd_wal_slot_lag_bytes), $(metric outboxd_wal_oldest_unacked_seconds))" lag0
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --idle 5 >"$T_DIR/out.tsv" || true
cut -f4- "$T_DIR/out.tsv" | jq -r .n | sort -n >"$T_DIR/out"
check "every row of the outage received" cmp -s <(seq 1 "$NOUT") <(sort -nu "$T_DIR/out")
say "duplicates received after the outage: $(($(wc -l <"$T_DIR/out") - $(sort -nu "$T_DIR/out" | wc -l)))"
