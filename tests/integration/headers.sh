#!/usr/bin/env bash
# headers.sh -- a row's headers (outbox(7), HEADERS; issue 26, items 1 and
# 4): refused by the schema when they break a rule, refused again by the
# relay for rows the schema did not check, and delivered byte for byte as
# SQS String message attributes and as webhook request headers.  Two
# destinations: the default (the stack's SQS queue, from sqs {}) and
# "hook", a webhook (tests/lib/webhook-receiver.py, which records each
# header's bytes as they came).  Consumers are off: the test reads the
# queue itself.
#   1. Every rule refused at INSERT (and an UPDATE that sets headers) with
#      SQLSTATE 23514 and the message that names it; the boundaries (9
#      headers, a 256-character name, a 4096-byte value, 8192 bytes in
#      all) are accepted.  A transaction whose insert was refused loses
#      its own rows and nothing else: one left open across the refusals,
#      and the rows before and after, are delivered.
#   2. traceparent, tracestate, baggage and non-ASCII values (Latin-1
#      range, CJK, an emoji, a tab) reach the queue as String attributes
#      beside EventType, and the webhook as request headers, byte for
#      byte, the names' case kept; the body is payload::text.
#   3. Rows the schema did not check (its trigger disabled): headers that
#      are no object, a number value, an AWS. name, 10 headers (SQS),
#      Host, a CR LF value and a value with a space at its end (webhook),
#      in one transaction with good rows: each bad row is failed after
#      one attempt with the rule in last_error, nothing of it is sent
#      (no such message, no such request, no injected header), the good
#      rows of the same batches are delivered, the webhook sink logs no
#      failed delivery for them, and no value reaches the log.
#   4. relay.max_message_size counts the headers: a payload that fits
#      alone but not with its headers is failed for good with the sizes in
#      last_error; the same payload without headers is sent.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/sqs-take.sh"
# jq_ok ARGS... FILE -- jq -e, quietly: true when the filter yields true
# on FILE, which must not be empty (jq 1.6 -e is true on no input)
jq_ok() { [ -s "${!#}" ] && jq -e "$@" >/dev/null; }
test_init
need_binaries
stack_up
webhook_receiver_start

MAX_MSG=16384
CONF=$T_DIR/outbox.conf
OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=0 OB_POLL_INTERVAL=200 \
	OB_EXTRA_RELAY="max_message_size = $MAX_MSG
	max_attempts = 5
	backoff_base = 100
	backoff_max = 400" \
	OB_EXTRA_TOP="destination hook {
	sink = \"http\"
	url = \"$WH/hooks\"
	secret = \"$SECRET\"
	timeout = 2000
}" outbox_conf_write "$CONF"
outboxd_start "$CONF"

rep() { head -c "$2" /dev/zero | tr '\0' "$1"; }

# ins KEY DEST HEADERS [PAYLOAD] -- one row (DEST "" = the default,
# HEADERS "" = NULL) in its own transaction; prints its id
ins() {
	local p=${4:-}
	[ -n "$p" ] || p=$(jq -nc --arg k "$1" '{key: $k, "b": 1, "a": [1, 2]}')
	psql -X -v ON_ERROR_STOP=1 -qAt -v key="$1" -v dest="$2" -v h="$3" -v p="$p" <<'SQL'
INSERT INTO outbox (event_type, ordering_key, payload, destination, headers)
VALUES ('test.headers', :'key', :'p', NULLIF(:'dest', ''), NULLIF(:'h', '')::jsonb)
RETURNING id;
SQL
}

# refuse LABEL HEADERS MESSAGE -- an INSERT with HEADERS fails with
# SQLSTATE 23514 and "outbox.headers: MESSAGE"
refuse() {
	local out rc=0
	out=$(psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -qAt -v h="$2" 2>&1 <<'SQL'
INSERT INTO outbox (event_type, ordering_key, payload, headers)
VALUES ('test.refused', 'refused', '{}', :'h');
SQL
) || rc=$?
	if [ "$rc" != 0 ] && grep -qxF "ERROR:  23514: outbox.headers: $3" <<<"$out"; then
		pass "1: refused: $1"
	else
		fail "1: $1: expected exit != 0 and 'ERROR:  23514: outbox.headers: $3', got exit $rc: $out"
	fi
}

