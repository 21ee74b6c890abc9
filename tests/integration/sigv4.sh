#!/usr/bin/env bash
# sigv4.sh -- every AWS request outboxd and outboxctl make is correctly
# signed (AWS Signature Version 4, with a session token), as checked by an
# independent verifier (botocore, in tests/lib/sigv4-proxy.py) put in front
# of the emulators (SQS, DynamoDB, and SNS's query protocol); a customerId
# full of characters that signing and JSON get wrong (non-ASCII, an emoji,
# quote, ~ * + !) arrives in DynamoDB byte for byte, and an SNS row whose
# body and header values hold & = + % space / ~ and an emoji arrives on a
# raw subscription byte for byte.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
stack_up

AKID=ASIAOUTBOXDSIGV4TEST
SECRET='wJalrXUtnFEMI/K7MDENG+bPxRfiCY/sigv4+test'
TOKEN='IQoJb3JpZ2luX2VjEOutboxdSessionToken//+with/slash=and+plus=='
CUSTOMER="é ✓ 😀 (it's) ~*+!"

proxy_start sqs-sig sigv4-proxy.py --upstream "$SQS_ENDPOINT" --service sqs \
	--access-key "$AKID" --secret "$SECRET" --token "$TOKEN"
SQS_PROXY=http://127.0.0.1:$PROXY_PORT
proxy_start ddb-sig sigv4-proxy.py --upstream "$DDB_ENDPOINT" --service dynamodb \
	--access-key "$AKID" --secret "$SECRET" --token "$TOKEN"
DDB_PROXY=http://127.0.0.1:$PROXY_PORT
proxy_start sns-sig sigv4-proxy.py --upstream "$SQS_ENDPOINT" --service sns \
	--access-key "$AKID" --secret "$SECRET" --token "$TOKEN"
SNS_PROXY=http://127.0.0.1:$PROXY_PORT

# An SNS topic with a raw SQS subscription, set up on the emulator itself.
SNS=("$PY" "$T_LIB/sns-setup.py" --endpoint "$SQS_ENDPOINT")
TOPIC=$("${SNS[@]}" topic sigv4-events) || die "CreateTopic sigv4-events"
RAWQ=$("${SNS[@]}" queue sigv4-raw) || die "CreateQueue sigv4-raw"
"${SNS[@]}" subscribe "$TOPIC" "$RAWQ" --raw >/dev/null || die "Subscribe sigv4-raw"

# Both endpoints and the queue URL point at the proxies (as with real AWS,
# where the queue URL's host is the SQS endpoint).
SQS_ENDPOINT=$SQS_PROXY DDB_ENDPOINT=$DDB_PROXY QUEUE_URL=$SQS_PROXY/000000000000/order-events \
	AWS_TEST_ACCESS_KEY_ID=$AKID AWS_TEST_SECRET_ACCESS_KEY=$SECRET OB_SESSION_TOKEN=$TOKEN \
	OB_EXTRA_TOP="sns {
	endpoint_url = \"$SNS_PROXY\"
}
destination notify {
	sink = \"sns\"
	topic_arn = \"$TOPIC\"
}" OB_RELAY_WORKERS=1 outbox_conf_write "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"

hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }

post_order "$CUSTOMER" 4242
check_eq "POST /orders with customerId $CUSTOMER" 201 "$HTTP_STATUS"
id=$(jq -r .id <<<"$HTTP_BODY")
check_eq "201 body echoes customer_id byte for byte" "$(hex "$CUSTOMER")" "$(hex "$(jq -r .customer_id <<<"$HTTP_BODY")")"
check_eq "orders.customer_id byte for byte" "$(hex "$CUSTOMER")" "$(hex "$(sql "SELECT customer_id FROM orders WHERE id = '$id'")")"

item_there() {
	aws_call dynamodb "$DDB_ENDPOINT" GetItem \
		"$(jq -nc --arg id "$id" '{TableName:"fulfillments", Key:{orderId:{S:$id}}, ConsistentRead:true}')" \
		>"$T_DIR/item.json" 2>/dev/null && jq -e .Item "$T_DIR/item.json" >/dev/null
}
wait_until 30 "the fulfillment item for $id" item_there || true
check "fulfillment item written (through both signing proxies)" jq_file .Item "$T_DIR/item.json"
check_eq "item customerId byte for byte" "$(hex "$CUSTOMER")" "$(hex "$(jq -r .Item.customerId.S "$T_DIR/item.json")")"
check_eq "item amountCents" 4242 "$(jq -r .Item.amountCents.N "$T_DIR/item.json")"
check_eq "outbox row sent" sent "$(sql "SELECT status FROM outbox WHERE payload::text LIKE '%$id%'")"

ddb_before=$(stat_of ddb-sig .verified)
rc=0
"$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" fulfillment "$id" >"$T_DIR/ctl.out" 2>"$T_DIR/ctl.err" || rc=$?
add_log "$T_DIR/ctl.err"
check_eq "outboxctl fulfillment $id: exit status" 0 "$rc"
ctl_customer=$(jq -r '.customerId | if type == "object" then .S else . end' "$T_DIR/ctl.out" 2>/dev/null || true)
check_eq "outboxctl prints the item's customerId byte for byte" "$(hex "$CUSTOMER")" "$(hex "$ctl_customer")"
check_eq "outboxctl prints the item's orderId" "$id" \
	"$(jq -r '.orderId | if type == "object" then .S else . end' "$T_DIR/ctl.out" 2>/dev/null || true)"
