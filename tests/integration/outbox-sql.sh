#!/usr/bin/env bash
# outbox-sql.sh -- the SQL contract for applications as outbox(7) shows it
# (issue 26, item 1): its two examples, doc/examples/outbox-insert.sql
# (psql) and doc/examples/outbox-insert.py (Python, psycopg2), run as they
# are, with their business change (an invoices table of the test's).
#   1. man/outbox.7 shows both files verbatim.
#   2. The psql example: the invoice updated and its event on the default
#      destination (the stack's queue); the Python example: the same, to
#      the destination "billing" (a second queue).  Each message's body is
#      payload::text (as the page shows it), its attributes exactly
#      EventType = event_type and the row's headers.
#   3. What the page says of a refused header from Python:
#      psycopg2.errors.CheckViolation (23514) with diag.message_primary the
#      rule and diag.column_name "headers", and the transaction's business
#      change rolled back with it.  The page's status query answers.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/sqs-take.sh"
test_init
need_binaries
stack_up
EX=$T_ROOT/doc/examples
PAGE=$T_ROOT/man/outbox.7
# jq_ok ARGS... FILE -- jq -e, quietly: true when the filter yields true
# on FILE, which must not be empty (jq 1.6 -e is true on no input)
jq_ok() { [ -s "${!#}" ] && jq -e "$@" >/dev/null; }

# ---- 1: the page shows the files ------------------------------------------------
# page_example FILE -- the literal display after the page's comment
# '.\" doc/examples/FILE, verbatim', roff escapes undone
page_example() {
	awk -v mark=".\\\\\" doc/examples/$1, verbatim" '
		$0 == mark { found = 1; next }
		found == 1 && /^\.Bd -literal/ { found = 2; next }
		found == 2 && /^\.Ed$/ { exit }
		found == 2 { gsub(/\\&/, ""); gsub(/\\e/, "\\"); print }
	' "$PAGE"
}
for f in outbox-insert.sql outbox-insert.py; do
	page_example "$f" >"$T_DIR/page.$f"
	check "1: outbox(7) shows doc/examples/$f verbatim" diff -u "$EX/$f" "$T_DIR/page.$f"
done

# ---- 2: the examples, run ----------------------------------------------------------
BILLING_URL=$(aws_call sqs "$SQS_ENDPOINT" CreateQueue '{"QueueName":"billing-events"}' | jq -er .QueueUrl) ||
	die "CreateQueue billing-events failed"
OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=0 OB_POLL_INTERVAL=200 OB_EXTRA_TOP="destination billing {
	sink = \"sqs\"
	queue_url = \"$BILLING_URL\"
}" outbox_conf_write "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"
sql "CREATE TABLE invoices (id text PRIMARY KEY, paid_at timestamptz);
	INSERT INTO invoices (id) VALUES ('inv-1001'), ('inv-1002'), ('inv-1003')"

(cd "$EX" && psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -f outbox-insert.sql) >"$T_DIR/sql.out" 2>&1
check_eq "2: psql example: output" "BEGIN UPDATE 1 INSERT 0 1 COMMIT" "$(paste -sd' ' "$T_DIR/sql.out")"
out=$(cd "$EX" && DATABASE_URL=$DATABASE_URL /usr/bin/python3 outbox-insert.py 2>&1) || fail "2: python example exited non-zero: $out"
py_id=$(sed -n 's/^outbox row \([0-9][0-9]*\)$/\1/p' <<<"$out")
check "2: python example printed its outbox row ('$out')" [ -n "$py_id" ]
check_eq "2: both invoices paid" "inv-1001 inv-1002" \
	"$(sql "SELECT string_agg(id, ' ' ORDER BY id) FROM invoices WHERE paid_at IS NOT NULL")"
check_eq "2: the rows as written (key, destination, headers)" \
	'inv-1001||{"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} inv-1002|billing|{"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}' \
	"$(sql "SELECT string_agg(ordering_key || '|' || coalesce(destination, '') || '|' || headers::text, ' ' ORDER BY id) FROM outbox")"
check_eq "2: the python example's row is inv-1002" inv-1002 "$(sql "SELECT ordering_key FROM outbox WHERE id = ${py_id:-0}")"
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" = 2 ]; }
wait_until 30 "both rows sent" all_sent || true
check_eq "2: rows sent" 2 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"

ATTRS='{"EventType": "invoice.paid", "tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'
sqs_take "$QUEUE_URL" 1 "$T_DIR/default.jsonl"
sqs_take "$BILLING_URL" 1 "$T_DIR/billing.jsonl"
check_eq "2: psql example: one message on the default destination's queue" 1 "$(wc -l <"$T_DIR/default.jsonl")"
check_eq "2: psql example: body = payload::text, as outbox(7) shows it" \
	'{"invoiceId": "inv-1001", "amountCents": 4999}' "$(jq -r .Body "$T_DIR/default.jsonl")"
check_eq "2: psql example: the page's body is payload::text" \
	'{"invoiceId": "inv-1001", "amountCents": 4999}' "$(sql "SELECT payload::text FROM outbox WHERE ordering_key = 'inv-1001'")"
check "2: psql example: String attributes EventType, traceparent, tenant and no other" \
	jq_ok --argjson a "$ATTRS" '(.MessageAttributes | map_values(select(.DataType == "String") | .StringValue)) == $a' "$T_DIR/default.jsonl"