none_pending() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")" = 0 ]; }

# ---- 1: the rules, at insert ---------------------------------------------------
before=$(ins before-1 "" '{"x-seq": "before"}')
# A transaction of another session, open while the refusals happen.
psql -X -v ON_ERROR_STOP=1 -qAt >"$T_DIR/open.out" 2>&1 <<'SQL' &
BEGIN;
INSERT INTO outbox (event_type, ordering_key, payload, headers)
VALUES ('test.headers', 'open-1', '{"open": 1}', '{"x-seq": "open-1"}');
SELECT pg_sleep(2);
INSERT INTO outbox (event_type, ordering_key, payload, destination, headers)
VALUES ('test.headers', 'open-2', '{"open": 2}', 'hook', '{"x-seq": "open-2"}');
COMMIT;
SQL
open_pid=$!

refuse "not an object" '["traceparent"]' 'must be NULL or a JSON object, not an array'
refuse "a string" '"traceparent"' 'must be NULL or a JSON object, not a string'
refuse "JSON null" 'null' 'must be SQL NULL or a JSON object, not JSON null'
ten=$(jq -nc '[range(1; 10) | {key: "h\(.)", value: "v"}] | from_entries')
refuse "9 headers" "$ten" '9 headers, at most 8 (SQS and SNS take 10 message attributes; EventType is one, Outbox-Replay on a replay another)'
refuse "a number value" '{"retries": 3}' 'header "retries" is a number, not a string'
refuse "an object value" '{"ctx": {"a": "b"}}' 'header "ctx" is an object, not a string'
refuse "a JSON null value" '{"ctx": null}' 'header "ctx" is JSON null, not a string'
refuse "an empty name" '{"": "x"}' 'header name "" is empty'
long=$(rep n 257)
refuse "a 257-character name" "{\"$long\": \"x\"}" "header name \"$(rep n 64)\"... has 257 characters, at most 256"
refuse "a space in a name" '{"x trace": "1"}' 'header name "x trace" may hold only letters, digits, "_", "-" and "."'
refuse "a colon in a name" '{"x:y": "1"}' 'header name "x:y" may hold only letters, digits, "_", "-" and "."'
refuse "a DEL and a C1 control in a name (escaped in the message)" '{"a\u007fb\u009b": "1"}' 'header name "a\u007fb\u009b" may hold only letters, digits, "_", "-" and "."'
refuse "a non-ASCII name" '{"café": "1"}' 'header name "café" may hold only letters, digits, "_", "-" and "."'
refuse "AWS. prefix" '{"aws.traceId": "1"}' 'header name "aws.traceId" starts with "AWS." or "Amazon.", which AWS reserves'
refuse "Amazon. prefix" '{"AMAZON.x": "1"}' 'header name "AMAZON.x" starts with "AWS." or "Amazon.", which AWS reserves'
refuse "two periods" '{"a..b": "1"}' 'header name "a..b" has two periods in a row'
refuse "a leading period" '{".hidden": "1"}' 'header name ".hidden" starts or ends with "."'
refuse "a trailing period" '{"trailing.": "1"}' 'header name "trailing." starts or ends with "."'
refuse "names that differ only in case" '{"Tenant": "a", "tenant": "b"}' \
	'headers "Tenant" and "tenant" differ only in case (HTTP header names are case-insensitive)'
while read -r name why; do
	refuse "reserved $name" "{\"$name\": \"x\"}" "header \"$name\" is reserved ($why)"
