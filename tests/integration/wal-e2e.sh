#!/usr/bin/env bash
# wal-e2e.sh -- relay.mode = "wal" end to end, on a cluster started with
# wal_level = logical: the slot and publication are created on the first
# start; of the two relays exactly one streams and the other stands by;
# 200 orders through POST /orders are each fulfilled once and their
# outbox rows all marked sent, none handed over by the HTTP workers; 200 table-less events written with
# pg_logical_emit_message() in 20 transactions reach their destination's
# SQS queue once each with exactly the payload text written (key order
# kept per ordering key); a message with bad JSON is logged, counted and
# skipped; the slot's confirmed position catches up with the server's
# WAL.  Then a second server with wal_level = replica: outboxd -t and
# the start refuse it, saying what to change.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
PG_WAL_LEVEL=logical stack_up

EVENTS_URL=$(aws_call sqs "$SQS_ENDPOINT" CreateQueue '{"QueueName":"wal-events"}' | jq -er .QueueUrl) ||
	die "CreateQueue wal-events failed"
OB_RELAY_WORKERS=2 OB_EXTRA_RELAY='mode = "wal"' outbox_conf_write "$T_DIR/outbox.conf"
cat >>"$T_DIR/outbox.conf" <<CONF

destination events {
	sink = "sqs"
	queue_url = "$EVENTS_URL"
}
CONF
out=$("$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" 2>&1) && rc=0 || rc=$?
check_eq "outboxd -t accepts wal mode on a wal_level = logical server" 0 "$rc"
outboxd_start "$T_DIR/outbox.conf"

streams() { grep -c 'msg="streaming slot outboxd' "$OUTBOXD_LOG" || true; }
standby() { grep -q 'standing by' "$OUTBOXD_LOG"; }
wait_until 10 "a relay streaming the slot" test "$(streams)" -ge 1 || true
wait_until 10 "the other relay standing by" standby || true
check_eq "relays streaming the slot" 1 "$(streams)"
check "the other relay stands by" standby
check_eq "slot outboxd exists, logical, pgoutput, active" "logical|pgoutput|true" \
	"$(sql "SELECT slot_type || '|' || plugin || '|' || active FROM pg_replication_slots WHERE slot_name = 'outboxd'")"
check_eq "publication outboxd: the outbox's inserts only" "outbox|true|false|false" \
	"$(sql "SELECT t.tablename || '|' || p.pubinsert || '|' || p.pubupdate || '|' || p.pubdelete FROM pg_publication p JOIN pg_publication_tables t USING (pubname) WHERE pubname = 'outboxd'")"

