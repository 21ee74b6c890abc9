#!/usr/bin/env bash
# outbox-held.sh -- which rows outbox_stamp() holds at their commit
# (outbox.held, sql/schema.sql), and that whatever releases a held row
# sees the rows held behind it.  SQL only, no outboxd process:
#   1. a transaction's rows of one key and destination: all but the first
#      of each run of them held, and one behind a held row; another
#      destination's, or a row behind one the transaction only updated,
#      not;
#   2. a row behind a held row, or behind a failed one, of another
#      transaction: held; behind a row being released right now (locked
#      by the releasing transaction): not held (SKIP LOCKED);
#   3. the other way round: a commit that held a row behind a held one
#      locks it, so the release waits for that commit and then finds the
#      new row held behind it, to release in its turn;
#   4. work, not time: the stamps of a backlog of one key behind 3,000
#      unheld rows of that key, and of 3,000 fresh keys, read a few rows
#      each, not the key's rows or the table (heap rows fetched counted in
#      the transaction);
#   5. a REPEATABLE READ writer whose snapshot predates the release of
#      the held row ahead commits (no lock on that row: its row is left
#      unheld);
#   6. a stream of one-row transactions into an outbox the planner knows
#      is empty (truncated, vacuumed): the stamps read no row by a
#      sequential scan;
#   7. a run whose first row its INSERT did not write (ON CONFLICT DO
#      NOTHING, a BEFORE trigger that returned NULL): the next row is not
#      held behind it, and a claim takes it.
. "$(dirname "$0")/../lib/common.sh"
test_init
stack_up

# held_of TAG... -- "tag=held" for each row with payload tag TAG, in id order
held_of() {
	local t list=
	for t in "$@"; do list="$list${list:+,}'$t'"; done
	sql "SELECT string_agg((payload->>'tag') || '=' || held, ' ' ORDER BY id)
		FROM outbox WHERE payload->>'tag' IN ($list)"
}
ins() {	# ins KEY TAG [DESTINATION] -- the INSERT of one row
	local dest=NULL
	[ -z "${3:-}" ] || dest="'$3'"
	printf "INSERT INTO outbox (event_type, ordering_key, payload, destination) VALUES ('test.held', '%s', '{\"tag\": \"%s\"}', %s);\n" \
		"$1" "$2" "$dest"
}

# ---- 1 --------------------------------------------------------------------------------
psql -X -v ON_ERROR_STOP=1 -q <<SQL
BEGIN;
$(ins a a1) $(ins a a2) $(ins a ax x) $(ins a a3) $(ins a ax2 x)
COMMIT;
SQL
check_eq "1: one transaction, key a: held behind its own row of the same key and destination just before, or behind a held one" \
	"a1=false a2=true ax=false a3=true ax2=false" "$(held_of a1 a2 ax a3 ax2)"
psql -X -v ON_ERROR_STOP=1 -q <<SQL
$(ins b b1)
BEGIN;
UPDATE outbox SET payload = payload || '{"touched": true}' WHERE payload->>'tag' = 'b1';
$(ins b b2) $(ins b b3)
COMMIT;
SQL
check_eq "1: behind a row the transaction only updated (visible already): not held; its own next: held" \
	"b1=false b2=false b3=true" "$(held_of b1 b2 b3)"

# ---- 2 --------------------------------------------------------------------------------
sql "$(ins c c1)" >/dev/null
sql "UPDATE outbox SET held = true WHERE payload->>'tag' = 'c1'" >/dev/null
sql "$(ins c c2)" >/dev/null
sql "$(ins d d1)" >/dev/null
sql "UPDATE outbox SET status = 'failed' WHERE payload->>'tag' = 'd1'" >/dev/null
sql "$(ins d d2)" >/dev/null
check_eq "2: behind another transaction's held row, and behind a failed one: held" \
	"c1=true c2=true d1=false d2=true" "$(held_of c1 c2 d1 d2)"
