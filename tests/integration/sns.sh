#!/usr/bin/env bash
# sns.sh -- the SNS sink (PublishBatch, query protocol) against fauxqs's
# SNS, with rows written by plain INSERTs from psql:
#  - fan-out: a standard topic (the default destination, and named by
#    rows) with two SQS queues subscribed: the raw one gets every row,
#    body and attributes (EventType, each header, non-ASCII and reserved
#    characters) byte-identical; the other gets SNS's JSON envelope
#    (Message = body, MessageAttributes) for exactly the rows its filter
#    policy on a header matches;
#  - a FIFO topic: MessageGroupId = ordering key, order kept per key,
#    MessageDeduplicationId = outbox id, stable across a retry (a
#    request that timed out after SNS had taken it leaves no duplicate);
#  - partial failure (fault proxy answering 200 with entries Failed):
#    the others sent, SenderFault true dead-lettered with its code in
#    last_error, SenderFault false retried and sent;
#  - a whole-request HTTP 500: retried and sent, one log line naming the
#    destination;
#  - SNS's 256 KiB: with relay.max_message_size above it, a larger row is
#    failed unsent saying why, and two rows too large together go out in
#    two requests.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
stack_up

SNS=("$PY" "$T_LIB/sns-setup.py" --endpoint "$SQS_ENDPOINT")
TOPIC=$("${SNS[@]}" topic outbox-events) || die "CreateTopic outbox-events"
FTOPIC=$("${SNS[@]}" topic outbox-ordered.fifo) || die "CreateTopic outbox-ordered.fifo"
RAWQ=$("${SNS[@]}" queue sns-raw) || die "CreateQueue sns-raw"
ENVQ=$("${SNS[@]}" queue sns-envelope) || die "CreateQueue sns-envelope"
FIFOQ=$("${SNS[@]}" queue sns-ordered.fifo) || die "CreateQueue sns-ordered.fifo"
"${SNS[@]}" subscribe "$TOPIC" "$RAWQ" --raw >/dev/null || die "Subscribe raw"
"${SNS[@]}" subscribe "$TOPIC" "$ENVQ" --filter-policy '{"route":["eu"]}' >/dev/null ||
	die "Subscribe envelope"
"${SNS[@]}" subscribe "$FTOPIC" "$FIFOQ" --raw >/dev/null || die "Subscribe fifo"
say "topics $TOPIC, $FTOPIC"

# The fault proxy stands in front of SNS for the whole scenario (mode pass
# unless a step says otherwise).
proxy_start sns-fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FAULT=http://127.0.0.1:$PROXY_PORT
fault() { curl -fsS -o /dev/null -X POST "$FAULT/__fault" -d "$1"; }

OB_EXTRA_TOP="sns {
	endpoint_url = \"$FAULT\"
}
destination events {
	sink = \"sns\"
	topic_arn = \"$TOPIC\"
}
destination ordered {
	sink = \"sns\"
	topic_arn = \"$FTOPIC\"
	timeout = 1500
}" OB_EXTRA_RELAY='default_destination = "events"
	max_message_size = 1048576
	backoff_base = 200' \
	OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=0 outbox_conf_write "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"

drain() { "${SNS[@]}" drain "$@"; }
all_settled() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")" = 0 ]; }

# ---- fan-out -------------------------------------------------------------

TEXT='é ✓ 😀 & = + % / ~ "quoted" <tag>'
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination, headers)
     SELECT CASE WHEN g % 4 = 0 THEN 'invoice.paid' ELSE 'order.created' END,
            'fan-' || g,
            jsonb_build_object('n', g, 'text', \$t\$$TEXT\$t\$),
            CASE WHEN g % 3 = 0 THEN 'events' END,
            jsonb_build_object(
              'traceparent', format('00-%s-%s-01', lpad(to_hex(g), 32, '0'), lpad(to_hex(g), 16, '0')),
              'tracestate', 'vendor=a%2Cb,other=~x',
              'route', CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END,
              'note', \$t\$$TEXT \$t\$ || g)
     FROM generate_series(1, 12) g" >/dev/null
sql "INSERT INTO outbox (event_type, ordering_key, payload, headers)
     SELECT 'order.created', 'fan-' || g, jsonb_build_object('n', g, 'x', 'ü'),
            jsonb_build_object('route', CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END)
     FROM generate_series(13, 24) g" >/dev/null
wait_until 30 "the 24 fan-out rows sent" all_settled || true
check_eq "fan-out rows sent" 24 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"

sql "SELECT coalesce(json_agg(json_build_object('body', payload::text,
            'attrs', jsonb_build_object('EventType', event_type) || coalesce(headers, '{}'))
            ORDER BY id), '[]') FROM outbox" >"$T_DIR/want.json"
