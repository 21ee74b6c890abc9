#!/usr/bin/env bash
# pubsub.sh -- destinations of sink = "pubsub", against a strict loopback
# stand-in for Google Cloud Pub/Sub, its token endpoint and the metadata
# server (tests/lib/pubsub-standin.py; no emulator is installable here).
#   1. A service-account key made with openssl now; tokens of 3 s.  300
#      events over ~6 s to two Pub/Sub topics (one with ordering) and the
#      SQS queue at once, with headers: each in its place once, data (SQS:
#      body) and attributes byte-identical on all three, per-key order on
#      the ordering topic, orderingKey only there; the load spans token
#      expiries: no request refused.
#   2. At the same time, from the start: a third topic fails 500, then
#      429, then UNAVAILABLE for ~21 s: retried, and per row: sent, tried
#      more than once, accepted by the stand-in exactly once.
#   3. Inside that outage too: a missing topic: its rows failed with
#      Google's NOT_FOUND message, the other destinations unaffected, the
#      later rows of a failed row's ordering key held back unsent (the
#      "paused" key); redrive after the topic exists delivers them, the
#      held rows after it in order.
#   4. The metadata server (no key file): events delivered; an idle
#      relay's token is renewed by its timer, before any publish needs it.
#   5. PUBSUB_EMULATOR_HOST: delivered without an Authorization header;
#      this is outbox.conf(5)'s worked example, run as written there.
# Parts 1 to 3 overlap (one outboxd, the outage on its own topic), so that
# the outage's 21 s are the whole wait of all three.
# Neither key, assertion nor token appears in any log outboxd wrote, its
# -t output, the metrics page or a row's last_error.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/sqs-take.sh"
. "$T_LIB/pubsub-lib.sh"
test_init
need_binaries
stack_up

EMAIL=relay@outboxd-test.iam.gserviceaccount.com
pubsub_key
REC=$T_DIR/pubsub.jsonl
proxy_start pubsub pubsub-standin.py --record "$REC" --pubkey "$T_DIR/sa.pub" \
	--client-email "$EMAIL" --token-ttl 3 --topic test-proj/orders --topic test-proj/audit \
	--topic test-proj/flaky
PS=http://127.0.0.1:$PROXY_PORT
jq -n --arg k "$(cat "$T_DIR/sa.pem")" --arg e "$EMAIL" --arg u "$PS/token" \
	'{type:"service_account", project_id:"test-proj", private_key_id:"k1",
	  private_key:$k, client_email:$e, token_uri:$u}' >"$T_DIR/sa.json"
chmod 0600 "$T_DIR/sa.json"

OB_POLL_INTERVAL=200 pubsub_conf "$T_DIR/outbox.conf" "$PS"
cat >>"$T_DIR/outbox.conf" <<CONF

destination ghost {
	sink = "pubsub"
	project = "test-proj"
	topic = "ghost"
	ordering = true
}

destination flaky {
	sink = "pubsub"
	project = "test-proj"
	topic = "flaky"
	timeout = 3000
}
CONF
export GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/sa.json
unset PUBSUB_EMULATOR_HOST GCE_METADATA_HOST
"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t.out" 2>&1 || true
check "outboxd -t names the service account and its key file" grep -qxF \
	"Google credentials: service account $EMAIL, tokens from $PS/token (GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/sa.json)" "$T_DIR/t.out"
outboxd_start "$T_DIR/outbox.conf"

# 2. ~21 s of failures on the flaky topic: 500, 429, UNAVAILABLE, in the
# background while parts 1 and 3 run.
faults() {
	local mode
	for mode in 500 429 UNAVAILABLE; do
		curl -fsS -o /dev/null -X POST "$PS/__control" \
			--data-binary "{\"fail\": {\"mode\": \"$mode\", \"seconds\": 7, \"topic\": \"test-proj/flaky\"}}"
		sql "INSERT INTO outbox (event_type, ordering_key, payload, destination)
			SELECT 'ps.fault', 'f-$mode-' || i, json_build_object('mode', '$mode', 'n', i), 'flaky' FROM generate_series(1, 10) i"
		sleep 7
	done
}
faults >"$T_DIR/faults.out" 2>&1 &
FAULTS=$!
on_exit "kill $FAULTS 2>/dev/null || true"