done <<'EOF'
EventType set by outboxd
eventtype set by outboxd
Content-Type set by outboxd
User-Agent set by outboxd
webhook-id set by outboxd
Webhook-Timestamp set by outboxd
webhook-signature set by outboxd
X-Outbox-Event-Type set by outboxd
Outbox-Replay set by outboxd
Authorization authentication
Proxy-Authorization authentication
cookie authentication
Set-Cookie authentication
Connection hop-by-hop
keep-alive hop-by-hop
Proxy-Connection hop-by-hop
TE hop-by-hop
Trailer hop-by-hop
Transfer-Encoding hop-by-hop
Upgrade hop-by-hop
Host HTTP framing
content-length HTTP framing
Content-Encoding HTTP framing
Expect HTTP framing
EOF
refuse "an empty value" '{"x-a": ""}' 'header "x-a" is empty (SQS and SNS refuse an empty value)'
refuse "CR LF in a value" '{"x-a": "1\r\nX-Injected: yes"}' 'header "x-a" has a control character in its value (only tab is allowed)'
refuse "LF in a value" '{"x-a": "1\n2"}' 'header "x-a" has a control character in its value (only tab is allowed)'
refuse "U+0001 in a value" '{"x-a": "1\u00012"}' 'header "x-a" has a control character in its value (only tab is allowed)'
refuse "DEL in a value" '{"x-a": "1\u007f2"}' 'header "x-a" has a control character in its value (only tab is allowed)'
refuse "C1 NEL in a value" '{"x-a": "1\u00852"}' 'header "x-a" has a control character in its value (only tab is allowed)'
refuse "U+FFFF in a value" '{"x-a": "1\uffff2"}' 'header "x-a" has U+FFFE or U+FFFF in its value'
refuse "a leading space" '{"x-a": " 1"}' 'header "x-a" has a space or tab at the start or end of its value (HTTP would drop it)'
refuse "a trailing tab" '{"x-a": "1\t"}' 'header "x-a" has a space or tab at the start or end of its value (HTTP would drop it)'
refuse "a 4097-byte value" "{\"x-a\": \"$(rep v 4097)\"}" 'header "x-a" has a value of 4097 bytes, at most 4096'
refuse "8194 bytes in all" "{\"a\": \"$(rep v 4096)\", \"b\": \"$(rep v 4096)\"}" '8194 bytes of header names and values, at most 8192'
# NUL: jsonb itself cannot hold it.
out=$(psql -X -v VERBOSITY=verbose -qAt -c \
	"INSERT INTO outbox (event_type, ordering_key, payload, headers) VALUES ('test.refused', 'refused', '{}', '{\"x-a\": \"1\\u00002\"}')" 2>&1 || true)
check "1: a NUL in a value is refused by jsonb (22P05)" grep -q 'ERROR:  22P05: unsupported Unicode escape sequence' <<<"$out"
# An UPDATE that sets headers is checked too; one that does not, is not.
out=$(psql -X -v VERBOSITY=verbose -qAt -c "UPDATE outbox SET headers = '{\"Host\": \"evil.example\"}' WHERE id = $before" 2>&1 || true)
check "1: UPDATE ... SET headers refused" grep -qxF 'ERROR:  23514: outbox.headers: header "Host" is reserved (HTTP framing)' <<<"$out"
check "1: the refusal names the row (DETAIL)" grep -qxF "DETAIL:  outbox row id $before, event_type \"test.headers\"" <<<"$out"
# A transaction whose insert is refused loses its own rows too.
out=$(psql -X -v ON_ERROR_STOP=1 -qAt 2>&1 <<'SQL' || true
BEGIN;
INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('test.headers', 'same-tx', '{}');
INSERT INTO outbox (event_type, ordering_key, payload, headers) VALUES ('test.headers', 'same-tx', '{}', '{"Cookie": "s=1"}');
COMMIT;
SQL
)
check "1: the refusing transaction failed" grep -qF 'outbox.headers: header "Cookie" is reserved (authentication)' <<<"$out"
check_eq "1: rows of the refused transaction committed" 0 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'same-tx'")"
check_eq "1: refused rows in the table" 0 "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.refused'")"

