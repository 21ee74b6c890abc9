#!/usr/bin/env bash
# relay-retention.sh -- relay.retention removes sent rows older than the
# setting, and nothing else.  relay.retention = 30 s (long enough that
# rows on both sides of the boundary keep their side while outboxd starts).
# Before outboxd starts, the outbox gets:
#   1200 'sent' rows, sent 1 hour ago             -> deleted (more than one
#                                                    batch of the purge)
#      5 'sent' rows, sent 45 s ago                -> deleted
#      5 'sent' rows, sent 10 s ago                -> kept (younger)
#      5 'sent' rows, sent now                     -> kept
#      5 'pending' rows created 1 hour ago         -> kept (not yet due:
#                                                    available tomorrow)
#      2 'pending' rows with an old sent_at        -> kept (e.g. redriven)
#      5 'failed' rows created 1 hour ago          -> kept (dead letters)
#      2 'failed' rows with an old sent_at         -> kept
# Asserts: after the first retention pass (about 5 s after the start) the
# outbox holds exactly the "kept" rows, unchanged, and the log and
# /metrics report the number deleted; retention reads outbox_sent_idx, on
# a connection of its own.  Then, restarted without that index and with a
# trigger that refuses deletes: a warning about the index, the refusal
# logged and counted, outboxd running.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
stack_up

RETENTION=30
OLD=1200

row() {	# row STATUS N CREATED_AGO SENT_AGO|null AVAILABLE_IN TAG
	local sent=null
	[ "$4" = null ] || sent="now() - interval '$4'"
	sql "INSERT INTO outbox (event_type, ordering_key, payload, status, attempts,
		created_at, available_at, sent_at, last_error)
	SELECT 'test.retention', '$6-' || g, jsonb_build_object('tag', '$6', 'n', g), '$1',
		CASE '$1' WHEN 'failed' THEN 10 WHEN 'sent' THEN 1 ELSE 0 END,
		now() - interval '$3', now() + interval '$5', $sent,
		CASE '$1' WHEN 'failed' THEN 'injected dead letter' END
	FROM generate_series(1, $2) g" >/dev/null
}
row sent "$OLD" '1 hour' '1 hour' '0 s' old-sent
row sent 5 '50 s' '45 s' '0 s' boundary-old
row sent 5 '15 s' '10 s' '0 s' recent-sent
row sent 5 '1 s' '0 s' '0 s' new-sent
row pending 5 '1 hour' null '1 day' old-pending
row pending 2 '1 hour' '1 hour' '1 day' pending-old-sent-at
row failed 5 '1 hour' null '0 s' old-failed
row failed 2 '1 hour' '1 hour' '0 s' failed-old-sent-at
total=$(sql "SELECT count(*) FROM outbox")
check_eq "rows written" $((OLD + 29)) "$total"
snap="SELECT id, status, ordering_key, payload::text, attempts, created_at, available_at, sent_at, last_error
	FROM outbox WHERE ordering_key NOT LIKE 'old-sent-%' AND ordering_key NOT LIKE 'boundary-old-%' ORDER BY id"
sql "$snap" >"$T_DIR/keep.before"
check_eq "rows that must stay" 24 "$(wc -l <"$T_DIR/keep.before")"

OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=0 \
	relay_conf_write "$T_DIR/outbox.conf" "retention = $RETENTION"
t0=$(now_ms)
outboxd_start "$T_DIR/outbox.conf"

gone() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND sent_at < now() - interval '$RETENTION s'")" = 0 ]; }
sleep 2
say "$(($(now_ms) - t0)) ms after the start: $(sql "SELECT count(*) FROM outbox") rows"
wait_until 20 "the old sent rows to be deleted" gone || true
t_gone=$(now_ms)
say "old sent rows gone $((t_gone - t0)) ms after outboxd was started (first pass due at 5 s)"
check "the first retention pass ran within 12 s of the start ($((t_gone - t0)) ms)" [ $((t_gone - t0)) -le 12000 ]
sleep 1
check_eq "sent rows sent 1 hour ago left" 0 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'old-sent-%'")"
check_eq "sent rows sent 45 s ago left (retention $RETENTION s)" 0 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'boundary-old-%'")"
sql "$snap" >"$T_DIR/keep.after"
if cmp -s "$T_DIR/keep.before" "$T_DIR/keep.after"; then
	pass "the 24 other rows (recent/new sent, pending, failed, some with an old sent_at) are all there, unchanged"