# 1. 300 rows over ~6 s: 100 per destination, keys k0..k9, headers.
say "writing 300 rows over ~6 s"
{
	for i in $(seq 1 100); do
		k=$((i % 10))
		printf "BEGIN;\n"
		printf "INSERT INTO outbox (event_type, ordering_key, payload, destination, headers) VALUES ('ps.event', 'k%d', '{\"seq\": %d, \"s\": \"\\u00e9\"}', 'orders', '{\"tenant\": \"t%d\", \"trace-id\": \"o-%d\"}');\n" "$k" "$i" "$k" "$i"
		printf "INSERT INTO outbox (event_type, ordering_key, payload, destination, headers) VALUES ('ps.audit', 'a%d', '{\"seq\": %d}', 'audit', '{\"who\": \"w\\u00e9 %d\", \"note\": \"x=1; y=\\\\\\\"2\\\\\\\"\"}');\n" "$k" "$i" "$i"
		printf "INSERT INTO outbox (event_type, ordering_key, payload, headers) VALUES ('ps.sqs', 'q%d', '{\"seq\": %d}', '{\"src\": \"q\", \"trace-id\": \"q-%d\\u00e9\"}');\n" "$k" "$i" "$i"
		printf "COMMIT;\nSELECT pg_sleep(0.06);\n"
	done
} >"$T_DIR/writer.sql"
psql -X -v ON_ERROR_STOP=1 -qAt -f "$T_DIR/writer.sql" >"$T_DIR/writer.out" 2>&1 || die "writer failed"
# $1 rows of $2 (a destination, or "load": the first part's) sent
_nsent() {
	if [ "$1" = load ]; then
		sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND event_type IN ('ps.event', 'ps.audit', 'ps.sqs')"
	else
		sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND destination = '$1'"
	fi
}
_sent() { [ "$(_nsent "$2")" = "$1" ]; }
wait_until 30 "300 rows sent" _sent 300 load || true
check_eq "rows sent" 300 "$(_nsent load)"
check_eq "publish requests refused (401)" 0 "$(jq -s '[.[] | select(.status == 401)] | length' "$REC")"
check "tokens were fetched again as they expired (>= 3)" \
	test "$(jq .tokens "$T_DIR/pubsub.stats")" -ge 3
check_eq "orders topic: messages" 100 "$(jq -s '[.[] | select(.topic == "test-proj/orders") | .messages[]] | length' "$REC")"
check_eq "audit topic: messages" 100 "$(jq -s '[.[] | select(.topic == "test-proj/audit") | .messages[]] | length' "$REC")"
# data, attributes and orderingKey (null where none is sent) of a
# topic's messages against its rows, byte for byte: _want DEST KEYED
_want() {
	sql "SELECT json_build_object('d', encode(convert_to(payload::text, 'UTF8'), 'base64'), 'a', headers::jsonb || jsonb_build_object('EventType', event_type), 'k', CASE WHEN $2 THEN ordering_key END)
		FROM outbox WHERE destination = '$1' ORDER BY id" | jq -cS '{d: (.d | gsub("\n"; "")), a, k}' | sort
}
_got() {
	jq -cS --arg t "test-proj/$1" 'select(.topic == $t) | .messages[] | {d: .data, a: .attributes, k: .orderingKey}' "$REC" | sort
}
_want orders true >"$T_DIR/want-orders"
_got orders >"$T_DIR/got-orders"
check "orders: data, attributes and orderingKey as the rows have them" cmp -s "$T_DIR/want-orders" "$T_DIR/got-orders"
_want audit false >"$T_DIR/want-audit"
_got audit >"$T_DIR/got-audit"
check "audit: data and attributes as the rows have them, no orderingKey" cmp -s "$T_DIR/want-audit" "$T_DIR/got-audit"
jq -r '.messages[] | select(.orderingKey != null) | "\(.orderingKey) \(.data | @base64d | fromjson | .seq)"' "$REC" >"$T_DIR/order-seq"
inv=$(awk '{ if (($1 in last) && $2 < last[$1]) n++; last[$1] = $2 } END { print n + 0 }' "$T_DIR/order-seq")
check_eq "per-key order inversions on the ordering topic" 0 "$inv"
sqs_take "$QUEUE_URL" 100 "$T_DIR/q.jsonl"
check_eq "SQS: messages" 100 "$(wc -l <"$T_DIR/q.jsonl")"
sql "SELECT json_build_object('b', payload::text, 'a', headers::jsonb || jsonb_build_object('EventType', event_type))
	FROM outbox WHERE destination IS NULL ORDER BY id" | jq -cS . | sort >"$T_DIR/want-sqs"
