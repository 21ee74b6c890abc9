#!/usr/bin/env bash
# schema-migrate.sh -- an outbox written by the schema of the last release
# before destinations and headers (tests/fixtures/schema-5ddeb8d.sql) is
# migrated by applying sql/schema.sql, and keeps every row (issue 26,
# item 1 and its migration test).
#   1. On a fresh database with the old schema (no destination, no headers
#      column): pending rows (six keys, five rows each, and one row an old
#      relay had claimed when it stopped), sent rows and failed rows.
#   2. sql/schema.sql applied twice: the first adds the columns (NULL in
#      every row) and the header trigger and leaves every old column of
#      every row as it was; the second changes nothing (pg_dump --schema-
#      only identical); the old outbox_claim(bigint, bigint, integer) of
#      the old relays is still there.
#   3. outboxd started on it (the configuration of the stack: the legacy
#      sqs {} is the default destination): every pending row reaches the
#      queue exactly once, with EventType and no other attribute, each
#      key's rows in their order; sent and failed rows untouched; nothing
#      else on the queue.
#   4. The migrated table takes a row with headers and refuses one that
#      breaks a rule.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/sqs-take.sh"
# jq_ok ARGS... FILE -- jq -e, quietly: true when the filter yields true
# on FILE, which must not be empty (jq 1.6 -e is true on no input)
jq_ok() { [ -s "${!#}" ] && jq -e "$@" >/dev/null; }
test_init
need_binaries
OLD=$T_ROOT/tests/fixtures/schema-5ddeb8d.sql
OUTBOXD_SCHEMA=$OLD stack_up
PG_DUMP=$(ls /usr/lib/postgresql/*/bin/pg_dump | sort -V | tail -1)

# ---- 1: rows written by the old schema ------------------------------------------
check_eq "1: the old outbox has no destination or headers column" 0 \
	"$(sql "SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'outbox' AND column_name IN ('destination', 'headers')")"
# One transaction a row, keys interleaved, as writers of the old release
# did; the payload carries its key and its place in the key.
for i in 1 2 3 4 5; do
	for k in 1 2 3 4 5 6; do
		sql "INSERT INTO outbox (event_type, ordering_key, payload)
			VALUES ('test.migrate', 'mig-$k', '{\"key\": \"mig-$k\", \"seq\": $i}')" >/dev/null
	done
done
# A row an old relay had claimed and published once when it was stopped
# for the upgrade: its lease is over.
sql "INSERT INTO outbox (event_type, ordering_key, payload, attempts, claim, first_claimed_at, available_at, last_error)
	VALUES ('test.migrate', 'mig-claimed', '{\"key\": \"mig-claimed\", \"seq\": 1}', 1, 4242,
		now() - interval '1 minute', now() - interval '1 second', 'SQS HTTP 500 InternalError: -')" >/dev/null
sql "INSERT INTO outbox (event_type, ordering_key, payload, status, attempts, sent_at, first_claimed_at)
	SELECT 'test.migrate', 'done-' || g, jsonb_build_object('done', g), 'sent', 1,
		now() - interval '1 hour', now() - interval '1 hour' FROM generate_series(1, 10) g" >/dev/null
sql "INSERT INTO outbox (event_type, ordering_key, payload, status, attempts, last_error, first_claimed_at)
	SELECT 'test.migrate', 'dead-' || g, jsonb_build_object('dead', g), 'failed', 10,
		'SQS InvalidMessageContents: old', now() - interval '1 hour' FROM generate_series(1, 2) g" >/dev/null
PENDING=$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")
check_eq "1: pending rows written by the old schema" 31 "$PENDING"
# Every column of the old schema, row by row.
OLD_COLS="id, event_type, ordering_key, payload, status, attempts, created_at, available_at, claim,
	first_claimed_at, sent_at, last_error, commit_seq"
rows_md5() { sql "SELECT md5(string_agg(t::text, E'\n' ORDER BY id)) FROM (SELECT $OLD_COLS FROM outbox $1) t"; }
all_before=$(rows_md5 "")
done_before=$(rows_md5 "WHERE status <> 'pending'")

# ---- 2: the new schema, twice ---------------------------------------------------
psql -X -v ON_ERROR_STOP=1 -q -f "$T_ROOT/sql/schema.sql" >"$T_DIR/apply1.log" 2>&1 ||
	{ cat "$T_DIR/apply1.log"; die "2: applying sql/schema.sql to the old schema failed"; }
# (without the \restrict lines, whose key is new on every run)
schema_dump() { "$PG_DUMP" --schema-only --no-owner "$PGDATABASE" | grep -v '^\\\(un\)\?restrict ' >"$1"; }
schema_dump "$T_DIR/schema1.sql"
check_eq "2: every old column of every row unchanged" "$all_before" "$(rows_md5 "")"
check_eq "2: destination and headers NULL in every row" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE destination IS NOT NULL OR headers IS NOT NULL")"
check "2: the header trigger exists" grep -q 'CREATE TRIGGER outbox_check_headers BEFORE INSERT OR UPDATE OF headers ON public.outbox' "$T_DIR/schema1.sql"
check "2: the row trigger (destination, event_type) exists" grep -q 'CREATE TRIGGER outbox_check_row BEFORE INSERT OR UPDATE OF destination, event_type ON public.outbox' "$T_DIR/schema1.sql"
check_eq "2: no CHECK constraint on destination (its error would show the row)" 0 \
	"$(sql "SELECT count(*) FROM pg_constraint WHERE conrelid = 'outbox'::regclass AND conname = 'outbox_destination_name'")"
check_eq "2: the old relays' outbox_claim(bigint, bigint, integer) is left in place" t \
	"$(sql "SELECT to_regprocedure('outbox_claim(bigint, bigint, integer)') IS NOT NULL")"
psql -X -v ON_ERROR_STOP=1 -q -f "$T_ROOT/sql/schema.sql" >"$T_DIR/apply2.log" 2>&1 ||
	{ cat "$T_DIR/apply2.log"; die "2: applying sql/schema.sql a second time failed"; }
schema_dump "$T_DIR/schema2.sql"
check "2: the second application changed nothing (pg_dump --schema-only)" \
	diff -u "$T_DIR/schema1.sql" "$T_DIR/schema2.sql"
check_eq "2: rows unchanged by the second application" "$all_before" "$(rows_md5 "")"

# ---- 3: outboxd on the migrated outbox ------------------------------------------
OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=0 OB_POLL_INTERVAL=200 outbox_conf_write "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"
none_pending() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")" = 0 ]; }
wait_until 30 "every pending row sent" none_pending || true
check_eq "3: the old pending rows sent" "$PENDING" \
	"$(sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND (ordering_key LIKE 'mig-%')")"
check_eq "3: sent and failed rows of the old release untouched" "$done_before" \
	"$(rows_md5 "WHERE ordering_key LIKE 'done-%' OR ordering_key LIKE 'dead-%'")"
check_eq "3: rows failed" 2 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"
# Per key, each row was published only after the one before it was
# acknowledged: sent_at follows seq.
check_eq "3: rows of a key sent out of their order" 0 \
	"$(sql "SELECT count(*) FROM outbox a JOIN outbox b ON a.ordering_key = b.ordering_key
		AND (a.payload->>'seq')::int < (b.payload->>'seq')::int
		WHERE a.ordering_key LIKE 'mig-%' AND a.sent_at >= b.sent_at")"
sqs_take "$QUEUE_URL" "$PENDING" "$T_DIR/queue.jsonl"
check_eq "3: messages on the queue" "$PENDING" "$(wc -l <"$T_DIR/queue.jsonl")"
sql "SELECT payload::text FROM outbox WHERE ordering_key LIKE 'mig-%' ORDER BY 1" >"$T_DIR/want.bodies"
jq -r .Body "$T_DIR/queue.jsonl" | LC_ALL=C sort >"$T_DIR/got.bodies"
LC_ALL=C sort -o "$T_DIR/want.bodies" "$T_DIR/want.bodies"
check "3: each pending row's payload arrived exactly once (none lost, none twice)" \
	diff -u "$T_DIR/want.bodies" "$T_DIR/got.bodies"
check "3: every message has EventType = test.migrate and no other attribute" \
	jq_ok -s 'all(.MessageAttributes == {EventType: {DataType: "String", StringValue: "test.migrate"}})' "$T_DIR/queue.jsonl"
sleep 1
check_eq "3: nothing more on the queue (visible + in flight)" "0+0" "$(queue_in_queue)"
check_eq "3: dead-letter queue empty" 0 "$(sqs_attr "$SQS_ENDPOINT" "$DLQ_URL" ApproximateNumberOfMessages)"

# ---- 4: the migrated table and headers ------------------------------------------
sql "INSERT INTO outbox (event_type, ordering_key, payload, headers)
	VALUES ('test.migrate', 'new-1', '{\"new\": 1}', '{\"traceparent\": \"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}')" >/dev/null
out=$(sql "INSERT INTO outbox (event_type, ordering_key, payload, headers)
	VALUES ('test.migrate', 'new-2', '{\"new\": 2}', '{\"Connection\": \"close\"}')" 2>&1 || true)
check "4: a header that breaks a rule is refused" grep -qF 'outbox.headers: header "Connection" is reserved (hop-by-hop)' <<<"$out"
sqs_take "$QUEUE_URL" 1 "$T_DIR/new.jsonl"
check "4: the row with headers arrived with its traceparent" \
	jq_ok '.MessageAttributes.traceparent.StringValue == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"' "$T_DIR/new.jsonl"