wait "$open_pid" || true
check_eq "1: the transaction open across the refusals committed" 2 \
	"$(sql "SELECT count(*) FROM outbox WHERE ordering_key IN ('open-1', 'open-2')")"
after=$(ins after-1 "" '{"x-seq": "after"}')
# The boundaries: accepted.
nine=$(jq -nc '[range(1; 9) | {key: "h\(.)", value: "v\(.)"}] | from_entries')
b9=$(ins bound-9 "" "$nine")
b256=$(ins bound-256 "" "{\"$(rep N 256)\": \"$(rep v 4096)\"}")
b8192=$(ins bound-8192 hook "{\"a\": \"$(rep v 4095)\", \"b\": \"$(rep v 4095)\"}")
check_eq "1: 8 headers, a 256-character name, 4096-byte values, 8192 bytes in all: accepted" 3 \
	"$(sql "SELECT count(*) FROM outbox WHERE id IN (${b9:-0}, ${b256:-0}, ${b8192:-0})")"

# ---- 2: byte for byte ------------------------------------------------------------
HDRS=$(jq -nc '{
	traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
	baggage: "userId=alice,serverNode=DF%2028,isProduction=false",
	"X-Note": "caf\u00e9 \u00ff \u2013 \u6771\u4eac \ud83d\ude00",
	Tenant_ID: "acme\tand co"}')
q_id=$(ins bytes-sqs "" "$HDRS" '{"z": "\u00e9\u6771", "a": 1}')
h_id=$(ins bytes-hook hook "$HDRS" '{"z": "\u00e9\u6771", "a": 1}')
wait_until 30 "no row pending" none_pending || true
check_eq "1+2: rows sent (before, open-1, open-2, after, 3 boundaries, 2 byte rows)" 9 \
	"$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "1+2: rows not sent" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
# On the queue: before, open-1, after, bound-9, bound-256, bytes-sqs.
sqs_take "$QUEUE_URL" 6 "$T_DIR/q1.jsonl"
check_eq "1: messages on the queue (before, open-1, after, 2 boundaries, bytes)" 6 "$(wc -l <"$T_DIR/q1.jsonl")"
check_eq "1: x-seq attributes on the queue" "after before open-1" \
	"$(jq -r '.MessageAttributes["x-seq"].StringValue // empty' "$T_DIR/q1.jsonl" | sort | paste -sd' ')"
check "1: the 8 headers' message has EventType and h1..h8 (9 attributes)" \
	jq_ok -s --argjson h "$nine" 'map(select(.MessageAttributes.h8)) | length == 1 and
		(.[0].MessageAttributes | map_values(.StringValue)) == ($h + {EventType: "test.headers"})' "$T_DIR/q1.jsonl"
check "1: the 256-character name arrived with its 4096-byte value" \
	jq_ok -s --arg n "$(rep N 256)" --arg v "$(rep v 4096)" 'map(select(.MessageAttributes[$n].StringValue == $v)) | length == 1' "$T_DIR/q1.jsonl"
body=$(sql "SELECT payload::text FROM outbox WHERE id = $q_id")
jq -c --arg b "$body" 'select(.Body == $b)' "$T_DIR/q1.jsonl" >"$T_DIR/q-bytes.json"
check_eq "2: SQS: one message whose body is payload::text" 1 "$(wc -l <"$T_DIR/q-bytes.json")"
check "2: SQS: payload re-serialised by jsonb (keys sorted: '$body')" [ "$body" = '{"a": 1, "z": "é東"}' ]
check "2: SQS: every attribute is a String" \
	jq_ok '[.MessageAttributes[].DataType] | all(. == "String")' "$T_DIR/q-bytes.json"
check "2: SQS: attributes = the headers, byte for byte, and EventType = event_type" \
	jq_ok --argjson h "$HDRS" '(.MessageAttributes | map_values(.StringValue)) == ($h + {EventType: "test.headers"})' "$T_DIR/q-bytes.json"