jq -cS '{b: .Body, a: (.MessageAttributes | map_values(if .DataType == "String" then .StringValue else "not String: \(.DataType)" end))}' \
	"$T_DIR/q.jsonl" | sort >"$T_DIR/got-sqs"
check "SQS: bodies and String attributes as the rows have them" cmp -s "$T_DIR/want-sqs" "$T_DIR/got-sqs"

check "the flaky topic's outage was still on after the load" kill -0 "$FAULTS"

# 3. A missing topic, then redrive, while the flaky topic fails.
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination)
	SELECT 'ps.ghost', 'g' || i, json_build_object('n', i), 'ghost' FROM generate_series(1, 5) i"
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination) VALUES ('ps.ok', 'x', '{}', 'audit')"
# Pub/Sub's paused ordering key: g1's later rows wait, unsent, while g1
# fails and once it has failed; its redrive resumes them, in order.
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination)
	SELECT 'ps.ghost-later', 'g1', json_build_object('later', i), 'ghost' FROM generate_series(1, 2) i"
_failed() { [ "$(sql "SELECT count(*) FROM outbox WHERE destination = 'ghost' AND status = 'failed'")" = 5 ]; }
wait_until 15 "ghost rows failed" _failed || true
check_eq "ghost rows failed" 5 "$(sql "SELECT count(*) FROM outbox WHERE destination = 'ghost' AND status = 'failed'")"
check "last_error holds Google's message" \
	test "$(sql "SELECT count(*) FROM outbox WHERE destination = 'ghost' AND last_error LIKE '%NOT_FOUND%Resource not found (resource=ghost)%'")" = 5
# Five poll intervals for a relay to (wrongly) take them; the outage
# lasts longer, so this costs no time.
sleep 1
check_eq "g1's later rows held back, never tried, while g1 is failed" "pending 0|pending 0" \
	"$(sql "SELECT string_agg(status || ' ' || attempts, '|' ORDER BY id) FROM outbox WHERE event_type = 'ps.ghost-later'")"
check_eq "the audit row beside them sent" 1 "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'ps.ok' AND status = 'sent'")"
curl -fsS -o /dev/null -X POST "$PS/__control" --data-binary '{"create": "test-proj/ghost"}'
for id in $(sql "SELECT id FROM outbox WHERE destination = 'ghost' AND status = 'failed'"); do
	"$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" redrive "$id" >>"$T_DIR/redrive.out" 2>&1 || fail "outboxctl redrive $id"
done
_ghost_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE destination = 'ghost' AND status = 'sent'")" = 7 ]; }
wait_until 15 "redriven rows sent" _ghost_sent || true
check_eq "redriven ghost rows sent, and g1's later rows after them" 7 "$(sql "SELECT count(*) FROM outbox WHERE destination = 'ghost' AND status = 'sent'")"
check_eq "the ghost topic's g1 messages in order: the redriven one, then the later ones" '{"n":1} {"later":1} {"later":2}' \
	"$(jq -r 'select(.topic == "test-proj/ghost" and .status == 200) | .messages[] | select(.orderingKey == "g1") | .data | @base64d' "$REC" | jq -c . | paste -sd ' ')"