drain "$RAWQ" --count 24 --idle 5 >"$T_DIR/raw.jsonl" || true
drain "$RAWQ" --idle 1 >"$T_DIR/raw-more.jsonl" || true
check_eq "raw subscription: messages received" 24 "$(wc -l <"$T_DIR/raw.jsonl")"
check_eq "raw subscription: nothing more (no duplicates)" 0 "$(wc -l <"$T_DIR/raw-more.jsonl")"
jq -s '[.[] | {body: .Body, attrs: .MessageAttributes}] | sort_by(.body)' "$T_DIR/raw.jsonl" >"$T_DIR/raw-got.json"
check "raw subscription: each row's body and attributes (EventType, every header) byte-identical" \
	jq -e --slurpfile got "$T_DIR/raw-got.json" 'sort_by(.body) == $got[0]' "$T_DIR/want.json"
check "raw subscription: non-ASCII and reserved characters intact in a header" \
	jq -e -s --arg t "$TEXT 5" 'map(select(.MessageAttributes.note == $t)) | length == 1' "$T_DIR/raw.jsonl"

drain "$ENVQ" --count 12 --idle 5 >"$T_DIR/env.jsonl" || true
drain "$ENVQ" --idle 1 >>"$T_DIR/env.jsonl" || true
check_eq "envelope subscription: only the rows whose route header is eu" 12 "$(wc -l <"$T_DIR/env.jsonl")"
jq -s --arg arn "$TOPIC" '[.[] | .Body | fromjson |
	select(.Type == "Notification" and .TopicArn == $arn) |
	{body: .Message, attrs: (.MessageAttributes | map_values(select(.Type == "String") | .Value))}] |
	sort_by(.body)' "$T_DIR/env.jsonl" >"$T_DIR/env-got.json"
check "envelope subscription: SNS's JSON envelope with Message = body and every attribute" \
	jq -e --slurpfile got "$T_DIR/env-got.json" \
	'map(select(.attrs.route == "eu")) | sort_by(.body) == $got[0]' "$T_DIR/want.json"

# ---- FIFO topic ------------------------------------------------------------

# The first PublishBatch is answered after the destination's timeout: the
# relay gives up on it and retries, though SNS took it.
fault '{"mode":"delay","ms":2500,"times":1,"actions":["PublishBatch"]}'
sql "BEGIN;
     INSERT INTO outbox (event_type, ordering_key, payload, destination)
     SELECT 'order.created', 'k' || (g % 3), jsonb_build_object('key', 'k' || (g % 3), 'seq', g), 'ordered'
     FROM generate_series(1, 15) g ORDER BY g;
     COMMIT" >/dev/null
wait_until 40 "the 15 FIFO rows sent" all_settled || true
check_eq "FIFO rows sent" 15 "$(sql "SELECT count(*) FROM outbox WHERE destination = 'ordered' AND status = 'sent'")"
check "FIFO: a PublishBatch timed out and was retried" \
	grep -q 'PublishBatch of [0-9]* messages failed, will retry: SNS transport error' "$OUTBOXD_LOG"
drain "$FIFOQ" --count 15 --idle 5 >"$T_DIR/fifo.jsonl" || true
drain "$FIFOQ" --idle 2 >>"$T_DIR/fifo.jsonl" || true
check_eq "FIFO: each row once, though one request went twice (dedup id stable)" 15 "$(wc -l <"$T_DIR/fifo.jsonl")"
check "FIFO: MessageGroupId is the ordering key" \
	jq -e -s 'all(.[]; (.Body | fromjson | .key) == .Attributes.MessageGroupId)' "$T_DIR/fifo.jsonl"
check "FIFO: order kept per key" \
	jq -e -s 'group_by(.Attributes.MessageGroupId) | all(.[]; [.[] | .Body | fromjson | .seq] as $s | $s == ($s | sort))' \
	"$T_DIR/fifo.jsonl"
sql "SELECT json_object_agg(payload::text, id::text) FROM outbox WHERE destination = 'ordered'" >"$T_DIR/fifo-ids.json"
check "FIFO: MessageDeduplicationId is the outbox id" \
	jq -e -s --slurpfile ids "$T_DIR/fifo-ids.json" 'all(.[]; $ids[0][.Body] == .Attributes.MessageDeduplicationId)' \
	"$T_DIR/fifo.jsonl"

# ---- partial failure: 200 with entries Failed ------------------------------------

fault '{"mode":"fail-entries","actions":["PublishBatch"],"rules":[
	{"match":"reject-me","sender_fault":true,"code":"InvalidParameter","message":"injected permanent"},
	{"match":"retry-me","sender_fault":false,"code":"InternalError","message":"injected transient","times":1}]}'
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination)
     SELECT 'order.created', 'pf-' || g, jsonb_build_object('case', c, 'g', g), 'events'
     FROM generate_series(1, 6) g, LATERAL (SELECT (ARRAY['ok', 'reject-me', 'retry-me'])[1 + g % 3] AS c) x" >/dev/null
