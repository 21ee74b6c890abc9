#!/usr/bin/env bash
# dest-three.sh -- any service publishes through outboxd: three named
# destinations at once (an SQS queue, an SNS topic with two SQS queues
# subscribed -- one raw, one with SNS's JSON envelope and a filter policy
# on a header -- and a webhook) beside the default one.  A second psql
# session writes 300 events by plain INSERTs in 60 mixed transactions;
# each arrives exactly where its row says, once, with its body and its
# headers (traceparent, tracestate, a non-ASCII one) byte-identical as
# SQS and SNS message attributes and as webhook request headers; the
# filtered subscription receives exactly the rows whose header matches.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up
webhook_receiver_start

SNS=("$PY" "$T_LIB/sns-setup.py" --endpoint "$SQS_ENDPOINT")
DIRECTQ=$("${SNS[@]}" queue three-direct) || die "CreateQueue three-direct"
TOPIC=$("${SNS[@]}" topic three-topic) || die "CreateTopic three-topic"
RAWQ=$("${SNS[@]}" queue three-raw) || die "CreateQueue three-raw"
ENVQ=$("${SNS[@]}" queue three-envelope) || die "CreateQueue three-envelope"
"${SNS[@]}" subscribe "$TOPIC" "$RAWQ" --raw >/dev/null || die "Subscribe raw"
"${SNS[@]}" subscribe "$TOPIC" "$ENVQ" --filter-policy '{"tier":["gold"]}' >/dev/null ||
	die "Subscribe envelope"

OB_EXTRA_TOP="sns {
	endpoint_url = \"$SQS_ENDPOINT\"
}
destination direct {
	sink = \"sqs\"
	queue_url = \"$DIRECTQ\"
}
destination fanout {
	sink = \"sns\"
	topic_arn = \"$TOPIC\"
}
destination hooks {
	sink = \"http\"
	url = \"${WH/http:\/\//http://outboxd:URLPASSWORD@}/hooks?token=QUERYTOKEN\"
	secret = \"$SECRET\"
}" OB_CONSUMER_WORKERS=0 OB_POLL_INTERVAL=200 outbox_conf_write "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"
# A user and password in the webhook's URL are a credential: the start-up
# line names the host only.
check "the webhook destination's line names its host, not the URL's user and password" \
	grep -q "msg=\"publishing to http ${WH#http://} (.*destination=hooks" "$OUTBOXD_LOG"

# 60 transactions of 5 rows, destinations taken in turn so that every
# transaction mixes them; NULL is the default destination (the queue of
# the stack's configuration).
N=300
TEXT='é ✓ 😀 & = + % / ~ "q" <t>'
{
	for t in $(seq 0 59); do
		echo "BEGIN;"
		echo "INSERT INTO outbox (event_type, ordering_key, payload, destination, headers)
		SELECT CASE WHEN g % 7 = 0 THEN 'invoice.paid' ELSE 'order.created' END,
		       'key-' || (g % 11),
		       jsonb_build_object('n', g, 'text', \$t\$$TEXT\$t\$),
		       (ARRAY['direct', 'fanout', 'hooks', NULL])[1 + g % 4],
		       jsonb_build_object(
		         'traceparent', format('00-%s-%s-01', lpad(to_hex(g), 32, '0'), lpad(to_hex(g + 7), 16, '0')),
		         'tracestate', 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
		         'tier', CASE WHEN g % 3 = 0 THEN 'gold' ELSE 'silver' END,
		         'note', \$t\$$TEXT \$t\$ || g)
		FROM generate_series($((t * 5 + 1)), $((t * 5 + 5))) g;"
		echo "COMMIT;"
	done
} >"$T_DIR/writer.sql"
psql -X -v ON_ERROR_STOP=1 -qAt -f "$T_DIR/writer.sql" >"$T_DIR/writer.out" 2>&1
check_eq "the second session's 60 transactions committed (psql exit status)" 0 $?

all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" = $N ]; }
wait_until 60 "all $N rows sent" all_sent || true
check_eq "rows sent" $N "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "rows dead-lettered" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"

# What each destination must have received: body = payload::text, the
# attributes EventType and every header.
want() {	# WHERE-clause FILE
	sql "SELECT coalesce(json_agg(json_build_object('body', payload::text,
	        'attrs', jsonb_build_object('EventType', event_type) || headers)
	        ORDER BY payload::text), '[]') FROM outbox WHERE $1" >"$2"
}
got() {		# FILE.jsonl OUT (sns-setup.py drain lines)
	jq -s '[.[] | {body: .Body, attrs: .MessageAttributes}] | sort_by(.body)' "$1" >"$2"
}
want "destination = 'direct'" "$T_DIR/want-direct.json"
want "destination IS NULL" "$T_DIR/want-default.json"
want "destination = 'fanout'" "$T_DIR/want-fanout.json"
want "destination = 'fanout' AND headers->>'tier' = 'gold'" "$T_DIR/want-gold.json"
n_of() { jq length "$1"; }