check "the ghost rows failed and were redriven while the flaky topic failed" kill -0 "$FAULTS"

# 2, the end: the outage is over; every flaky row delivered once.
wait "$FAULTS" || fail "the fault sequence failed: $(cat "$T_DIR/faults.out")"
wait_until 20 "30 rows sent after the failures" _sent 30 flaky || true
check_eq "rows sent after 500/429/UNAVAILABLE" 30 "$(_nsent flaky)"
check "requests were refused meanwhile (500, 429, 503)" \
	test "$(jq -s '[.[] | select(.topic == "test-proj/flaky" and (.status == 500 or .status == 429 or .status == 503))] | length' "$REC")" -ge 3
check "each of 500, 429 and 503 was answered" \
	test "$(jq -s '[.[] | select(.topic == "test-proj/flaky") | .status | select(. != 200)] | unique' -c "$REC")" = "[429,500,503]"
check_eq "messages accepted" 30 "$(jq -s '[.[] | select(.topic == "test-proj/flaky") | .messages[]] | length' "$REC")"
# Per row: sent, tried more than once (the outage refused its first
# try), and its data accepted exactly once.
jq -r 'select(.topic == "test-proj/flaky") | .messages[].data' "$REC" | sort | uniq -c >"$T_DIR/accepted"
sql "SELECT id, status, attempts, encode(convert_to(payload::text, 'UTF8'), 'base64') FROM outbox WHERE destination = 'flaky' ORDER BY id" |
	awk -F'|' 'NR == FNR { n[$2] = $1; next }
		{ if ($2 != "sent" || $3 < 2 || n[$4] != 1) { bad++; print "row " $1 ": " $2 ", " $3 " attempts, accepted " n[$4] + 0 " times" } }
		END { print bad + 0 }' <(awk '{ print $1 "|" $2 }' "$T_DIR/accepted") - >"$T_DIR/once"
check_eq "rows not sent, not retried or not accepted exactly once" 0 "$(tail -n 1 "$T_DIR/once")"
curl -sS --max-time 5 "$OUTBOXD_URL/metrics" >"$T_DIR/metrics.txt" || true
add_log "$T_DIR/metrics.txt"
check "the metrics page was read" test -s "$T_DIR/metrics.txt"
outboxd_stop

# 4. The metadata server.
unset GOOGLE_APPLICATION_CREDENTIALS
export GCE_METADATA_HOST=127.0.0.1:${PS##*:}
: >"$REC"
outboxd_start "$T_DIR/outbox.conf" outboxd-meta
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination) VALUES ('ps.meta', 'm', '{\"m\": 1}', 'audit')"
_meta() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'ps.meta' AND status = 'sent'")" = 1 ]; }
wait_until 15 "sent with a metadata-server token" _meta || true
check_eq "sent with a metadata-server token" 1 "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'ps.meta' AND status = 'sent'")"
check "its request carried a bearer token" test "$(jq -r 'select(.status == 200) | .auth' "$REC" | head -1 | cut -c1-7)" = "Bearer "
# Idle for 2.5 s, most of a 3 s token's life (past the 2.25 s after
# which it is no longer sent): the relay's timer fetches the next token
# without a publish; the next row is sent with it.
tok0=$(jq .tokens "$T_DIR/pubsub.stats")
sleep 2.5
check "a token was fetched while the relay was idle" test "$(jq .tokens "$T_DIR/pubsub.stats")" -gt "$tok0"
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination) VALUES ('ps.meta', 'm', '{\"m\": 2}', 'audit')"
_meta2() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'ps.meta' AND status = 'sent'")" = 2 ]; }
wait_until 15 "sent after the idle spell" _meta2 || true
check_eq "requests refused (401) around the idle spell" 0 "$(jq -s '[.[] | select(.status == 401)] | length' "$REC")"
check_eq "rows sent with metadata-server tokens, after the idle spell too" 2 \
	"$(sql "SELECT count(*) FROM outbox WHERE event_type = 'ps.meta' AND status = 'sent'")"
outboxd_stop
unset GCE_METADATA_HOST