# ---- 200 orders ----
N=200
mkdir -p "$T_DIR/orders"
post_one() {
	curl -sS -o /dev/null -w '%{http_code}\n' --max-time 30 -H 'Content-Type: application/json' \
		--data-binary "{\"customerId\":\"wal-$1\",\"amountCents\":$((1000 + $1))}" \
		"$OUTBOXD_URL/orders" >"$T_DIR/orders/$1.code" 2>/dev/null || echo 000 >"$T_DIR/orders/$1.code"
}
export -f post_one
export T_DIR OUTBOXD_URL
t0=$(now_ms)
seq 1 "$N" | xargs -P 8 -n 1 bash -c 'post_one "$1"' _
check_eq "POST /orders answered 201" "$N" "$(cat "$T_DIR"/orders/*.code | grep -c '^201$' || true)"
items_done() { [ "$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")" -ge "$N" ]; }
wait_until 60 "$N fulfillment items" items_done || true
items_done || say "orders without a fulfillment item: $(ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" | jq -r '.[].orderId.S' | sort >"$T_DIR/have"; sql "SELECT id FROM orders ORDER BY 1" | sort | comm -23 - "$T_DIR/have" | tr '\n' ' ')"
say "first POST -> last fulfillment: $(($(now_ms) - t0)) ms"
rows_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" = "$N" ]; }
wait_until 20 "every outbox row marked sent" rows_sent || true
rows_sent || say "rows not sent: $(sql "SELECT string_agg(id || ' ' || status || ' attempts ' || attempts || ' claim ' || coalesce(claim::text, '-') || ' created ' || created_at || ' xmin ' || xmin, '; ') FROM outbox WHERE status <> 'sent'")"
check_eq "outbox rows 'sent' (marked in bulk from the WAL path)" "$N" "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND sent_at IS NOT NULL AND attempts = 1 AND claim IS NULL")"
ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" >"$T_DIR/items.json"
check_eq "fulfillment items, one per order" "$N" "$(jq '[.[].orderId.S] | unique | length' "$T_DIR/items.json")"
sql "SELECT id || E'\t' || customer_id || E'\t' || amount_cents FROM orders ORDER BY 1" >"$T_DIR/orders.tsv"
jq -r '.[] | [.orderId.S, .customerId.S, .amountCents.N] | @tsv' "$T_DIR/items.json" | LC_ALL=C sort >"$T_DIR/items.tsv"
check "every item matches its order" cmp -s "$T_DIR/orders.tsv" "$T_DIR/items.tsv"
check_queue_drained 20 "consumers to delete every message"
metric() { curl -fsS --max-time 5 "$OUTBOXD_URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
check_eq "no order handed over to relay 1 (the HTTP workers skip the handoff in wal mode)" 0 \
	"$(metric outboxd_handoff_rows_total)"
check_eq "  ... and none written claimed" 0 "$(sql "SELECT count(*) FROM outbox WHERE first_claimed_at IS NOT NULL")"

# ---- 200 table-less events ----
# Payload texts as written, byte for byte (a number with a trailing zero,
# escapes, non-ASCII), 10 keys, 20 transactions of 10 events.
M=200
"$PY" - "$T_DIR" "$M" <<'PYEOF'
import json, sys
d, m = sys.argv[1], int(sys.argv[2])
with open(d + "/emit.sql", "w") as sql, open(d + "/expected", "w") as exp:
    for t in range(m // 10):
        sql.write("BEGIN;\n")
        for j in range(10):
            i = t * 10 + j
            payload = '{"seq": %d, "price": 1.50, "note": "caf\\u00e9 \u2713 \\"q\\"", "k": "key-%d"}' % (i, i % 10)
            ev = '{"destination": "events", "event_type": "wal.test", "ordering_key": "key-%d", ' \
                 '"headers": {"Tenant": "t-%d"}, "payload": %s}' % (i % 10, i % 3, payload)
            sql.write("SELECT pg_logical_emit_message(true, 'outbox', %s);\n" % ("'" + ev.replace("'", "''") + "'"))
            exp.write(payload + "\n")
        sql.write("COMMIT;\n")
PYEOF
psql -X -v ON_ERROR_STOP=1 -qAt -f "$T_DIR/emit.sql" >/dev/null || fail "emitting the events failed"
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$EVENTS_URL" --count "$M" --idle 10 \
	>"$T_DIR/events.tsv" || true
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$EVENTS_URL" --idle 3 \
	>>"$T_DIR/events.tsv" || true
cut -f4- "$T_DIR/events.tsv" >"$T_DIR/bodies"
check_eq "table-less events received" "$M" "$(wc -l <"$T_DIR/bodies")"
check "  ... each once, with exactly the payload text written" \
	cmp -s <(LC_ALL=C sort "$T_DIR/expected") <(LC_ALL=C sort "$T_DIR/bodies")
# per key, in the order written (a standard queue may reorder what is in
# flight at once; a key has one event at the sink at a time)
bad_order=$(jq -rs 'group_by(.k) | map(map(.seq) as $s | select($s != ($s | sort))) | length' "$T_DIR/bodies")
check_eq "keys whose events arrived out of commit order" 0 "$bad_order"
check_eq "no outbox row written for table-less events" "$N" "$(sql 'SELECT count(*) FROM outbox')"

# ---- a bad message is skipped, logged and counted ----
sql "SELECT pg_logical_emit_message(true, 'outbox', '{\"event_type\": \"wal.test\", \"payload\": 1')" >/dev/null
sql "SELECT pg_logical_emit_message(true, 'other-prefix', 'not ours')" >/dev/null
bad_logged() { grep -q 'message with prefix \\"outbox\\" at .*not valid JSON.*skipped' "$OUTBOXD_LOG"; }
wait_until 10 "the bad message logged" bad_logged || true
check "a message with bad JSON: logged with its LSN and the reason" bad_logged
check_eq "outboxd_wal_bad_messages_total" 1 "$(metric outboxd_wal_bad_messages_total)"
check_eq "outboxd_wal_streaming" 1 "$(metric outboxd_wal_streaming)"
sql "SELECT pg_logical_emit_message(true, 'outbox', '{\"destination\": \"events\", \"event_type\": \"wal.after\", \"ordering_key\": \"z\", \"payload\": \"after\"}')" >/dev/null
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$EVENTS_URL" --count 1 --idle 10 \
	>"$T_DIR/after.tsv" || true
check_eq "the next event after the bad one is published" '"after"' "$(cut -f4- "$T_DIR/after.tsv")"

# ---- the slot's confirmed position catches up ----
lsn_now=$(sql "SELECT pg_current_wal_lsn()")
caught_up() { [ "$(sql "SELECT confirmed_flush_lsn >= '$lsn_now' FROM pg_replication_slots WHERE slot_name = 'outboxd'")" = t ]; }
wait_until 15 "confirmed_flush_lsn past $lsn_now" caught_up || true
check "the slot's confirmed_flush_lsn reaches the WAL position after the last event ($lsn_now)" caught_up

lag0() { [ "$(metric outboxd_wal_slot_lag_bytes)" = 0 ] && [ "$(metric outboxd_wal_oldest_unacked_seconds)" = 0.000 ]; }
wait_until 10 "the slot lag metric at 0" lag0 || true
check "outboxd_wal_slot_lag_bytes and outboxd_wal_oldest_unacked_seconds at 0 once caught up ($(metric outboxd_wal_slot_lag_bytes), $(metric outboxd_wal_oldest_unacked_seconds))" lag0
out=$("$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" wal-drop 2>&1) && rc=0 || rc=$?
check_eq "outboxctl wal-drop while a relay streams the slot: refused (exit status)" 1 "$rc"
check "  ... saying why" grep -q 'slot outboxd is being streamed' <<<"$out"

outboxd_stop
check_eq "the slot survives outboxd's stop (never dropped implicitly)" 1 "$(sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'outboxd'")"

out=$("$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" wal-drop 2>&1) && rc=0 || rc=$?
check_eq "outboxctl wal-drop with outboxd stopped: exit status" 0 "$rc"
check "  ... says what it dropped" grep -q 'dropped replication slot outboxd' <<<"$out"
check_eq "  ... slot and publication gone" "0 0" "$(sql "SELECT count(*) FROM pg_replication_slots") $(sql "SELECT count(*) FROM pg_publication")"
out=$("$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" wal-drop 2>&1) && rc=0 || rc=$?
check_eq "outboxctl wal-drop again: nothing to drop (exit status)" 1 "$rc"

# ---- a role without REPLICATION, and no free slot ----
sql "CREATE ROLE walnorep LOGIN" >/dev/null
sed "s|^database = .*|database = \"postgresql://walnorep@127.0.0.1:$PGPORT/outboxd\"|" "$T_DIR/outbox.conf" >"$T_DIR/norep.conf"
out=$("$T_ROOT/outboxd" -t -c "$T_DIR/norep.conf" 2>&1) && rc=0 || rc=$?
check_eq "outboxd -t with a role without REPLICATION: exit status" 78 "$rc"
check "  ... says what to change" grep -q 'needs the REPLICATION attribute, which role "walnorep" lacks: ALTER ROLE "walnorep" REPLICATION' <<<"$out"
max=$(sql "SHOW max_replication_slots")
for i in $(seq 1 "$max"); do sql "SELECT pg_create_logical_replication_slot('fill_$i', 'pgoutput')" >/dev/null; done
out=$("$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" 2>&1) && rc=0 || rc=$?
check_eq "outboxd -t with every replication slot taken: exit status" 78 "$rc"
check "  ... says what to change" grep -q "needs a free replication slot for \"outboxd\", and $max of $max are in use: raise max_replication_slots" <<<"$out"
for i in $(seq 1 "$max"); do sql "SELECT pg_drop_replication_slot('fill_$i')" >/dev/null; done

# ---- a server with wal_level = replica ----
port2=$("$T_LIB/free-port" 1)
"$T_LIB/pg-up.sh" "$T_DIR/pg2" "$port2" >/dev/null || die "second server did not start"
on_exit "'$T_LIB/pg-down.sh' '$T_DIR/pg2' >/dev/null 2>&1"
PGPORT=$port2 PGDATABASE=postgres psql -X -q -v ON_ERROR_STOP=1 -f "$T_ROOT/sql/schema.sql" >/dev/null 2>&1 ||
	die "schema on the second server failed"
sed "s|^database = .*|database = \"postgresql://postgres@127.0.0.1:$port2/postgres\"|" "$T_DIR/outbox.conf" >"$T_DIR/replica.conf"
out=$("$T_ROOT/outboxd" -t -c "$T_DIR/replica.conf" 2>&1) && rc=0 || rc=$?
check_eq "outboxd -t on a wal_level = replica server: exit status" 78 "$rc"
check "  ... says what to change" grep -q 'needs wal_level = logical, and the server has wal_level = replica: set it (ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL' <<<"$out"
out=$(timeout 20 "$T_ROOT/outboxd" -c "$T_DIR/replica.conf" 2>&1) && rc=0 || rc=$?
check_eq "outboxd on it: refuses to start (exit status)" 78 "$rc"
check "  ... with the same message" grep -q 'needs wal_level = logical' <<<"$out"
check_eq "  ... and no slot was made there" 0 "$(PGPORT=$port2 PGDATABASE=postgres sql 'SELECT count(*) FROM pg_replication_slots')"
