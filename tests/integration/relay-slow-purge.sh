#!/usr/bin/env bash
# relay-slow-purge.sh -- retention deletes that suddenly take 5 s (a
# trigger sleeps; think of a server under an I/O storm) while rows keep
# coming, two relays, lease = 4000 ms, webhook.timeout = 2000 ms.  Relay 1
# runs retention; on the connection it marks on, a mark owed during such a
# delete waited for it and came after the lease of the rows it marked, when
# relay 2 could claim them again (published twice).  Retention has a
# connection of its own.
# Asserts: retention keeps up under steady traffic; every new row is sent
# and delivered once (requests = rows = distinct webhook-ids) while the
# deletes are slow; the old rows are deleted; a SIGTERM during a delete
# cancels it and stops at once, exit status 0; a server that does not
# answer retention's connect does not hold relay 1 (each row delivered
# once).
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

NEW=900
# old_rows N TAG: N sent rows, sent 10 days ago (500 per statement: each
# key takes a lock until the commit)
old_rows() {
	local i
	for ((i = 0; i < $1; i += 500)); do
		sql "INSERT INTO outbox (event_type, ordering_key, payload, status, attempts, created_at, sent_at)
			SELECT 'test.old', '$2-' || g, '{}', 'sent', 1, now() - interval '10 days', now() - interval '10 days'
			FROM generate_series($i + 1, $i + 500) g" >/dev/null
	done
}
# feed N MS TAG: N new rows, one every MS ms, from now
feed() {
	"$PY" - "$DATABASE_URL" "$1" "$2" "$3" <<'PYEOF'
import subprocess, sys, time
p = subprocess.Popen(["psql", "-qX", sys.argv[1]], stdin=subprocess.PIPE, text=True)
t0 = time.monotonic()
for i in range(int(sys.argv[2])):
    d = t0 + i * int(sys.argv[3]) / 1000 - time.monotonic()
    if d > 0:
        time.sleep(d)
    p.stdin.write(f"INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('test.{sys.argv[4]}', '{sys.argv[4]}-{i}', '{{}}');\n")
    p.stdin.flush()
p.stdin.close()
p.wait()
PYEOF
}
# sent_once TAG N WHAT: wait for the N rows of event type test.TAG to be
# sent, then check each went out once: N sent, N requests for them.
sent_once() {
	local tag=$1 n=$2
	tag_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.$tag' AND status = 'sent'")" = "$n" ]; }
	wait_until 90 "all $n test.$tag rows sent" tag_sent || true
	sleep 3	# deliveries of rows a second claim took would show up by now
	check_eq "rows sent ($3)" "$n" \
		"$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.$tag' AND status = 'sent'")"
	check_eq "  ... requests the receiver got (one per row)" "$n" \
		"$(jq -r --arg t "test.$tag" 'select(.headers["x-outbox-event-type"] == $t) | .headers["webhook-id"]' "$REC" | wc -l)"
}
webhook_receiver_start
webhook_conf_write "$T_DIR/outbox.conf" 2000 "workers = 2" "batch_size = 10" \
	"poll_interval = 200" "lease = 4000" "retention = 3600"

# First, fast deletes under steady traffic (a row every 5 ms for 15 s, the
# receiver answering in 20 ms, so relay 1 nearly always holds rows):
# retention must not wait for a quiet moment for ever.  The first pass
# begins 5 s in; its first delete, not timed yet, waits at most 5 s.
webhook_receiver_slow 20
old_rows 1500 warm
outboxd_start "$T_DIR/outbox.conf"
feed 3000 5 warm
check_eq "old rows left when 15 s of steady traffic end (the pass began at 5 s)" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.old'")"
outboxd_stop
sql "DELETE FROM outbox" >/dev/null
: >"$REC"
webhook_receiver_slow 0