# 5. The emulator: no credentials at all; outbox.conf(5)'s worked
# example as it is written there (its file, the topic made with PUT, its
# INSERT), with the stack's database and port.
proxy_start pubsub-emu pubsub-standin.py --record "$T_DIR/emu.jsonl" --pubkey "$T_DIR/sa.pub" \
	--client-email "$EMAIL" --emulator
awk '/^A complete file$/ { f = 1 } f && /^\.Bd -literal/ { p = 1; next } p && /^\.Ed/ { exit } p' \
	"$T_ROOT/man/outbox.conf.5" | sed "s|^database = .*|database = \"$DATABASE_URL\"|" >"$T_DIR/example.conf"
echo "http { listen = \"127.0.0.1:$HTTP_PORT\" }" >>"$T_DIR/example.conf"
check "the worked example's file was found in outbox.conf(5)" grep -q '^destination events {' "$T_DIR/example.conf"
check "the worked example's curl PUT makes the topic" \
	curl -fsS -o /dev/null -X PUT "http://127.0.0.1:$PROXY_PORT/v1/projects/acme-prod/topics/order-events"
export PUBSUB_EMULATOR_HOST=127.0.0.1:$PROXY_PORT
"$T_ROOT/outboxd" -t -c "$T_DIR/example.conf" >"$T_DIR/example-t.out" 2>&1 || true
check "the worked example's file passes outboxd -t" grep -q "configuration OK" "$T_DIR/example-t.out"
check "  ... and -t says no credentials are used, the emulator's address" \
	grep -qF "Google credentials: none, the Pub/Sub emulator at http://127.0.0.1:$PROXY_PORT (PUBSUB_EMULATOR_HOST)" "$T_DIR/example-t.out"
for e in localhost localhost:99999 :8085 'h:8o'; do
	PUBSUB_EMULATOR_HOST=$e "$T_ROOT/outboxd" -t -c "$T_DIR/example.conf" >"$T_DIR/emu-bad.out" 2>&1 && rc=0 || rc=$?
	check "PUBSUB_EMULATOR_HOST=$e refused by -t (exit $rc): $(head -1 "$T_DIR/emu-bad.out")" \
		bash -c '[ "$1" = 78 ] && grep -q "expected host:port" "$2"' _ "$rc" "$T_DIR/emu-bad.out"
done
outboxd_start "$T_DIR/example.conf" outboxd-emu
sql "INSERT INTO outbox (event_type, ordering_key, payload)
    VALUES ('order.created', 'o-1', '{\"orderId\": \"o-1\"}')"
_emu() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'o-1' AND status = 'sent'")" = 1 ]; }
wait_until 15 "sent to the emulator" _emu || true
check_eq "sent to the emulator" 1 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'o-1' AND status = 'sent'")"
check_eq "the example's message: data, attributes, orderingKey" \
	'{"a":{"EventType":"order.created"},"d":"{\"orderId\": \"o-1\"}","k":"o-1","t":"acme-prod/order-events"}' \
	"$(jq -cS 'select(.status == 200) | {t: .topic} + (.messages[] | {d: (.data | @base64d), a: .attributes, k: .orderingKey})' "$T_DIR/emu.jsonl")"
check_eq "emulator requests with an Authorization header" 0 "$(jq -s '[.[] | select(.auth != null)] | length' "$T_DIR/emu.jsonl")"
outboxd_stop
unset PUBSUB_EMULATOR_HOST

# No key, assertion or token in any log outboxd wrote, its -t output, the
# metrics page or a row's last_error.
check_eq "outboxd's files holding a key, an assertion or a token" "" \
	"$(grep -lE 'ya29\.|PRIVATE KEY|eyJ' "$T_DIR"/outboxd*.log "$T_DIR/t.out" "$T_DIR/metrics.txt" "$T_DIR/redrive.out" 2>/dev/null)"
check_eq "rows whose last_error holds a token" 0 "$(sql "SELECT count(*) FROM outbox WHERE last_error ~ 'ya29\\.|eyJ|PRIVATE KEY'")"
