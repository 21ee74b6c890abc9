#!/usr/bin/env bash
# claim-race.sh -- a claim that loses its candidates to another relay's
# claim still brings a full batch while rows are due.
#
# outbox_claim()'s step 1 picks candidates with the snapshot of its own
# start; a relay whose claim committed meanwhile has taken them, and step
# 2 finds them no longer due.  Such a claim used to come back short or
# empty, which a relay reads as "the backlog is gone": it then waited for
# its next poll (1 s) with thousands of rows due, so four relays drained
# little faster than one.  The claim now scans again for what it lost.
#
# The interleaving is made, not hoped for: claim B runs with a schema in
# front of pg_catalog on its search_path whose pg_try_advisory_xact_lock()
# first waits for a lock this test holds.  B stops there on its first
# candidate, its step 1 snapshot taken; claim A takes the same 100 rows and
# commits; then B goes on.  No outboxd process is needed.
. "$(dirname "$0")/../lib/common.sh"
test_init
stack_up

sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.race', 'key-' || g, jsonb_build_object('n', g)
	FROM generate_series(1, 300) g"
sql "CREATE SCHEMA claim_race_hook"
sql "CREATE FUNCTION claim_race_hook.pg_try_advisory_xact_lock(a integer,
	b integer) RETURNS boolean LANGUAGE plpgsql AS \$\$
BEGIN
	PERFORM pg_catalog.pg_advisory_xact_lock_shared(4242);
	RETURN pg_catalog.pg_try_advisory_xact_lock(a, b);
END;
\$\$"

# A session that runs what it is sent while the test goes on (psql reading
# a FIFO): session_open NAME, session_send NAME SQL, session_close NAME.
declare -A S_FD S_PID
session_open() {
	local fd
	mkfifo "$T_DIR/$1.in"
	psql -X -v ON_ERROR_STOP=1 -qAt <"$T_DIR/$1.in" >"$T_DIR/$1.out" 2>&1 &
	S_PID[$1]=$!
	exec {fd}>"$T_DIR/$1.in"
	S_FD[$1]=$fd
	on_exit "kill ${S_PID[$1]} 2>/dev/null || true"
}
session_send() { echo "$2" >&"${S_FD[$1]}"; }
session_close() {
	local fd=${S_FD[$1]}
	exec {fd}>&-
	wait "${S_PID[$1]}" || true
}

# The gate: a session that holds lock 4242 until told to let go.
session_open gate
session_send gate "SELECT pg_advisory_lock(4242);"
gate_held() {
	[ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND objid = 4242 AND granted")" = 1 ]
}
wait_until 10 "the gate's lock" gate_held || die "the gate session took no lock"

# Claim B: stops at its first candidate, step 1 done.
PGOPTIONS="-c search_path=claim_race_hook,pg_catalog,public" \
	psql -X -v ON_ERROR_STOP=1 -qAt -c "SELECT count(*) FROM
	outbox_claim(2, 60000, 100, 'default', '{}')" >"$T_DIR/b.out" 2>&1 &
b_pid=$!
b_waiting() {
	[ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND objid = 4242 AND NOT granted")" = 1 ]
}
wait_until 10 "claim B at the gate" b_waiting || die "claim B never reached the gate"

# Claim A takes the 100 oldest rows, B's candidates, and commits.
check_eq "claim A takes 100 rows" 100 \
	"$(sql "SELECT count(*) FROM outbox_claim(1, 60000, 100, 'default', '{}')")"

session_send gate "SELECT pg_advisory_unlock(4242);"
session_close gate
wait "$b_pid" || { cat "$T_DIR/b.out" >&2; die "claim B failed"; }

check_eq "claim B, which lost its candidates to A, still brings 100 rows" 100 \
	"$(cat "$T_DIR/b.out")"
check_eq "A has the 100 oldest rows" "100 1-100" \
	"$(sql "SELECT count(*) || ' ' || min((payload->>'n')::int) || '-' ||
		max((payload->>'n')::int) FROM outbox WHERE claim = 1")"
check_eq "B has the next 100, none of A's" "100 101-200" \
	"$(sql "SELECT count(*) || ' ' || min((payload->>'n')::int) || '-' ||
		max((payload->>'n')::int) FROM outbox WHERE claim = 2")"
check_eq "the last 100 are still unclaimed" 100 \
	"$(sql "SELECT count(*) FROM outbox WHERE claim IS NULL
		AND first_claimed_at IS NULL")"

# A small claim behind many heads other relays are claiming: a relay tops
# up its last rows of room (a limit of 20) while three others hold the
# advisory locks of 300 heads.  With a scan window of 4 x the limit it saw
# only locked heads and came back empty; the relay then waited for its
# poll with the backlog due.
sql "TRUNCATE outbox"
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.race', 'key-' || g, jsonb_build_object('n', g)
	FROM generate_series(1, 400) g"
session_open locks
session_send locks "BEGIN; SELECT count(*) FROM (SELECT pg_advisory_xact_lock(2026,
	hashtext('key-' || g)) FROM generate_series(1, 300) g) l;"
locks_held() {
	[ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND classid = 2026 AND granted")" = 300 ]
}
wait_until 10 "300 heads locked" locks_held || die "the lock session took no locks"
check_eq "a claim of 20 behind 300 heads being claimed brings 20 rows" 20 \
	"$(sql "SELECT count(*) FROM outbox_claim(3, 60000, 20, 'default', '{}')")"
check_eq "the claim took the first free heads" "20 301-320" \
	"$(sql "SELECT count(*) || ' ' || min((payload->>'n')::int) || '-' ||
		max((payload->>'n')::int) FROM outbox WHERE claim = 3")"
session_send locks "COMMIT;"
session_close locks
