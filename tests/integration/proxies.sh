#!/usr/bin/env bash
# proxies.sh -- the test harness's own proxies do what the other scenarios
# rely on, without outboxd:
#   sigv4-proxy.py accepts requests signed by curl's --aws-sigv4 (an
#   independent SigV4 signer) and rejects tampered, wrongly keyed and
#   token-less ones with 403 (the negative controls);
#   fault-proxy.py turns a SendMessageBatch of 10 into 9 sent + 1 Failed
#   once, then passes through, and its other modes (status, delay, hold)
#   work.
. "$(dirname "$0")/../lib/common.sh"
test_init
stack_up

AKID=AKIDPROXYTEST
SECRET='proxy/test+secret=1'
TOKEN='FwoGZXIvYXdzEProxyTest//token+with/special=chars'

# ---- sigv4-proxy ------------------------------------------------------------
proxy_start sqs-sig sigv4-proxy.py --upstream "$SQS_ENDPOINT" --service sqs \
	--access-key "$AKID" --secret "$SECRET" --token "$TOKEN"
SIGSQS=http://127.0.0.1:$PROXY_PORT
proxy_start ddb-sig sigv4-proxy.py --upstream "$DDB_ENDPOINT" --service dynamodb \
	--access-key "$AKID" --secret "$SECRET" --token "$TOKEN"
SIGDDB=http://127.0.0.1:$PROXY_PORT

# signed SERVICE ENDPOINT TARGET BODY [USER:SECRET] [TOKEN|-] -- signed by
# curl (libcurl's SigV4); answer in $T_DIR/r.body, status echoed, curl's
# request headers in $T_DIR/r.trace
signed() {
	local svc=$1 ep=$2 target=$3 body=$4 user=${5:-$AKID:$SECRET} tok=${6:-$TOKEN}
	local th=()
	[ "$tok" = - ] || th=(-H "X-Amz-Security-Token: $tok")
	curl -sS -v -o "$T_DIR/r.body" -w '%{http_code}' --max-time 30 \
		--aws-sigv4 "aws:amz:us-east-1:$svc" --user "$user" \
		-H 'Content-Type: application/x-amz-json-1.0' -H "X-Amz-Target: $target" \
		${th[@]+"${th[@]}"} --data-binary "$body" "$ep/" 2>"$T_DIR/r.trace"
}

# replay ENDPOINT BODY -- resend the last signed request's headers (same
# Authorization, X-Amz-Date, token, target) with another body
replay() {
	local ep=$1 body=$2 args=() line
	while IFS= read -r line; do
		line=${line%$'\r'}
		case ${line,,} in
		'> authorization:'* | '> x-amz-date:'* | '> x-amz-security-token:'* | \
		'> x-amz-target:'* | '> content-type:'*) args+=(-H "${line#> }") ;;
		esac
	done <"$T_DIR/r.trace"
	curl -sS -o "$T_DIR/r.body" -w '%{http_code}' --max-time 30 -X POST \
		${args[@]+"${args[@]}"} --data-binary "$body" "$ep/"
}

body=$(jq -nc --arg q "$QUEUE_URL" '{QueueUrl:$q, MessageBody:"signed é ✓ 😀"}')
check_eq "curl-signed SendMessage through sigv4-proxy" 200 "$(signed sqs "$SIGSQS" AmazonSQS.SendMessage "$body")"
check_eq "answer is the emulator's (MD5OfMessageBody of the UTF-8 body)" "$(printf %s "signed é ✓ 😀" | md5sum | cut -d" " -f1)" "$(jq -r .MD5OfMessageBody "$T_DIR/r.body")"
check_eq "same request replayed byte for byte is still accepted" 200 "$(replay "$SIGSQS" "$body")"

tampered=$(jq -nc --arg q "$QUEUE_URL" '{QueueUrl:$q, MessageBody:"signed é ✓ 😁"}')
check_eq "tampered body (one character changed) -> 403" 403 "$(replay "$SIGSQS" "$tampered")"
check_eq "403 body names InvalidSignatureException" "com.amazon.coral.service#InvalidSignatureException" \
	"$(jq -r .__type "$T_DIR/r.body")"
check "403 body has a message" jq_file '.message | length > 0' "$T_DIR/r.body"
check_eq "wrong secret -> 403" 403 "$(signed sqs "$SIGSQS" AmazonSQS.SendMessage "$body" "$AKID:wrong-secret")"
check_eq "no session token -> 403" 403 "$(signed sqs "$SIGSQS" AmazonSQS.SendMessage "$body" "$AKID:$SECRET" -)"
check_eq "other session token -> 403" 403 "$(signed sqs "$SIGSQS" AmazonSQS.SendMessage "$body" "$AKID:$SECRET" other-token)"
check_eq "signed for service dynamodb, sent to sqs -> 403" 403 "$(signed dynamodb "$SIGSQS" AmazonSQS.SendMessage "$body")"
check_eq "unsigned request -> 403" 403 "$(curl -sS -o /dev/null -w '%{http_code}' -X POST \
	-H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: AmazonSQS.SendMessage' \
	--data-binary "$body" "$SIGSQS/")"
check_eq "sqs proxy: verified" 2 "$(stat_of sqs-sig .verified)"
check_eq "sqs proxy: rejected" 6 "$(stat_of sqs-sig .rejected)"
check_eq "only the 2 good requests reached the queue" 2 "$(sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessages)"
check_eq "stats also served at /__proxy/stats" 6 "$(curl -sS "$SIGSQS/__proxy/stats" | jq .rejected)"

