# conf.sh -- write an outboxd configuration file for tests (sourced).
#
# outbox_conf_write FILE
#	Writes FILE from these variables (the stack's STATEDIR/env sets the
#	first five; the OB_* knobs have test-friendly defaults):
#	  DATABASE_URL HTTP_PORT QUEUE_URL SQS_ENDPOINT DDB_ENDPOINT
#	  AWS_TEST_REGION AWS_TEST_ACCESS_KEY_ID AWS_TEST_SECRET_ACCESS_KEY
#	  OB_SESSION_TOKEN (unset/empty = no session_token line)
#	  OB_LOG_LEVEL OB_HTTP_WORKERS OB_MAX_BODY_SIZE OB_RELAY_WORKERS
#	  OB_BATCH_SIZE OB_POLL_INTERVAL OB_CONSUMER_WORKERS OB_WAIT_TIME
#	  OB_SHUTDOWN_TIMEOUT OB_TABLE
#	  OB_EXTRA_TOP (raw lines added at top level)
#	  OB_EXTRA_RELAY (raw lines added to the relay section)
outbox_conf_write() {
	local file=${1:?outbox_conf_write FILE}
	: "${DATABASE_URL:?}" "${HTTP_PORT:?}" "${QUEUE_URL:?}" "${SQS_ENDPOINT:?}" "${DDB_ENDPOINT:?}"
	local token_line="#session_token = \"\""
	[ -z "${OB_SESSION_TOKEN:-}" ] || token_line="session_token = \"$OB_SESSION_TOKEN\""
	cat >"$file" <<CONF
# outboxd configuration written by tests/lib/conf.sh for a test stack.
database = "$DATABASE_URL"
log_level = "${OB_LOG_LEVEL:-info}"
shutdown_timeout = ${OB_SHUTDOWN_TIMEOUT:-5000}
${OB_EXTRA_TOP:-}

http {
	listen = "127.0.0.1:$HTTP_PORT"
	workers = ${OB_HTTP_WORKERS:-2}
	max_body_size = ${OB_MAX_BODY_SIZE:-65536}
}

relay {
	workers = ${OB_RELAY_WORKERS:-2}
	batch_size = ${OB_BATCH_SIZE:-10}
	poll_interval = ${OB_POLL_INTERVAL:-1000}
	${OB_EXTRA_RELAY:-}
}

consumer {
	workers = ${OB_CONSUMER_WORKERS:-1}
	wait_time = ${OB_WAIT_TIME:-5}
}

aws {
	region = "${AWS_TEST_REGION:-us-east-1}"
	access_key_id = "${AWS_TEST_ACCESS_KEY_ID:-AKIDOUTBOXDTEST}"
	secret_access_key = "${AWS_TEST_SECRET_ACCESS_KEY:-outboxd-test-secret}"
	$token_line
}

sqs {
	queue_url = "$QUEUE_URL"
	endpoint_url = "$SQS_ENDPOINT"
}

dynamodb {
	table = "${OB_TABLE:-fulfillments}"
	endpoint_url = "$DDB_ENDPOINT"
}
CONF
	# It holds secrets: readable by others, outboxd warns (outbox.conf(5)).
	chmod 0600 "$file"
}