"${SNS[@]}" drain "$DIRECTQ" --count "$(n_of "$T_DIR/want-direct.json")" --idle 5 >"$T_DIR/direct.jsonl" || true
"${SNS[@]}" drain "$QUEUE_URL" --count "$(n_of "$T_DIR/want-default.json")" --idle 5 >"$T_DIR/default.jsonl" || true
"${SNS[@]}" drain "$RAWQ" --count "$(n_of "$T_DIR/want-fanout.json")" --idle 5 >"$T_DIR/raw.jsonl" || true
"${SNS[@]}" drain "$ENVQ" --count "$(n_of "$T_DIR/want-gold.json")" --idle 5 >"$T_DIR/env.jsonl" || true
for q in "$DIRECTQ" "$QUEUE_URL" "$RAWQ" "$ENVQ"; do
	"${SNS[@]}" drain "$q" --idle 1 >>"$T_DIR/extra.jsonl" || true
done
check_eq "messages beyond those expected, on any queue (duplicates)" 0 "$(wc -l <"$T_DIR/extra.jsonl")"

got "$T_DIR/direct.jsonl" "$T_DIR/got-direct.json"
got "$T_DIR/default.jsonl" "$T_DIR/got-default.json"
got "$T_DIR/raw.jsonl" "$T_DIR/got-raw.json"
check "SQS destination 'direct': exactly its $(n_of "$T_DIR/want-direct.json") rows, body and attributes byte-identical" \
	jq -e --slurpfile got "$T_DIR/got-direct.json" '. == $got[0]' "$T_DIR/want-direct.json"
check "the default destination: exactly the $(n_of "$T_DIR/want-default.json") rows naming none" \
	jq -e --slurpfile got "$T_DIR/got-default.json" '. == $got[0]' "$T_DIR/want-default.json"
check "SNS destination 'fanout', raw subscription: exactly its $(n_of "$T_DIR/want-fanout.json") rows, byte-identical" \
	jq -e --slurpfile got "$T_DIR/got-raw.json" '. == $got[0]' "$T_DIR/want-fanout.json"
jq -s --arg arn "$TOPIC" '[.[] | .Body | fromjson | select(.Type == "Notification" and .TopicArn == $arn) |
	{body: .Message, attrs: (.MessageAttributes | map_values(.Value))}] | sort_by(.body)' \
	"$T_DIR/env.jsonl" >"$T_DIR/got-gold.json"
check "SNS envelope subscription with filter tier=gold: exactly the $(n_of "$T_DIR/want-gold.json") matching rows" \
	jq -e --slurpfile got "$T_DIR/got-gold.json" '. == $got[0]' "$T_DIR/want-gold.json"

# The webhook: each of its rows once, signed, headers byte for byte.
sql "SELECT coalesce(json_agg(json_build_object('id', id::text, 'body', payload::text, 'headers', headers,
        'type', event_type) ORDER BY id), '[]') FROM outbox WHERE destination = 'hooks'" >"$T_DIR/want-hooks.json"
nh=$(n_of "$T_DIR/want-hooks.json")
check_eq "webhook requests (one per row)" "$nh" "$(wc -l <"$REC")"
check "webhook: every request signed with its destination's secret" jq -e -s 'all(.sig_ok)' "$REC"
jq -s '[.[] | {id: .headers["webhook-id"], body, type: .headers["x-outbox-event-type"],
	headers: ([.header_list[] | select(.[0] | test("^(traceparent|tracestate|tier|note)$")) |
	{(.[0]): (.[1] | @base64d)}] | add)}] | sort_by(.id | tonumber)' "$REC" >"$T_DIR/got-hooks.json"
check "webhook: exactly its rows, body, event type and every header (name as sent, value's bytes) identical" \
	jq -e --slurpfile got "$T_DIR/got-hooks.json" '. == $got[0]' "$T_DIR/want-hooks.json"
check "traceparent survives on all $N rows, untouched" \
	[ "$(cat "$T_DIR"/got-{direct,default,raw}.json "$T_DIR/got-hooks.json" |
		jq -s '[.[][] | (.attrs // .headers).traceparent] | map(select(test("^00-[0-9a-f]{32}-[0-9a-f]{16}-01$"))) | length')" = $N ]

check "no log line holds the URL's password or its query's token" \
	bash -c "! grep -q -e URLPASSWORD -e QUERYTOKEN '$OUTBOXD_LOG'"
outboxd_stop