item=$(jq -nc '{TableName:"fulfillments", Item:{orderId:{S:"sig-1"}, customerId:{S:"é ✓ 😀 (it'"'"'s) ~*+!"}}}')
check_eq "curl-signed DynamoDB PutItem through sigv4-proxy" 200 "$(signed dynamodb "$SIGDDB" DynamoDB_20120810.PutItem "$item")"
check_eq "tampered PutItem -> 403" 403 "$(replay "$SIGDDB" "${item/sig-1/sig-2}")"
check_eq "signed GetItem returns the item" "é ✓ 😀 (it's) ~*+!" \
	"$(signed dynamodb "$SIGDDB" DynamoDB_20120810.GetItem '{"TableName":"fulfillments","Key":{"orderId":{"S":"sig-1"}}}' >/dev/null; jq -r .Item.customerId.S "$T_DIR/r.body")"
check_eq "table holds only the good item" 1 "$(ddb_count "$DDB_ENDPOINT" fulfillments)"
check_eq "dynamodb proxy: verified/rejected" "2/1" "$(stat_of ddb-sig '"\(.verified)/\(.rejected)"')"

# ---- fault-proxy ------------------------------------------------------------
proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
Q2=$(aws_call sqs "$SQS_ENDPOINT" CreateQueue '{"QueueName":"fault-test"}' | jq -r .QueueUrl)

batch10() {
	jq -nc --arg q "$Q2" --arg tag "$1" \
		'{QueueUrl:$q, Entries:[range(0;10) | {Id:"m\(.)", MessageBody:"\($tag)-\(.)",
		  MessageAttributes:{EventType:{DataType:"String", StringValue:"order.created"}}}]}'
}
ctl() { curl -sS -X POST "$FP/__fault$1" ${2:+--data-binary "$2"}; }

ctl "" '{"mode":"partial-batch","min_entries":10,"times":1}' >/dev/null
r=$(aws_call sqs "$FP" SendMessageBatch "$(batch10 a)")
check_eq "partial batch: HTTP 200" 200 "$(aws_status)"
check_eq "partial batch: Successful = m0..m8" '["m0","m1","m2","m3","m4","m5","m6","m7","m8"]' \
	"$(jq -c '[.Successful[].Id] | sort' <<<"$r")"
check_eq "partial batch: Failed = m10's entry as from the field" \
	'[{"Id":"m9","SenderFault":false,"Code":"InternalError","Message":"injected"}]' "$(jq -c .Failed <<<"$r")"
check_eq "emulator got 9 messages" 9 "$(sqs_attr "$SQS_ENDPOINT" "$Q2" ApproximateNumberOfMessages)"
check_eq "the injected entry is recorded (Id, MessageBody)" "m9 a-9" \
	"$(curl -sS "$FP/__fault" | jq -r '.stats.injected[0] | "\(.Id) \(.MessageBody)"')"
r=$(aws_call sqs "$FP" SendMessageBatch "$(batch10 b)")
check_eq "once only: next batch passes whole (10 ok, 0 failed)" "10/0" \
	"$(jq -r '"\(.Successful|length)/\(.Failed // [] | length)"' <<<"$r")"
check_eq "mode is back to pass" pass "$(curl -sS "$FP/__fault" | jq -r .mode)"
check_eq "entries_forwarded = 19" 19 "$(curl -sS "$FP/__fault" | jq .stats.entries_forwarded)"

ctl "" '{"mode":"status","status":500,"times":2,"actions":["SendMessageBatch"]}' >/dev/null
codes=""
for i in 1 2 3; do aws_call sqs "$FP" SendMessageBatch "$(batch10 c$i)" >/dev/null 2>&1 || true; codes="$codes$(aws_status) "; done
check_eq "status mode: 500 twice, then through" "500 500 200 " "$codes"
ctl "" '{"mode":"status","status":503,"seconds":1}' >/dev/null
aws_call sqs "$FP" GetQueueUrl '{"QueueName":"fault-test"}' >/dev/null 2>&1 || true
c1=$(aws_status)
sleep 1.2
aws_call sqs "$FP" GetQueueUrl '{"QueueName":"fault-test"}' >/dev/null 2>&1 || true
check_eq "status mode for 1 second: 503, then 200" "503 200" "$c1 $(aws_status)"

ctl "" '{"mode":"delay","ms":700,"times":1}' >/dev/null
t0=$(now_ms); aws_call sqs "$FP" GetQueueUrl '{"QueueName":"fault-test"}' >/dev/null; t1=$(now_ms)
check "delay mode: answer took >= 700 ms ($((t1 - t0)) ms)" [ $((t1 - t0)) -ge 700 ]

ctl "" '{"mode":"partial-batch","hold_retry":true,"hold_max":20}' >/dev/null
aws_call sqs "$FP" SendMessageBatch "$(batch10 d)" >/dev/null
(aws_call sqs "$FP" SendMessageBatch "$(batch10 e)" >"$T_DIR/held.out" 2>&1; echo "$(aws_status)" >"$T_DIR/held.code") &
held=$!
wait_until 5 "a held request" bash -c "curl -sS '$FP/__fault' | jq -e '.holding and .stats.held == 1' >/dev/null" || true
check "hold_retry: the next batch is held" [ ! -s "$T_DIR/held.code" ]
ctl /release >/dev/null
wait $held || true
check_eq "released batch goes through" 200 "$(cat "$T_DIR/held.code" 2>/dev/null)"
check_eq "released batch was not faulted" 10 "$(jq '.Successful | length' "$T_DIR/held.out" 2>/dev/null)"
check_eq "bad control request -> 400" 400 "$(curl -sS -o /dev/null -w '%{http_code}' -X POST --data-binary '{"mode":"nope"}' "$FP/__fault")"