check "outboxctl's read went through the signing proxy" [ "$(stat_of ddb-sig .verified)" -gt "$ddb_before" ]
rc=0
"$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" fulfillment "$(cat /proc/sys/kernel/random/uuid)" >/dev/null 2>&1 || rc=$?
check_eq "outboxctl fulfillment <unknown order>: exit status" 1 "$rc"

# SNS: a row whose body and header values hold what form-encoding and
# SigV4 treat specially
HARD='a&b=c+d%e f/g~h 😀 é ✓'
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination, headers)
     VALUES ('note.sent', 'sigv4', jsonb_build_object('text', \$h\$$HARD\$h\$), 'notify',
             jsonb_build_object('note', \$h\$$HARD\$h\$, 'traceparent',
                                '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'))" >/dev/null
sns_sent() { [ "$(sql "SELECT status FROM outbox WHERE destination = 'notify'")" = sent ]; }
wait_until 30 "the SNS row sent" sns_sent || true
check_eq "SNS row sent (through the signing proxy)" sent "$(sql "SELECT status FROM outbox WHERE destination = 'notify'")"
"${SNS[@]}" drain "$RAWQ" --count 1 --idle 3 >"$T_DIR/sns.jsonl" || true
check_eq "SNS message body byte for byte" \
	"$(hex "$(sql "SELECT payload::text FROM outbox WHERE destination = 'notify'")")" \
	"$(hex "$(jq -r .Body "$T_DIR/sns.jsonl")")"
check_eq "SNS attribute note byte for byte" "$(hex "$HARD")" "$(hex "$(jq -r .MessageAttributes.note "$T_DIR/sns.jsonl")")"
check_eq "SNS attribute EventType" note.sent "$(jq -r .MessageAttributes.EventType "$T_DIR/sns.jsonl")"
check_eq "SNS requests rejected by the verifier" 0 "$(stat_of sns-sig .rejected)"
check "relay's PublishBatch verified" [ "$(stat_of sns-sig '.by_action.PublishBatch.verified // 0')" -gt 0 ]
if [ "$(stat_of sns-sig .rejected)" != 0 ]; then
	say "SNS rejections: $(jq -c .rejections "$T_DIR/sns-sig.stats")"
fi
code=$(curl -sS -o "$T_DIR/neg-sns.xml" -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:sns" \
	--user "$AKID:not-the-secret" -H "X-Amz-Security-Token: $TOKEN" \
	-H 'Content-Type: application/x-www-form-urlencoded' \
	--data-binary "Action=ListTopics&Version=2010-03-31" "$SNS_PROXY/")
check_eq "negative control (SNS): a wrong secret -> 403" 403 "$code"
check "negative control (SNS): answered as SNS would, in XML" grep -q '<Code>InvalidSignatureException</Code>' "$T_DIR/neg-sns.xml"
check_eq "negative control (SNS) counted as rejected" 1 "$(stat_of sns-sig .rejected)"

# every call the chain makes was verified, none rejected (the consumer
# deletes the message just after its write: give it a moment)
deleted() { [ "$(stat_of sqs-sig '(.by_action.DeleteMessage.verified // 0) + (.by_action.DeleteMessageBatch.verified // 0)')" -gt 0 ]; }
wait_until 10 "the consumer's DeleteMessage(Batch)" deleted || true
say "sqs proxy: $(jq -c '{verified, rejected, by_action}' "$T_DIR/sqs-sig.stats")"
say "dynamodb proxy: $(jq -c '{verified, rejected, by_action}' "$T_DIR/ddb-sig.stats")"
check_eq "SQS requests rejected by the verifier" 0 "$(stat_of sqs-sig .rejected)"
check_eq "DynamoDB requests rejected by the verifier" 0 "$(stat_of ddb-sig .rejected)"
check "relay's SendMessageBatch verified" [ "$(stat_of sqs-sig '.by_action.SendMessageBatch.verified // 0')" -gt 0 ]
check "consumer's ReceiveMessage verified" [ "$(stat_of sqs-sig '.by_action.ReceiveMessage.verified // 0')" -gt 0 ]
check "consumer's DeleteMessage(Batch) verified" \
	[ "$(stat_of sqs-sig '(.by_action.DeleteMessage.verified // 0) + (.by_action.DeleteMessageBatch.verified // 0)')" -gt 0 ]
check "consumer's PutItem verified" [ "$(stat_of ddb-sig '.by_action.PutItem.verified // 0')" -gt 0 ]
if [ "$(stat_of sqs-sig .rejected)" != 0 ] || [ "$(stat_of ddb-sig .rejected)" != 0 ]; then
	say "rejections: $(jq -c .rejections "$T_DIR/sqs-sig.stats") $(jq -c .rejections "$T_DIR/ddb-sig.stats")"
fi

# negative control: the verifier does reject a bad signature
code=$(curl -sS -o "$T_DIR/neg.json" -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:sqs" \
	--user "$AKID:not-the-secret" -H "X-Amz-Security-Token: $TOKEN" \
	-H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: AmazonSQS.GetQueueUrl' \
	--data-binary '{"QueueName":"order-events"}' "$SQS_PROXY/")
check_eq "negative control: request signed with a wrong secret -> 403" 403 "$code"
check_eq "negative control counted as rejected" 1 "$(stat_of sqs-sig .rejected)"