else
	fail "rows that must stay changed: $(diff "$T_DIR/keep.before" "$T_DIR/keep.after" | head -6 | tr '\n' '|')"
fi
for t in recent-sent new-sent old-pending pending-old-sent-at old-failed failed-old-sent-at; do
	say "  $t: $(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE '$t-%'") left"
done
check_eq "rows in the outbox" 24 "$(sql "SELECT count(*) FROM outbox")"
check_eq "retention's own connections (application_name 'outboxd retention')" 1 \
	"$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outboxd retention'")"
# The deletes find the rows due through outbox_sent_idx: without it a pass
# reads the whole table, also when nothing is due.
sent_idx_scans() { sql "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = 'outbox_sent_idx'"; }
sent_idx_used() { [ "$(sent_idx_scans)" -gt 0 ]; }
wait_until 10 "the statistics to show outbox_sent_idx read" sent_idx_used || true
check "retention's deletes read outbox_sent_idx (index scans: $(sent_idx_scans))" sent_idx_used
check "the log reports the purge ($(grep -o 'retention: deleted [^"]*' "$OUTBOXD_LOG" | paste -sd';'))" \
	grep -q "retention: deleted $((OLD + 5)) sent row(s) older than $RETENTION s" "$OUTBOXD_LOG"
check_eq "retention passes that reported deletions" 1 "$(grep -c 'retention: deleted' "$OUTBOXD_LOG" || true)"
scrape "$T_DIR/metrics.1" || true
check_eq "outboxd_retention_deleted_rows_total" $((OLD + 5)) \
	"$(sample "$T_DIR/metrics.1" outboxd_retention_deleted_rows_total)"
check_eq "outboxd_retention_errors_total" 0 \
	"$(sample "$T_DIR/metrics.1" outboxd_retention_errors_total)"
# inserting still works and the relays still publish
oid=$(sql_order ret-after 5)
sent_now() { [ "$(sql "SELECT status FROM outbox WHERE ordering_key = '$oid'")" = sent ]; }
wait_until 10 "a new row to be sent" sent_now || true
check_eq "a row written after the purge is published" sent "$(sql "SELECT status FROM outbox WHERE ordering_key = '$oid'")"
check "outboxd still running" proc_alive "$OUTBOXD_PIDFILE"

# A schema applied before outbox_sent_idx existed: outboxd starts, and says
# what is missing and what to do.  And a delete the server refuses (here a
# trigger): logged with the server's reason, counted, outboxd goes on.
outboxd_stop
sql "DROP INDEX outbox_sent_idx" >/dev/null
row sent 5 '1 hour' '1 hour' '0 s' refused-sent
sql "CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN RAISE EXCEPTION 'deletes are not allowed today'; END \$\$;
CREATE TRIGGER refuse_delete BEFORE DELETE ON outbox FOR EACH STATEMENT EXECUTE FUNCTION refuse_delete();" >/dev/null
outboxd_start "$T_DIR/outbox.conf" outboxd-noidx
check "without outbox_sent_idx: a warning at the start says to apply the schema again" \
	grep -q 'level=warn.*the index outbox_sent_idx is missing.*apply .*schema.sql again' "$OUTBOXD_LOG"
refused() { grep -q 'retention: delete failed: deletes are not allowed today' "$OUTBOXD_LOG"; }
wait_until 20 "the refused delete to be logged" refused || true
check "a refused delete is logged with the server's reason" refused
scrape "$T_DIR/metrics.2" || true
check_eq "  ... and counted in outboxd_retention_errors_total" 1 \
	"$(sample "$T_DIR/metrics.2" outboxd_retention_errors_total)"
check_eq "  ... the rows stay" 5 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'refused-sent-%'")"
check "  ... outboxd still running" proc_alive "$OUTBOXD_PIDFILE"
