#!/usr/bin/env bash
# wal-switch.sh -- relay.mode switched table -> wal -> table by a reload
# (SIGHUP) while a writer commits a row every 20 ms (1000 rows, 10 keys):
# every row is delivered and marked sent; the duplicates (rows received
# twice: in flight in one mode while the other took them) are counted,
# reported, and bounded by what can be in flight (200).  The slot created
# at the switch to wal marks the rows pending then for its catch-up.
# Then wal again with the slot kept: the slot streams every insert of the
# table-mode period, and those rows (sent by table mode) are not
# published a second time; a table-less event written meanwhile is
# published once, by wal mode.  Last, a row streamed before its commit is
# visible (a synchronous standby that does not answer) is published once
# and marked sent when the commit shows; and after outboxd and PostgreSQL
# restart, table-less events already published are not published again.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
PG_WAL_LEVEL=logical stack_up

OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=0 OB_POLL_INTERVAL=200 \
	relay_conf_write "$T_DIR/outbox.conf" 'mode = "table"' "backoff_base = 200" "backoff_max = 1000"
outboxd_start "$T_DIR/outbox.conf"
M=$(proc_pid "$OUTBOXD_PIDFILE")
N=1000
{
	for i in $(seq 1 $N); do
		printf "INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('wal.switch', 'k-%d', '{\"n\": %d}');\n" $((i % 10)) "$i"
		[ $((i % 5)) != 0 ] || printf "SELECT pg_sleep(0.1);\n"
	done
} >"$T_DIR/writer.sql"
psql -X -v ON_ERROR_STOP=1 -qAt -f "$T_DIR/writer.sql" >"$T_DIR/writer.out" 2>&1 &
WRITER=$!
sleep 5
sed -i 's/mode = "table"/mode = "wal"/' "$T_DIR/outbox.conf"
kill -HUP "$M"
say "switched to wal (reload)"
streaming() { grep -q 'msg="streaming slot outboxd' "$OUTBOXD_LOG"; }
wait_until 15 "a relay streaming the slot" streaming || true
check "after the reload to wal a relay streams the slot" streaming
check "  ... and the rows pending at the switch were marked for the catch-up" \
	grep -q 'catch-up: [0-9]* row(s) were pending before slot outboxd existed' "$OUTBOXD_LOG"
sleep 6
# One transaction's 3,000 rows of one key, all but the first held at its
# commit (outbox_stamp()), and the switch back to table mode while wal
# mode is part way through them: each row wal mode sends releases the
# next, so that table mode finds the rest with one ready and none held
# behind nothing (which only retention's pass would release, saying so).
sql "INSERT INTO outbox (event_type, ordering_key, payload)
     SELECT 'wal.big', 'big', jsonb_build_object('big', i)
     FROM generate_series(1, 3000) AS i" >/dev/null
big_wal() { sql "SELECT count(*) FROM outbox WHERE ordering_key = 'big' AND status = 'sent'"; }
big_started() { [ "$(big_wal)" -gt 0 ]; }
wait_until 10 "wal mode sending the rows of key big" big_started || true
big_wal=$(big_wal)
sed -i 's/mode = "wal"/mode = "table"/' "$T_DIR/outbox.conf"
kill -HUP "$M"
say "switched back to table (reload), $big_wal of the 3,000 rows of key big sent by wal mode"
wait "$WRITER" || fail "the writer failed: $(tail -3 "$T_DIR/writer.out")"
released() { [ "$(sql "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'outboxd' AND active")" = 0 ]; }
wait_until 15 "the wal relays gone (slot released)" released || true
check "after the reload to table nobody streams the slot" released
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
wait_until 30 "every row sent" all_sent || true
check_eq "rows not 'sent' after table -> wal -> table" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --idle 5 >"$T_DIR/got.tsv" || true
cut -f4- "$T_DIR/got.tsv" | jq -r 'select(.n) | .n' | sort -n >"$T_DIR/got"
check_eq "the 3,000 rows of key big received, in order" "3000 0" \
	"$(cut -f4- "$T_DIR/got.tsv" | jq -r 'select(.big) | .big' | awk '!seen[$1]++' |
		awk 'NR > 1 && $1 < p { out++ } { p = $1; n++ } END { print n + 0, out + 0 }')"
check_eq "  ... none left held" 0 "$(sql "SELECT count(*) FROM outbox WHERE held")"
check "  ... and none released by retention's pass" \
	sh -c "! grep -q 'held row(s) whose head is gone' '$OUTBOXD_LOG'"
