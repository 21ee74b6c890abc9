#!/usr/bin/env bash
# schema-backfill.sh -- an application writes 100,000 outbox rows, each with
# its own ordering key, in one transaction (a backfill).  The commit-order
# trigger (outbox_stamp) locks a bucket of keys per row, not the key: one
# lock per key filled PostgreSQL's lock table at about 60,000 keys and the
# application's transaction failed with "out of shared memory".
# Asserts: the transaction commits; every row got its commit stamp; the
# transaction held no more than 1,024 advisory locks; the relays then
# publish the backlog in full, once per row.  No HTTP worker or consumer.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

N=100000
# pg_locks, read inside the writing transaction, counts its own advisory
# locks (the trigger fires at COMMIT, so SET CONSTRAINTS ... IMMEDIATE
# fires it first).
out=$(psql -X -v ON_ERROR_STOP=1 -qAt 2>&1 <<SQL
BEGIN;
INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.backfill', 'bf-' || g, jsonb_build_object('n', g)
	FROM generate_series(1, $N) g;
SET CONSTRAINTS outbox_stamp IMMEDIATE;
SELECT 'locks=' || count(*) FROM pg_locks
	WHERE locktype = 'advisory' AND pid = pg_backend_pid();
COMMIT;
SQL
) && rc=0 || rc=$?
say "backfill of $N rows in one transaction: exit $rc; ${out:0:300}"
check_eq "the backfill transaction committed" 0 "$rc"
locks=$(sed -n 's/^locks=//p' <<<"$out")
check "advisory locks the transaction held: ${locks:-none} (at most 1024)" \
	test "${locks:-99999}" -le 1024
check_eq "rows written" "$N" "$(sql "SELECT count(*) FROM outbox")"
check_eq "rows without a commit stamp" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE commit_seq IS NULL")"

# No consumer: the queue keeps every message for the count below.
OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=0 OB_HTTP_WORKERS=1 \
	relay_conf_write "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"
drained() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
wait_until 120 "the backfill to be published" drained || true
outboxd_stop
check_eq "rows not sent" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
check_eq "rows sent more than once (attempts > 1)" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE attempts <> 1")"
check_eq "messages in the queue = rows" "$N" \
	"$(sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessages)"
