# sqs-take.sh -- read an SQS queue of the stack with its message
# attributes (sourced after common.sh).
#
# sqs_take QUEUE_URL N FILE
#	Receive (MessageAttributeNames All) and delete messages of QUEUE_URL
#	until N were read or 20 s passed; FILE gets one JSON line a message,
#	{"Body", "MessageAttributes"}, in the order received.  Says how many
#	it read; the caller checks the count.
sqs_take() {
	local q=$1 want=$2 file=$3 deadline r del
	: >"$file"
	deadline=$(($(date +%s) + 20))
	while [ "$(wc -l <"$file")" -lt "$want" ] && [ "$(date +%s)" -lt $deadline ]; do
		r=$(aws_call sqs "$SQS_ENDPOINT" ReceiveMessage "$(jq -nc --arg q "$q" \
			'{QueueUrl:$q, MaxNumberOfMessages:10, WaitTimeSeconds:1, MessageAttributeNames:["All"]}')") || continue
		jq -c '(.Messages // [])[] | {Body, MessageAttributes}' <<<"$r" >>"$file"
		del=$(jq -c --arg q "$q" '{QueueUrl:$q, Entries:[(.Messages // []) | to_entries[] |
			{Id:("m\(.key)"), ReceiptHandle:.value.ReceiptHandle}]}' <<<"$r")
		[ "$(jq '.Entries | length' <<<"$del")" = 0 ] ||
			aws_call sqs "$SQS_ENDPOINT" DeleteMessageBatch "$del" >/dev/null
	done
	say "read $(wc -l <"$file") message(s) of $want from ${q##*/}"
}
