# aws.sh -- raw AWS JSON-protocol calls with curl, for test set-up and
# assertions (sourced).  The emulators need a well-formed Authorization
# header but do not check its signature, so a fixed dummy one is sent.
#
# aws_call sqs|dynamodb ENDPOINT ACTION JSON
#	POST JSON to ENDPOINT with X-Amz-Target AmazonSQS.ACTION or
#	DynamoDB_20120810.ACTION; prints the answer body.  Returns 1 (and
#	prints the status and body on stderr) unless the status is 200.
#	The status is also written to $AWS_STATUS_FILE when that is set (a
#	call inside $(...) cannot set a variable): aws_status prints it.
AWS_DUMMY_REGION=${AWS_TEST_REGION:-us-east-1}

aws_call() {
	local svc=$1 ep=$2 action=$3 body=$4 target out code
	case $svc in
	sqs)		target=AmazonSQS.$action ;;
	dynamodb)	target=DynamoDB_20120810.$action ;;
	*)		echo "aws_call: unknown service $svc" >&2; return 2 ;;
	esac
	out=$(mktemp)
	code=$(curl -sS -o "$out" -w '%{http_code}' --max-time 30 -X POST "$ep/" \
		-H 'Content-Type: application/x-amz-json-1.0' \
		-H "X-Amz-Target: $target" \
		-H 'X-Amz-Date: 20250101T000000Z' \
		-H "Authorization: AWS4-HMAC-SHA256 Credential=AKIDOUTBOXDTEST/20250101/$AWS_DUMMY_REGION/$svc/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=0000000000000000000000000000000000000000000000000000000000000000" \
		--data-binary "$body") || code=000
	[ -z "${AWS_STATUS_FILE:-}" ] || echo "$code" >"$AWS_STATUS_FILE"
	if [ "$code" != 200 ]; then
		echo "aws_call: $svc $action -> HTTP $code: $(head -c 600 "$out")" >&2
		cat "$out"
		rm -f "$out"
		return 1
	fi
	cat "$out"
	rm -f "$out"
}

aws_status() { cat "${AWS_STATUS_FILE:?}"; }

# ddb_scan_all ENDPOINT TABLE -- every item of TABLE as one JSON array
# (DynamoDB's typed form), following LastEvaluatedKey.
ddb_scan_all() {
	local ep=$1 table=$2 req page items='[]' lek
	req=$(jq -nc --arg t "$table" '{TableName:$t, ConsistentRead:true}')
	while :; do
		page=$(aws_call dynamodb "$ep" Scan "$req") || return 1
		items=$(jq -c --argjson acc "$items" '$acc + (.Items // [])' <<<"$page")
		lek=$(jq -c '.LastEvaluatedKey // empty' <<<"$page")
		[ -n "$lek" ] || break
		req=$(jq -nc --arg t "$table" --argjson k "$lek" '{TableName:$t, ConsistentRead:true, ExclusiveStartKey:$k}')
	done
	echo "$items"
}

# ddb_count ENDPOINT TABLE -- number of items in TABLE
ddb_count() {
	ddb_scan_all "$1" "$2" | jq length
}

# sqs_attr ENDPOINT QUEUE_URL NAME -- one queue attribute
# (ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible, ...)
sqs_attr() {
	aws_call sqs "$1" GetQueueAttributes \
		"$(jq -nc --arg q "$2" --arg n "$3" '{QueueUrl:$q, AttributeNames:[$n]}')" |
		jq -r --arg n "$3" '.Attributes[$n] // empty'
}
