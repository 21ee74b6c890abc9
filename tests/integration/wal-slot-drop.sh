#!/usr/bin/env bash
# wal-slot-drop.sh -- relay.mode = "wal" loses nothing around its slot:
#   1. table -> wal: 50 rows pending before the slot existed (written with
#      no relay running) are published by the catch-up when wal mode
#      first starts and creates the slot;
#   2. the slot dropped by hand while outboxd streams it (its walsender
#      terminated, then pg_drop_replication_slot()), with rows written
#      while it is gone and after: the relay reports it loudly, creates it
#      again, and every row is delivered, the gap's by the catch-up;
#   3. wal -> table: rows left pending when wal mode stops are claimed by
#      the table path.
# Each row's id is in its payload; the default queue is read to the end
# and every id must be there; duplicates are counted and reported.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
PG_WAL_LEVEL=logical stack_up

OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=0 OB_EXTRA_RELAY='mode = "wal"' outbox_conf_write "$T_DIR/outbox.conf"
insert_rows() {	# FROM TO: rows whose payload carries n
	sql "INSERT INTO outbox (event_type, ordering_key, payload)
	     SELECT 'wal.drop', 'k-' || (n % 5), jsonb_build_object('n', n) FROM generate_series($1, $2) n" >/dev/null
}

# ---- 1. rows pending before the slot ----
insert_rows 1 50
outboxd_start "$T_DIR/outbox.conf"
caught() { grep -q 'catch-up: 50 row(s) were pending before slot outboxd existed' "$OUTBOXD_LOG"; }
wait_until 10 "the catch-up to mark the 50 rows" caught || true
check "the slot's creation marked the 50 rows pending before it for the catch-up" caught
sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" -ge "$1" ]; }
wait_until 20 "the 50 rows sent" sent 50 || true
check_eq "rows pending before the slot: sent" 50 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND claim IS NULL")"
insert_rows 51 100
wait_until 20 "rows 51-100 sent (streamed)" sent 100 || true
check_eq "rows written after the slot: sent" 100 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"

# ---- 2. the slot dropped behind outboxd's back ----
dropped=0
for try in 1 2 3 4 5; do
	sql "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'outboxd' AND active" >/dev/null
	for i in $(seq 1 40); do
		if sql "SELECT pg_drop_replication_slot('outboxd')" >/dev/null 2>&1; then
			dropped=1
			break
		fi
		sleep 0.05
	done
	[ "$dropped" = 1 ] && break
done
check_eq "the slot dropped by hand while outboxd runs" 1 "$dropped"
insert_rows 101 150		# while it is gone
gone() { grep -q 'replication slot outboxd is gone (dropped behind outboxd.s back?): creating it again' "$OUTBOXD_LOG"; }
wait_until 10 "the relay to report the slot gone" gone || true
check "reported loudly (level=error) and created again" grep -q 'level=error.*replication slot outboxd is gone' "$OUTBOXD_LOG"
back() { [ "$(sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'outboxd' AND active")" = 1 ]; }
wait_until 10 "the slot back and streamed" back || true
check "the slot exists again and is streamed" back
insert_rows 151 200		# after
wait_until 30 "all 200 rows sent" sent 200 || true
check "the rows written while the slot was gone were marked for the catch-up when it was made again" \
	[ "$(grep -c 'were pending before slot outboxd existed' "$OUTBOXD_LOG")" -ge 2 ]
check_eq "rows sent after the drop (the gap's by the catch-up)" 200 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"

# ---- 3. wal -> table ----
outboxd_stop
insert_rows 201 230		# pending, with no slot reader
sed -i 's/mode = "wal"/mode = "table"/' "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"
wait_until 20 "the table path to send rows 201-230" sent 230 || true
check_eq "wal -> table: rows left pending are claimed by the table path" 230 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
outboxd_stop

"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --idle 5 >"$T_DIR/got.tsv" || true
cut -f4- "$T_DIR/got.tsv" | jq -r .n | sort -n >"$T_DIR/got"
check_eq "distinct rows received on the queue" 230 "$(sort -nu "$T_DIR/got" | wc -l)"
check "  ... every id 1-230" cmp -s <(seq 1 230) <(sort -nu "$T_DIR/got")
dups=$(($(wc -l <"$T_DIR/got") - $(sort -nu "$T_DIR/got" | wc -l)))
say "duplicates received: $dups"
check "duplicates bounded by what was in flight at the drop (at most 50): $dups" [ "$dups" -le 50 ]
sql "SELECT pg_drop_replication_slot('outboxd')" >/dev/null 2>&1 || true
