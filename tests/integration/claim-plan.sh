#!/usr/bin/env bash
# claim-plan.sh -- a claim reads the head of the backlog, not all of it,
# even when the statistics still describe an empty table (a backlog that
# landed after the last ANALYZE: a broker outage, a bulk insert).
#
# Work, not time, is counted: outbox_claim() probes outbox_key_idx once
# for every pending row it looks at (its NOT EXISTS), so the index's scan
# count tells how many rows one claim of 10 visited.  With the planner
# left to the statistics it visited every one of the 20,000 rows (a bitmap
# scan and a sort), 100-300 ms a claim; walking outbox_pending_idx in id
# order it stops after about 10.  The claims need no outboxd process;
# the last part, the relay's marks under such statistics, runs one.
. "$(dirname "$0")/../lib/common.sh"
test_init
stack_up

N=20000
# Statistics of an empty table, and no autovacuum to refresh them.
sql "ALTER TABLE outbox SET (autovacuum_enabled = off)"
sql "ANALYZE outbox"
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.plan', 'key-' || g, jsonb_build_object('n', g)
	FROM generate_series(1, $N) g"
check_eq "pending rows before the claim" "$N" \
	"$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")"

# The claim and the count in one transaction: pg_stat_get_xact_numscans()
# sees this transaction's own scans, with no wait for the statistics to
# be flushed (a count read too early would be 0 and pass for nothing).
read -r claimed visited <<<"$(psql -X -v ON_ERROR_STOP=1 -qAt -F ' ' <<'SQL'
BEGIN;
CREATE TEMP TABLE claim_plan_got AS
	SELECT count(*) AS n FROM outbox_claim(1, 30000, 10, 'default', '{}');
SELECT n, pg_stat_get_xact_numscans('outbox_key_idx'::regclass)
	FROM claim_plan_got;
COMMIT;
SQL
)"
check_eq "rows claimed" 10 "$claimed"
say "outbox_key_idx probes for one claim of 10: $visited"
check "one claim of 10 from $N pending rows probes outbox_key_idx 10 to 40 times (got $visited)" \
	test "$visited" -ge 10 -a "$visited" -le 40
check_eq "the claimed rows are the 10 oldest" "1-10" \
	"$(sql "SELECT min((payload->>'n')::int) || '-' || max((payload->>'n')::int)
		FROM outbox WHERE claim = 1")"

# A small outbox: a quiet one after retention, or a new one.  The planner
# then found step 2's rows by reading all of outbox (a sequential scan
# with a ctid filter) instead of a TID scan: ~1 ms of a ~1.4 ms claim of
# one row among 2,000, on every claim.  Counted, as above: sequential
# scans of outbox and the rows they returned, in the claim's transaction.
sql "TRUNCATE outbox"
sql "INSERT INTO outbox (event_type, ordering_key, payload, status, sent_at)
	SELECT 'test.plan', 'sent-' || g, '{}', 'sent', now()
	FROM generate_series(1, 100) g"
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	VALUES ('test.plan', 'small-1', '{\"n\": 1}')"
read -r claimed seqscans seqrows <<<"$(psql -X -v ON_ERROR_STOP=1 -qAt -F ' ' <<'SQL'
BEGIN;
CREATE TEMP TABLE claim_small_got AS
	SELECT count(*) AS n FROM outbox_claim(2, 30000, 10, 'default', '{}');
SELECT n, pg_stat_get_xact_numscans('outbox'::regclass),
	pg_stat_get_xact_tuples_returned('outbox'::regclass)
	FROM claim_small_got;
COMMIT;
SQL
)"
check_eq "rows claimed from the small outbox" 1 "$claimed"
say "sequential scans of outbox for one claim: $seqscans ($seqrows rows read)"
check_eq "a claim in a small outbox reads no row sequentially" "0 0" \
	"$seqscans $seqrows"

# The relay's marks under statistics taken while the backlog's transaction
# was still open (autovacuum's ANALYZE saw its pages but none of its rows:
# pg_class says 0 rows).  The mark joined outbox to its arrays of ids; its
# plan then walked all of outbox_pkey for every row it marked, 400-600 ms
# a mark of 100 with 20,000 rows pending, until autovacuum analyzed again
# (B2 drains of 2 s took 60).  Counted, not timed: the primary key's index
# entries read while outboxd drains M rows (its backends flush their
# counts when outboxd stops).
M=2000
sql "TRUNCATE outbox"
psql -X -v ON_ERROR_STOP=1 -q <<SQL
BEGIN;
INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.plan', 'mark-' || g, jsonb_build_object('n', g)
	FROM generate_series(1, $M) g;
\! psql -X -v ON_ERROR_STOP=1 -q -c "ANALYZE outbox"
COMMIT;
SQL
read -r pages tuples <<<"$(sql "SELECT relpages, reltuples FROM pg_class WHERE relname = 'outbox'" | tr '|' ' ')"
check "ANALYZE saw the pages and none of the rows ($pages pages, $tuples rows)" \
	test "$pages" -gt 0 -a "$tuples" = 0
pkey_read() { sql "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'outbox_pkey'"; }
read0=$(pkey_read)
outboxd_start
unsent() { sql "SELECT count(*) FROM outbox WHERE status <> 'sent'"; }
drained() { [ "$(unsent)" = 0 ]; }
wait_until 60 "the $M rows marked sent" drained || true
check_eq "rows left unsent" 0 "$(unsent)"
outboxd_stop
# Every row marked is one entry read at least: fewer is counts not yet
# flushed, which must not pass for a good plan.
flushed() { read1=$(pkey_read); [ $((read1 - read0)) -ge $M ]; }
check "outboxd's backends reported at least $M outbox_pkey entries read" \
	wait_until 10 "the stopped backends' index counts" flushed
say "outbox_pkey entries read while $M rows were published and marked: $((read1 - read0))"
check "marking $M rows reads at most $((5 * M)) entries of outbox_pkey (got $((read1 - read0)))" \
	test $((read1 - read0)) -le $((5 * M))