# At the webhook: open-2, bound-8192, bytes-hook.
check_eq "1+2: webhook requests" 3 "$(wc -l <"$REC")"
check "2: webhook: every request signed" jq_ok -s 'all(.sig_ok)' "$REC"
jq -c --arg id "$h_id" 'select(.headers["webhook-id"] == $id)' "$REC" >"$T_DIR/h-bytes.json"
check_eq "2: webhook: one request for the row" 1 "$(wc -l <"$T_DIR/h-bytes.json")"
check "2: webhook: body = payload::text" jq_ok --arg b "$body" '.body == $b' "$T_DIR/h-bytes.json"
check "2: webhook: every header as sent, name's case and value's bytes" \
	jq_ok --argjson h "$HDRS" '. as $r | $h | to_entries |
		all(. as $e | $r.header_list | map(select(.[0] == $e.key and .[1] == ($e.value | @base64))) | length == 1)' \
	"$T_DIR/h-bytes.json"
check "2: webhook: X-Outbox-Event-Type = event_type" jq_ok '.headers["x-outbox-event-type"] == "test.headers"' "$T_DIR/h-bytes.json"
check "2: webhook: the 8192-byte headers arrived" jq_ok -s --arg v "$(rep v 4095)" \
	'map(select(.headers.a == $v and .headers.b == $v)) | length == 1' "$REC"
check "2: webhook: open-2 arrived" jq_ok -s 'map(select(.headers["x-seq"] == "open-2")) | length == 1' "$REC"

# ---- 3: rows the schema did not check --------------------------------------------
sql "ALTER TABLE outbox DISABLE TRIGGER outbox_check_headers"
psql -X -v ON_ERROR_STOP=1 -qAt -v ten="$ten" >/dev/null <<'SQL'
BEGIN;
INSERT INTO outbox (event_type, ordering_key, payload, destination, headers) VALUES
	('test.headers', 'good-q1', '{"good": 1}', NULL, '{"x-good": "1"}'),
	('test.headers', 'bad-array', '{"bad": "array"}', NULL, '["x"]'),
	('test.headers', 'bad-number', '{"bad": "number"}', NULL, '{"n": 1}'),
	('test.headers', 'good-q2', '{"good": 2}', NULL, '{"x-good": "2"}'),
	('test.headers', 'bad-aws', '{"bad": "aws"}', NULL, '{"AWS.trace": "1"}'),
	('test.headers', 'bad-ten', '{"bad": "ten"}', NULL, :'ten'),
	('test.headers', 'good-q3', '{"good": 3}', NULL, NULL),
	('test.headers', 'good-h1', '{"good": 4}', 'hook', '{"x-good": "4"}'),
	('test.headers', 'bad-host', '{"bad": "host"}', 'hook', '{"Host": "evil.example"}'),
	('test.headers', 'bad-crlf', '{"bad": "crlf"}', 'hook', '{"x-a": "1\r\nX-Injected: yes"}'),
	('test.headers', 'good-h2', '{"good": 5}', 'hook', '{"x-good": "5"}'),
	('test.headers', 'bad-space', '{"bad": "space"}', 'hook', '{"x-a": "secret-ish value "}');
COMMIT;
SQL
sql "ALTER TABLE outbox ENABLE TRIGGER outbox_check_headers"
wait_until 30 "no row pending" none_pending || true
check_eq "3: good rows sent" "good-h1 good-h2 good-q1 good-q2 good-q3" \
	"$(sql "SELECT string_agg(ordering_key, ' ' ORDER BY ordering_key) FROM outbox WHERE ordering_key LIKE 'good-%' AND status = 'sent'")"
sql "SELECT ordering_key || '|' || status || '|' || attempts || '|' || coalesce(last_error, '')
	FROM outbox WHERE ordering_key LIKE 'bad-%' ORDER BY ordering_key" >"$T_DIR/bad.rows"