sql "$(ins e e1)" >/dev/null
check_eq "2: behind a pending row of another transaction: not held" "e1=false" "$(held_of e1)"
# A release in progress: the row behind is written meanwhile.
sql "$(ins f f1)" >/dev/null
sql "UPDATE outbox SET held = true WHERE payload->>'tag' = 'f1'" >/dev/null
psql -X -v ON_ERROR_STOP=1 -qAt >"$T_DIR/release.out" 2>&1 <<SQL &
BEGIN;
UPDATE outbox SET held = false WHERE payload->>'tag' = 'f1';
\! touch $T_DIR/released
SELECT pg_sleep(1.5);
COMMIT;
SQL
rel=$!
wait_until 10 "the release to start" test -e "$T_DIR/released" || true
sql "$(ins f f2)" >/dev/null
wait "$rel" || fail "the release failed: $(cat "$T_DIR/release.out")"
check_eq "2: behind a row being released right now: not held (it would not be seen)" \
	"f1=false f2=false" "$(held_of f1 f2)"

# ---- 3 --------------------------------------------------------------------------------
sql "$(ins g g1)" >/dev/null
sql "UPDATE outbox SET held = true WHERE payload->>'tag' = 'g1'" >/dev/null
psql -X -v ON_ERROR_STOP=1 -qAt >"$T_DIR/writer.out" 2>&1 <<SQL &
BEGIN;
$(ins g g2)
SET CONSTRAINTS outbox_stamp IMMEDIATE;
\! touch $T_DIR/stamped
SELECT pg_sleep(1.5);
COMMIT;
SQL
wr=$!
wait_until 10 "the writer's stamp" test -e "$T_DIR/stamped" || true
t0=$(now_ms)
sql "UPDATE outbox SET held = false WHERE payload->>'tag' = 'g1'" >/dev/null
waited=$(($(now_ms) - t0))
wait "$wr" || fail "the writer failed: $(cat "$T_DIR/writer.out")"
say "the release waited $waited ms for the writer's commit"
check "3: the release of g1 waited for the commit that held g2 behind it ($waited ms >= 500)" \
	[ "$waited" -ge 500 ]
check_eq "3: g2 held behind g1, now released" "g1=false g2=true" "$(held_of g1 g2)"
released=$(sql "UPDATE outbox SET held = false WHERE id = (SELECT id FROM outbox WHERE held
	AND ordering_key = 'g' ORDER BY commit_seq, id LIMIT 1) RETURNING payload->>'tag'")
check_eq "3: the next release (g1 sent) finds g2" "g2" "$released"

# ---- 4 --------------------------------------------------------------------------------
sql "SET outboxd.stamp = off; INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.held', 'w', '{\"tag\": \"w-old\"}' FROM generate_series(1, 3000)" >/dev/null
# work: index entries and rows of seq scans read, over outbox and its indexes
WORK="(SELECT sum(pg_stat_get_xact_tuples_returned(i.indexrelid)) FROM pg_index i
	WHERE i.indrelid = 'outbox'::regclass) + pg_stat_get_xact_tuples_returned('outbox'::regclass)"
read -r fetched held <<<"$(psql -X -v ON_ERROR_STOP=1 -qAt -F ' ' <<SQL
BEGIN;
INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.held', 'w', '{"tag": "w-new"}' FROM generate_series(1, 3000);
INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.held', 'w-' || g, '{"tag": "w-fresh"}' FROM generate_series(1, 3000) g;
CREATE TEMP TABLE f0 AS SELECT $WORK AS n;
SET CONSTRAINTS outbox_stamp IMMEDIATE;
SELECT $WORK - n, (SELECT count(*) FROM outbox WHERE payload->>'tag' = 'w-new' AND held) FROM f0;
COMMIT;
SQL
)"
say "6,000 stamps read $fetched index entries and rows"
check "4: 6,000 stamps read at most 5 index entries or rows each ($fetched)" \
	[ "${fetched:-999999999}" -le 30000 ]
check_eq "4: the backlog behind the unheld rows: all but its first held" 2999 "$held"