check "every row received" cmp -s <(seq 1 $N) <(sort -nu "$T_DIR/got")
dups=$(($(wc -l <"$T_DIR/got") - $(sort -nu "$T_DIR/got" | wc -l)))
say "duplicates received over the two switches: $dups of $N rows"
check "duplicates bounded by what can be in flight ($dups <= 200)" [ "$dups" -le 200 ]

# Table mode with the slot left in place: 300 rows, sent by table mode,
# and a table-less event that only wal mode can publish.
K=300
sql "INSERT INTO outbox (event_type, ordering_key, payload)
     SELECT 'wal.kept', 'k-' || (i % 10), jsonb_build_object('n', $N + i)
     FROM generate_series(1, $K) AS i" >/dev/null
sql "SELECT pg_logical_emit_message(true, 'outbox', '{\"event_type\": \"wal.kept.msg\", \"ordering_key\": \"m\", \"payload\": {\"n\": $((N + K + 1))}}')" >/dev/null
wait_until 30 "the table-mode rows sent" all_sent || true
check_eq "table mode sent the $K rows written with the slot kept" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
mark=$(wc -l <"$OUTBOXD_LOG")
sed -i 's/mode = "table"/mode = "wal"/' "$T_DIR/outbox.conf"
kill -HUP "$M"
say "switched to wal again, the slot kept through the table-mode period"
streaming_again() { tail -n +"$((mark + 1))" "$OUTBOXD_LOG" | grep -q 'msg="streaming slot outboxd'; }
wait_until 15 "a relay streaming the kept slot" streaming_again || true
check "a relay streams the kept slot" streaming_again
sql "INSERT INTO outbox (event_type, ordering_key, payload)
     SELECT 'wal.after', 'k-' || (i % 10), jsonb_build_object('n', $((N + K + 1)) + i)
     FROM generate_series(1, 100) AS i" >/dev/null
wait_until 30 "the wal-mode rows sent" all_sent || true
check_eq "rows not 'sent' after wal mode came back" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --idle 5 >"$T_DIR/got2.tsv" || true
cut -f4- "$T_DIR/got2.tsv" | jq -r .n | sort -n >"$T_DIR/got2"
check "every row and the table-less event of the third period received" \
	cmp -s <(seq $((N + 1)) $((N + K + 101))) <(sort -nu "$T_DIR/got2")
check_eq "messages received of the table-mode period (300 rows), the event and 100 new rows" \
	$((K + 101)) "$(wc -l <"$T_DIR/got2")"