sed 's/^/    /' "$T_DIR/bad.rows"
while IFS='|' read -r key err; do
	check_eq "3: $key failed after one attempt with the rule" "$key|failed|1|$err" \
		"$(grep "^$key|" "$T_DIR/bad.rows" || true)"
done <<'EOF'
bad-array|headers: not a JSON object whose values are strings
bad-aws|headers: header name "AWS.trace" starts with "AWS." or "Amazon.", which AWS reserves
bad-crlf|headers: header "x-a" has a control character in its value (only tab is allowed)
bad-host|headers: header "Host" is reserved (HTTP framing)
bad-number|headers: not a JSON object whose values are strings
bad-space|headers: header "x-a" has a space or tab at the start or end of its value (HTTP would drop it)
bad-ten|headers: 9 headers, at most 8 (SQS and SNS take 10 message attributes; EventType is one, Outbox-Replay on a replay another)
EOF
sqs_take "$QUEUE_URL" 3 "$T_DIR/q3.jsonl"
check_eq "3: messages on the queue: the good ones only" '{"good": 1} {"good": 2} {"good": 3}' \
	"$(jq -r .Body "$T_DIR/q3.jsonl" | sort | paste -sd' ')"
check_eq "3: the queue is empty after them (visible + in flight)" "0+0" "$(queue_in_queue)"
check_eq "3: webhook requests: the good ones only" '{"good": 4} {"good": 5}' \
	"$(jq -r .body "$REC" | tail -n +4 | sort | paste -sd' ')"
check_eq "3: requests with an injected header" 0 "$(jq -s 'map(select(.headers["x-injected"])) | length' "$REC")"
check "3: the relay logged the permanent failure with the rule" \
	grep -qF 'publish failed after 1 attempt(s) (permanent error): headers: header \"Host\" is reserved (HTTP framing)' "$OUTBOXD_LOG"
check "3: ... and the row's key and destination" \
	grep -qE 'publish failed after 1 attempt\(s\) \(permanent error\): headers: header \\"Host\\".* ordering_key=bad-host destination=hook( |$)' "$OUTBOXD_LOG"
# Every request the webhook got was answered 200: the rows the relay
# refused are its own line each, not failed deliveries.
check_eq "3: webhook lines about failed deliveries" 0 "$(grep -c 'deliveries failed' "$OUTBOXD_LOG" || true)"
check_eq "3: header values in the log" 0 "$(grep -cE 'evil\.example|X-Injected|secret-ish' "$OUTBOXD_LOG" || true)"

# ---- 4: max_message_size counts the headers --------------------------------------
pad=$(jq -nc --arg p "$(rep p 10000)" '{pad: $p}')
big_h=$(ins big-with-headers "" "{\"a\": \"$(rep v 3500)\", \"b\": \"$(rep v 3500)\"}" "$pad")
big=$(ins big-alone "" "" "$pad")
wait_until 30 "no row pending" none_pending || true
# payload::text + event type + "EventType" + "String" + each header's
# name, "String" and value
want=$(sql "SELECT octet_length(payload::text) + octet_length(event_type) + 15 + 2 * (1 + 6 + 3500)
	FROM outbox WHERE id = $big_h")
check_eq "4: payload + headers over max_message_size: failed after one attempt" \
	"failed|1|message of $want bytes exceeds relay.max_message_size ($MAX_MSG bytes)" \
	"$(sql "SELECT status || '|' || attempts || '|' || last_error FROM outbox WHERE id = $big_h")"
check_eq "4: the same payload without headers: sent" sent "$(sql "SELECT status FROM outbox WHERE id = $big")"
sqs_take "$QUEUE_URL" 1 "$T_DIR/q4.jsonl"
check_eq "4: on the queue: only the one without headers (md5 of the body)" \
	"$(sql "SELECT md5(payload::text) FROM outbox WHERE id = $big")" \
	"$(jq -r .Body "$T_DIR/q4.jsonl" | tr -d '\n' | md5sum | cut -d' ' -f1)"
check_eq "4: the queue is empty after it" "0+0" "$(queue_in_queue)"