wait_until 30 "the partial-failure rows settled" all_settled || true
pf() { sql "SELECT $1 FROM outbox WHERE payload->>'case' = '$2' ORDER BY id"; }
check_eq "partial: plain rows sent on the first attempt" "sent 1
sent 1" "$(pf "status || ' ' || attempts" ok)"
check_eq "partial: SenderFault true rows dead-lettered at once" "failed 1
failed 1" "$(pf "status || ' ' || attempts" reject-me)"
check_eq "partial: their last_error carries SNS's code and message" 2 \
	"$(pf "last_error" reject-me | grep -c '^SNS InvalidParameter: injected permanent$' || true)"
check_eq "partial: SenderFault false rows retried, then sent" "sent 2
sent 2" "$(pf "status || ' ' || attempts" retry-me)"
drain "$RAWQ" --count 4 --idle 3 >"$T_DIR/pf.jsonl" || true
drain "$RAWQ" --idle 1 >>"$T_DIR/pf.jsonl" || true
check_eq "partial: the raw queue got the plain and the retried rows, once each" "ok
ok
retry-me
retry-me" "$(jq -r '.Body | fromjson | .case' "$T_DIR/pf.jsonl" | sort)"
check_eq "partial: failed entries injected by the proxy" 4 "$(stat_of sns-fault '.stats.injected | length')"
check "partial: the failed entry's log line names the destination and the row" \
	grep -qE 'msg="SNS entry rejected: SNS InvalidParameter: injected permanent" destination=events outbox_id=[0-9]+' \
	"$OUTBOXD_LOG"

# ---- a whole request answered 500 --------------------------------------------

fault '{"mode":"status","status":500,"code":"InternalFailure","message":"injected outage","times":2,"actions":["PublishBatch"]}'
sql "INSERT INTO outbox (event_type, ordering_key, payload)
     SELECT 'order.created', 'outage-' || g, jsonb_build_object('outage', g) FROM generate_series(1, 3) g" >/dev/null
wait_until 30 "the outage rows sent" all_settled || true
check_eq "HTTP 500: every row retried, then sent" "3 3" \
	"$(sql "SELECT count(*) FILTER (WHERE status = 'sent') || ' ' || count(*) FILTER (WHERE attempts >= 2)
		FROM outbox WHERE payload ? 'outage'")"
check "HTTP 500: logged with SNS's code and the destination" \
	grep -q 'msg="PublishBatch of 3 messages failed, will retry: SNS HTTP 500 InternalFailure: injected outage" destination=events' \
	"$OUTBOXD_LOG"
drain "$RAWQ" --count 3 --idle 3 >"$T_DIR/outage.jsonl" || true
check_eq "HTTP 500: the raw queue got the 3 rows" 3 "$(wc -l <"$T_DIR/outage.jsonl")"

# ---- SNS's 256 KiB -------------------------------------------------------------

fault '{"mode":"pass"}'
curl -fsS -o /dev/null -X POST "$FAULT/__fault/reset"
sql "INSERT INTO outbox (event_type, ordering_key, payload)
     VALUES ('order.created', 'big-1', jsonb_build_object('big', 1, 'pad', repeat('a', 150000))),
            ('order.created', 'big-2', jsonb_build_object('big', 2, 'pad', repeat('b', 150000))),
            ('order.created', 'big-3', jsonb_build_object('big', 3, 'pad', repeat('c', 300000)))" >/dev/null
wait_until 30 "the large rows settled" all_settled || true
check_eq "over 256 KiB: the two rows that fit alone sent" "sent
sent" "$(sql "SELECT status FROM outbox WHERE payload ? 'big' AND payload->>'big' <> '3' ORDER BY id")"
check_eq "over 256 KiB: the larger row failed at once, unsent" "failed 1" \
	"$(sql "SELECT status || ' ' || attempts FROM outbox WHERE payload->>'big' = '3'")"
check "over 256 KiB: its last_error says SNS's limit" \
	grep -q "exceeds SNS's limit of 262144 bytes" <<<"$(sql "SELECT last_error FROM outbox WHERE payload->>'big' = '3'")"
ids=$(sql "SELECT string_agg(id::text, ' ' ORDER BY id) FROM outbox WHERE payload ? 'big' AND payload->>'big' <> '3'")
check "over 256 KiB together: the two rows went in separate PublishBatch requests" \
	jq -e --arg ids "$ids" '[.stats.requests_done[] | select(.action == "PublishBatch") | .ids] as $r |
		($ids | split(" ")) as [$a, $b] | def has($x): any(.[]; . == $x);
		($r | map(select(has($a))) | length) == 1 and ($r | map(select(has($b))) | length) == 1 and
		($r | map(select(has($a) and has($b))) | length) == 0' <(curl -fsS --max-time 10 "$FAULT/__fault")
drain "$RAWQ" --count 2 --idle 3 >"$T_DIR/big.jsonl" || true
check_eq "over 256 KiB together: both arrived" "1 2" "$(jq -r '.Body | fromjson | .big' "$T_DIR/big.jsonl" | sort | tr '\n' ' ' | sed 's/ $//')"

check_eq "no row left pending" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")"
check_eq "outboxd has not logged the AWS secret" 0 "$(grep -c 'outboxd-test-secret' "$OUTBOXD_LOG" || true)"