# Then deletes that turn slow: a row every 20 ms for 18 s; 2,000 old rows
# are four deletes, the first 0.3 s, the others 5 s each.
old_rows 2000 old
sql "CREATE SEQUENCE slow_delete_n;
CREATE FUNCTION slow_delete() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN PERFORM pg_sleep(CASE WHEN nextval('slow_delete_n') = 1 THEN 0.3 ELSE 5 END); RETURN NULL; END \$\$;
CREATE TRIGGER slow_delete BEFORE DELETE ON outbox FOR EACH STATEMENT EXECUTE FUNCTION slow_delete();" >/dev/null
outboxd_start "$T_DIR/outbox.conf"
feed "$NEW" 20 new
new_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.new' AND status = 'sent'")" = "$NEW" ]; }
wait_until 60 "all $NEW new rows sent" new_sent || true
old_gone() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.old'")" = 0 ]; }
wait_until 60 "the old rows deleted" old_gone || true
sleep 3	# deliveries of rows a second claim took would show up by now
check_eq "new rows sent" "$NEW" "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.new' AND status = 'sent'")"
check_eq "requests the receiver got (one per new row)" "$NEW" "$(wc -l <"$REC")"
check_eq "distinct webhook-ids among them" "$NEW" \
	"$(jq -r '.headers["webhook-id"]' "$REC" | sort -u | wc -l)"
check_eq "old sent rows left" 0 "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.old'")"
outboxd_stop

# A stop during a delete (10 s now): cancelled, not waited for until
# shutdown_timeout kills the relay and leaves the delete running.
sql "CREATE OR REPLACE FUNCTION slow_delete() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN PERFORM pg_sleep(10); RETURN NULL; END \$\$" >/dev/null
sql "INSERT INTO outbox (event_type, ordering_key, payload, status, attempts, created_at, sent_at)
	SELECT 'test.old', 'old2-' || g, '{}', 'sent', 1, now() - interval '10 days', now() - interval '10 days'
	FROM generate_series(1, 600) g" >/dev/null
outboxd_start "$T_DIR/outbox.conf"
in_delete() { [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'DELETE FROM outbox%'")" != 0 ]; }
wait_until 30 "a retention delete under way" in_delete || true
t0=$(now_ms)
outboxd_stop
took=$(($(now_ms) - t0))
check "the stop during a 10 s delete did not wait for it (${took} ms)" [ "$took" -lt 8000 ]
check "the delete was cancelled (logged)" grep -q 'retention: delete cancelled by the stop' "$OUTBOXD_LOG"
check_eq "deletes still running in PostgreSQL after the stop" 0 \
	"$(sql "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'DELETE FROM outbox%'")"
check "no worker was killed" bash -c "! grep -q 'killed by signal' '$OUTBOXD_LOG'"

# A server that takes connections but does not answer them (the postmaster
# stopped for 12 s; connections already open keep working) just as
# retention's first pass connects, 5 s after the start, while rows keep
# coming: relay 1 must go on publishing.  A blocking connect held it for
# connect_timeout (10 s): its requests timed out, its leases ended, and
# rows went out twice.
outboxd_stop
sql "DROP TRIGGER slow_delete ON outbox; DELETE FROM outbox" >/dev/null
: >"$REC"
webhook_receiver_slow 300
outboxd_start "$T_DIR/outbox.conf"
feed 600 20 stall &
feed_pid=$!
sleep 2
pm=$(head -1 "$T_STACK/pg/data/postmaster.pid")
kill -STOP "$pm"
on_exit "kill -CONT $pm"
sleep 12
kill -CONT "$pm"
wait "$feed_pid"
sent_once stall 600 "postmaster stopped 12 s during retention's connect"
outboxd_stop

# A stop during a delete while the server takes no new connection at all
# (the postmaster stopped; the backends already connected still answer):
# the cancel request cannot get through, and PQcancel() waits for ever.
# Relay 1 must record what it published first (it asks for the cancel
# after its loop): every row delivered once, after a restart.  Asking
# first held its drain until shutdown_timeout killed it, and rows at the
# sink went out again.
sql "CREATE OR REPLACE FUNCTION slow_delete() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN PERFORM pg_sleep(30); RETURN NULL; END \$\$;
CREATE TRIGGER slow_delete BEFORE DELETE ON outbox FOR EACH STATEMENT EXECUTE FUNCTION slow_delete();" >/dev/null
old_rows 500 hung-old
: >"$REC"
webhook_receiver_slow 1500
outboxd_start "$T_DIR/outbox.conf"
feed 600 20 hung &
feed_pid=$!
wait_until 30 "a retention delete under way" in_delete || true
kill -STOP "$pm"
sleep 1
outboxd_stop
kill -CONT "$pm"
wait "$feed_pid"
webhook_receiver_slow 0	# slow only to hold rows at the sink at the stop
outboxd_start "$T_DIR/outbox.conf"
sent_once hung 600 "a stop while the postmaster hung, after a restart"
outboxd_stop