# ---- 5 --------------------------------------------------------------------------------
sql "INSERT INTO outbox (event_type, ordering_key, payload) VALUES
	('test.held', 'rr', '{\"tag\": \"rr1\"}'), ('test.held', 'rr', '{\"tag\": \"rr2\"}')" >/dev/null
psql -X -v ON_ERROR_STOP=1 -qAt >"$T_DIR/rr.out" 2>&1 <<SQL &
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM outbox;
\! touch $T_DIR/rr-snapshot
SELECT pg_sleep(1);
$(ins rr rr3)
COMMIT;
SQL
rr=$!
wait_until 10 "the REPEATABLE READ writer's snapshot" test -e "$T_DIR/rr-snapshot" || true
sql "UPDATE outbox SET held = false WHERE payload->>'tag' = 'rr2'" >/dev/null
rr_rc=0; wait "$rr" || rr_rc=$?
check_eq "5: the REPEATABLE READ writer committed (exit status; $(tr '\n' ' ' <"$T_DIR/rr.out"))" 0 "$rr_rc"
check_eq "5: its row, not held" "rr3=false" "$(held_of rr3)"

# ---- 6 --------------------------------------------------------------------------------
sql "TRUNCATE outbox" >/dev/null
sql "VACUUM ANALYZE outbox" >/dev/null
seq_read() { sql "SELECT pg_stat_clear_snapshot()" >/dev/null; sql "SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'outbox'"; }
s0=$(seq_read)
sql "DO \$\$ BEGIN FOR g IN 1..2000 LOOP
	INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('test.held', 'stream', '{}');
	COMMIT; END LOOP; END \$\$"
sleep 1	# the DO's session has ended and flushed its counters
s1=$(seq_read)
say "2,000 stamps into an outbox known to be empty: $((s1 - s0)) rows read by sequential scans"
check "6: the stamps of 2,000 one-row transactions read no row by a sequential scan ($((s1 - s0)))" \
	[ "$((s1 - s0))" -le 100 ]

# ---- 7 --------------------------------------------------------------------------------
# A run's first row that its INSERT did not write: nothing ahead, so nothing
# would release the next one, had it been held.
sql "TRUNCATE outbox" >/dev/null
sql "CREATE UNIQUE INDEX held_test_tag ON outbox ((payload->>'tag'))" >/dev/null
sql "CREATE FUNCTION held_test_drop() RETURNS trigger LANGUAGE plpgsql AS
	\$\$ BEGIN RETURN CASE WHEN NEW.payload->>'tag' = 'v1' THEN NULL ELSE NEW END; END \$\$" >/dev/null
sql "CREATE TRIGGER zz_held_test_drop BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION held_test_drop()" >/dev/null
sql "$(ins s s0)" >/dev/null
sql "UPDATE outbox SET status = 'sent' WHERE payload->>'tag' = 's0'" >/dev/null
psql -X -v ON_ERROR_STOP=1 -q <<SQL
BEGIN;
INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('test.held', 's', '{"tag": "s0"}')
	ON CONFLICT DO NOTHING;
$(ins s s1) $(ins s s2)
INSERT INTO outbox (event_type, ordering_key, payload) VALUES
	('test.held', 't', '{"tag": "s0"}'), ('test.held', 't', '{"tag": "t1"}'),
	('test.held', 't', '{"tag": "t2"}') ON CONFLICT DO NOTHING;
$(ins v v1) $(ins v v2) $(ins v v3)
COMMIT;
SQL
check_eq "7: behind a row ON CONFLICT DO NOTHING skipped, or a BEFORE trigger dropped: not held; the next one held" \
	"s1=false s2=true t1=false t2=true v2=false v3=true" "$(held_of s1 s2 t1 t2 v2 v3)"
claimed=$(sql "SELECT string_agg(payload::jsonb->>'tag', ' ' ORDER BY id)
	FROM outbox_claim(7, 30000, 10, NULL, NULL)")
check_eq "7: the claim takes them, one a key" "s1 t1 v2" "$claimed"
sql "DROP TRIGGER zz_held_test_drop ON outbox; DROP FUNCTION held_test_drop(); DROP INDEX held_test_tag" >/dev/null