gone=$(tail -n +"$((mark + 1))" "$OUTBOXD_LOG" | sed -n 's/.*msg="\([0-9]*\) row(s) committed before the stream started were no longer pending.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
say "rows the kept slot streamed again and wal mode left unpublished: $gone"
check "the log counts the $K table-mode rows as not published again ($gone >= $K)" [ "$gone" -ge "$K" ]

# A row streamed before its commit is visible: with a synchronous standby
# that never answers, the commit is flushed (so the walsender streams it)
# and then waits, unseen by other sessions, for the standby.  The relay
# publishes the row at once; it must mark it sent once the commit shows.
sql "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
psql -X -qAt -c "SET synchronous_commit = on" -c "INSERT INTO outbox (event_type, ordering_key, payload)
     VALUES ('wal.unseen', 'unseen', '{\"n\": 9999}')" >"$T_DIR/unseen.out" 2>&1 &
INS=$!
sleep 6	# a slow commit: many ticks of the relay's mark
check_eq "the commit waits for the standby (row not visible yet)" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE event_type = 'wal.unseen'")"
sql "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
wait "$INS" || fail "the INSERT waiting for the standby failed: $(cat "$T_DIR/unseen.out")"
unseen_sent() { [ "$(sql "SELECT status FROM outbox WHERE event_type = 'wal.unseen'")" = sent ]; }
wait_until 10 "the row published before its commit showed marked sent" unseen_sent || true
check "a row published before its commit was visible is marked sent once it is" unseen_sent
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --idle 3 >"$T_DIR/got3.tsv" || true
check_eq "  ... and was published once" 9999 "$(cut -f4- "$T_DIR/got3.tsv" | jq -r .n | tr '\n' ' ' | sed 's/ $//')"

# The same, but the commit is flushed while outboxd is stopped and
# visible only after a stream started: the row is in the backlog, and its
# check must wait for the transaction instead of taking the unseen row as
# deleted.
outboxd_stop
sql "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
psql -X -qAt -c "SET synchronous_commit = on" -c "INSERT INTO outbox (event_type, ordering_key, payload)
     VALUES ('wal.unseen', 'unseen', '{\"n\": 9998}')" >"$T_DIR/unseen2.out" 2>&1 &
INS=$!
sleep 1
outboxd_start "$T_DIR/outbox.conf" outboxd-backlog
streaming_b() { grep -q 'msg="streaming slot outboxd' "$OUTBOXD_LOG"; }
wait_until 15 "a relay streaming again" streaming_b || true
sleep 2
check_eq "the commit still waits for the standby while the new stream runs" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE payload->>'n' = '9998'")"
sql "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
sql "SELECT pg_reload_conf()" >/dev/null
wait "$INS" || fail "the INSERT waiting for the standby failed: $(cat "$T_DIR/unseen2.out")"
backlog_sent() { [ "$(sql "SELECT status FROM outbox WHERE payload->>'n' = '9998'")" = sent ]; }
wait_until 10 "the backlog's row marked sent" backlog_sent || true
check "a backlog row whose commit was not visible at the check is published and marked sent" backlog_sent
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --idle 3 >"$T_DIR/got3b.tsv" || true
check_eq "  ... once" 9998 "$(cut -f4- "$T_DIR/got3b.tsv" | jq -r .n | tr '\n' ' ' | sed 's/ $//')"

# A server restart after a stop: PostgreSQL 15 may not save the slot's
# confirmed position at its shutdown, so the slot streams again what was
# done; outboxd's own record (outbox_wal_confirmed) skips it.  Table-less
# events are the test: no row can stop them.
for i in $(seq 1 20); do
	sql "SELECT pg_logical_emit_message(true, 'outbox', '{\"event_type\": \"wal.restart\", \"ordering_key\": \"r\", \"payload\": {\"n\": $((20000 + i))}}')" >/dev/null
done
lsn_ev=$(sql "SELECT pg_current_wal_lsn()")
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --count 20 --idle 5 >"$T_DIR/got4.tsv" || true
check_eq "20 table-less events published before the restart" 20 "$(wc -l <"$T_DIR/got4.tsv")"
kept() { [ "$(sql "SELECT lsn >= '$lsn_ev' FROM outbox_wal_confirmed WHERE slot = 'outboxd'")" = t ]; }
wait_until 10 "outbox_wal_confirmed past the events" kept || true
check "outbox_wal_confirmed keeps a position past the events ($lsn_ev)" kept
outboxd_stop
PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
if [ "$(id -u)" = 0 ]; then as_pg() { runuser -u "${PG_OS_USER:-postgres}" -- "$@"; }; else as_pg() { "$@"; }; fi
as_pg "$PG_BINDIR/pg_ctl" -D "$T_STACK/pg/data" -l "$T_STACK/pg/pg.log" -m fast -w -t 60 restart >"$T_DIR/pg_ctl.out" 2>&1 ||
	die "pg_ctl restart failed: $(cat "$T_DIR/pg_ctl.out")"
say "slot after the restart: confirmed $(sql "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'outboxd'"), events up to $lsn_ev"
outboxd_start "$T_DIR/outbox.conf" outboxd2
streaming2() { grep -q 'msg="streaming slot outboxd' "$OUTBOXD_LOG"; }
wait_until 15 "a relay streaming after the restarts" streaming2 || true
sql "SELECT pg_logical_emit_message(true, 'outbox', '{\"event_type\": \"wal.restart\", \"ordering_key\": \"r\", \"payload\": {\"n\": 20021}}')" >/dev/null
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --idle 5 >"$T_DIR/got5.tsv" || true
check_eq "after outboxd and PostgreSQL restarted, only the new event (none published again)" 20021 \
	"$(cut -f4- "$T_DIR/got5.tsv" | jq -r .n | tr '\n' ' ' | sed 's/ $//')"
check_eq "  ... and the skipped ones are not called non-transactional messages" 0 \
	"$(grep -c 'non-transactional message' "$OUTBOXD_LOG" || true)"

# A kept position from elsewhere (past the server's WAL) is deleted, not
# kept to be taken later once the WAL has grown past it.
outboxd_stop
sql "UPDATE outbox_wal_confirmed SET lsn = 'FFFF/0' WHERE slot = 'outboxd'" >/dev/null
outboxd_start "$T_DIR/outbox.conf" outboxd3
sane() { [ "$(sql "SELECT coalesce(max(lsn) < 'FFFF/0', true) FROM outbox_wal_confirmed")" = t ]; }
wait_until 10 "the position from elsewhere replaced" sane || true
check "a kept position past the server's WAL is replaced" sane
check "  ... and logged" grep -q "past the server's WAL (.*): deleted, not used" "$OUTBOXD_LOG"
sql "SELECT pg_drop_replication_slot('outboxd')" >/dev/null 2>&1 || true