check_eq "2: python example: one message on billing's queue" 1 "$(wc -l <"$T_DIR/billing.jsonl")"
check_eq "2: python example: body = payload::text" \
	"$(sql "SELECT payload::text FROM outbox WHERE id = ${py_id:-0}")" "$(jq -r .Body "$T_DIR/billing.jsonl")"
check "2: python example: String attributes EventType, traceparent, tenant and no other" \
	jq_ok --argjson a "$ATTRS" '(.MessageAttributes | map_values(select(.DataType == "String") | .StringValue)) == $a' "$T_DIR/billing.jsonl"
sleep 1
check_eq "2: nothing more on the default queue" "0+0" "$(queue_in_queue)"
check_eq "2: nothing more on billing's queue" 0 "$(sqs_attr "$SQS_ENDPOINT" "$BILLING_URL" ApproximateNumberOfMessages)"

# ---- 3: a refused header, from Python, and the status query ----------------------------
out=$(DATABASE_URL=$DATABASE_URL /usr/bin/python3 - 2>&1 <<'PY'
import os
import psycopg2
from psycopg2.extras import Json

conn = psycopg2.connect(os.environ["DATABASE_URL"])
try:
    with conn:
        with conn.cursor() as cur:
            cur.execute("UPDATE invoices SET paid_at = now() WHERE id = 'inv-1003'")
            cur.execute("INSERT INTO outbox (event_type, ordering_key, payload, headers)"
                        " VALUES ('invoice.paid', 'inv-1003', %s, %s)",
                        (Json({"invoiceId": "inv-1003"}), Json({"Authorization": "Bearer t0ken"})))
    print("inserted")
except psycopg2.errors.CheckViolation as e:
    print("%s|%s|%s" % (e.pgcode, e.diag.message_primary, e.diag.column_name))
conn.close()
PY
)
check_eq "3: psycopg2.errors.CheckViolation: code, message, column" \
	'23514|outbox.headers: header "Authorization" is reserved (authentication)|headers' "$out"
check_eq "3: the transaction's business change rolled back" "" \
	"$(sql "SELECT paid_at FROM invoices WHERE id = 'inv-1003'")"
check_eq "3: no row for it" 0 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'inv-1003'")"
page_query=$(awk '/^What became of a row:$/ { f = 1; next } f && /^\.Bd/ { f = 2; next } f == 2 && /^\.Ed$/ { exit } f == 2' "$PAGE")
check_eq "3: the page's status query" "$(sql "SELECT id FROM outbox WHERE ordering_key = 'inv-1001'")|sent|1|" \
	"$(sql "$page_query")"

# 4: a destination no outbox.conf can name is refused at the INSERT, by a
# message that shows neither the row's headers nor its payload (a CHECK
# constraint's would: "Failing row contains (...)").
long_dest=$(printf 'd%.0s' $(seq 65))
while IFS='|' read -r bad shown; do
	out=$(sql "INSERT INTO outbox (event_type, ordering_key, payload, destination, headers)
		VALUES ('t.x', 'k-bad', '{\"card\": \"pay-s3cret\"}', $bad, '{\"x-token\": \"hdr-s3cret\"}')" 2>&1 || true)
	check "4: destination $bad refused, naming the rule" \
		grep -qF "ERROR:  outbox.destination: $shown is not a destination name (1 to 64 of A-Z a-z 0-9 _ . -)" <<<"$out"
	check "4: destination $bad: neither payload nor header value in the error" \
		bash -c '! grep -q "s3cret\|Failing row" <<<"$1"' _ "$out"
done <<BADNAMES
''|""
'bad name'|"bad name"
'$long_dest'|"$(printf 'd%.0s' $(seq 64))"...
'evil"q'|"evil\"q"
E'del\\x7fc1\\u009bx'|"del\\u007fc1\\u009bx"
BADNAMES
check_eq "4: the error's SQLSTATE and column" "23514|destination" \
	"$(psql -X -q -At -v VERBOSITY=verbose -c "INSERT INTO outbox (event_type, ordering_key, payload, destination)
		VALUES ('t.x', 'k-bad', '{}', 'a b')" 2>&1 | sed -n 's/^ERROR:  \([0-9A-Z]*\):.*/\1/p; s/^COLUMN NAME:  //p' | paste -sd'|')"
out=$(sql "INSERT INTO outbox (event_type, ordering_key, payload, headers)
	VALUES ('', 'k-bad', '{}', '{\"x-token\": \"hdr-s3cret\"}')" 2>&1 || true)
check "4: an empty event_type refused, naming the column" \
	grep -qF "ERROR:  outbox.event_type: is empty (it becomes the EventType attribute, which SQS and SNS refuse empty)" <<<"$out"
check "4: ... without the row's header value" bash -c '! grep -q "s3cret" <<<"$1"' _ "$out"
check_eq "4: none of them inserted" 0 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'k-bad'")"
check_eq "4: a name of 64 characters of the allowed ones is accepted" 1 \
	"$(sql "INSERT INTO outbox (event_type, ordering_key, payload, destination)
		VALUES ('t.x', 'k-ok', '{}', 'Orders.v1-' || repeat('x', 54)) RETURNING 1")"
sql "DELETE FROM outbox WHERE ordering_key = 'k-ok'" >/dev/null
