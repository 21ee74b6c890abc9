#!/usr/bin/env bash
# ready-sink.sh -- /readyz and a sink that fails every publish: the SQS
# queue is deleted under a running outboxd.  An idle sink keeps /readyz 200
# (longer than relay.unready_after, here 2 s); with the queue gone and an
# order to publish, /readyz turns 503 within about relay.unready_after,
# with "sink": "failing" and a message that says so (naming the class of
# the failure, never a URL or a credential), while orders are still
# taken; once the queue is back and a publish succeeds, /readyz is 200
# again.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
stack_up

UNREADY=2000
OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=0 outbox_conf_write "$T_DIR/outbox.conf"
sed -i "s/^relay {/relay {\n\tunready_after = $UNREADY\n\tbackoff_base = 100\n\tbackoff_max = 400\n\tmax_attempts = 1000/" "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"

sent_count() { sql "SELECT count(*) FROM outbox WHERE status = 'sent'"; }
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }

post_order rs-1 100
check_eq "POST /orders" 201 "$HTTP_STATUS"
wait_until 10 "the first order to be published" all_sent || true
sleep $((UNREADY / 1000 + 1))
http GET /readyz
check_eq "GET /readyz with an idle sink, $((UNREADY / 1000 + 1)) s after the last publish" 200 "$HTTP_STATUS"
check "  ... says the sink is ok: $HTTP_BODY" jq_true '.status == "ready" and .sink == "ok" and .destinations[0].state == "ok" and (has("warning") | not)' "$HTTP_BODY"

aws_call sqs "$SQS_ENDPOINT" DeleteQueue "$(jq -nc --arg q "$QUEUE_URL" '{QueueUrl:$q}')" >/dev/null ||
	die "DeleteQueue failed"
say "queue deleted"
post_order rs-2 200
check_eq "POST /orders with the queue gone" 201 "$HTTP_STATUS"
t0=$(now_ms)
not_ready() { http GET /readyz; [ "$HTTP_STATUS" = 503 ]; }
wait_until $((UNREADY / 1000 + 6)) "/readyz 503" not_ready || true
took=$(($(now_ms) - t0))
say "/readyz $HTTP_STATUS $took ms after the first order with the queue gone: $HTTP_BODY"
check_eq "GET /readyz once every publish has failed for relay.unready_after" 503 "$HTTP_STATUS"
check "  ... not before relay.unready_after ($took ms >= $((UNREADY - 200)))" [ "$took" -ge $((UNREADY - 200)) ]
check "  ... and within it plus a few seconds ($took ms <= $((UNREADY + 4000)))" [ "$took" -le $((UNREADY + 4000)) ]
check "  ... the body says the default destination is failing" \
	jq_true '.status == "not_ready" and .error == "not_ready" and .sink == "failing" and .database == "ok"
		and (.message | test("the default destination \"default\" \\(sqs\\) is failing"))
		and .destinations == [{"name": "default", "sink": "sqs", "state": "failing", "default": true}]' "$HTTP_BODY"
check "  ... and names no URL or credential" \
	eval '! grep -qiE "https?:|127\.0\.0\.1|queue|AKID|secret" <<<"$(jq -r .message <<<"$HTTP_BODY")"'
post_order rs-3 300
check_eq "POST /orders while the sink is failing (orders wait in the outbox)" 201 "$HTTP_STATUS"

url=$(aws_call sqs "$SQS_ENDPOINT" CreateQueue '{"QueueName":"order-events"}' | jq -r .QueueUrl) ||
	die "CreateQueue failed"
check_eq "the queue is back under its URL" "$QUEUE_URL" "$url"
t0=$(now_ms)
ready() { http GET /readyz; [ "$HTTP_STATUS" = 200 ]; }
wait_until 10 "/readyz 200" ready || true
took=$(($(now_ms) - t0))
check_eq "GET /readyz once a publish succeeds again ($took ms after the queue came back)" 200 "$HTTP_STATUS"
check "  ... says the sink is ok: $HTTP_BODY" jq_true '.status == "ready" and .sink == "ok" and .destinations[0].state == "ok" and (has("warning") | not)' "$HTTP_BODY"
wait_until 10 "every order to be published" all_sent || true
check_eq "every order was published" 3 "$(sent_count)"
