#!/usr/bin/env bash
# stack.sh up|down|env STATEDIR -- the local test stack for outboxd.
#
# up: starts, each on a free loopback port,
#   - PostgreSQL (STATEDIR/pg, database "outboxd", sql/schema.sql applied;
#     OUTBOXD_SCHEMA=FILE applies another file),
#   - fauxqs (SQS): queue "order-events" with a dead-letter queue
#     "order-events-dlq" (RedrivePolicy maxReceiveCount STACK_MAX_RECEIVE,
#     default 5; VisibilityTimeout STACK_VISIBILITY_TIMEOUT s, default 10),
#   - dynalite (DynamoDB): table "fulfillments" (hash key orderId, S),
#   and writes STATEDIR/env (shell exports: DATABASE_URL, PG*, SQS_ENDPOINT,
#   QUEUE_URL, DLQ_URL, DDB_ENDPOINT, HTTP_PORT, OUTBOXD_URL, ...) and a
#   ready outboxd configuration STATEDIR/outbox.conf (outboxd itself is not
#   started).  On any failure it stops what it had started and exits 1.
# down: stops exactly what "up" started (pid files) and deletes STATEDIR
#   (STACK_KEEP=1 keeps it, e.g. to read the logs).
# env: prints STATEDIR/env.
#
# STATEDIR must be reachable by the postgres OS user when run as root
# (e.g. a directory made by mktemp -d under /tmp).
set -euo pipefail
CMD=${1:?usage: stack.sh up|down|env STATEDIR}
STATE=${2:?usage: stack.sh up|down|env STATEDIR}
LIB=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$LIB/../.." && pwd)
. "$LIB/proc.sh"
. "$LIB/aws.sh"
. "$LIB/conf.sh"
die() { echo "stack: $*" >&2; exit 1; }

stack_down() {
	local rc=0
	[ -d "$STATE" ] || { echo "stack: nothing in $STATE"; return 0; }
	"$LIB/emu-down.sh" fauxqs "$STATE/sqs" || rc=1
	"$LIB/emu-down.sh" dynalite "$STATE/ddb" || rc=1
	if [ -d "$STATE/pg/data" ]; then
		"$LIB/pg-down.sh" "$STATE/pg" --keep >/dev/null || rc=1
	fi
	if [ "${STACK_KEEP:-0}" = 1 ]; then
		echo "stack: stopped (kept $STATE)"
	else
		rm -rf "$STATE"
		echo "stack: stopped"
	fi
	return $rc
}

stack_up() {
	local schema=${OUTBOXD_SCHEMA:-$ROOT/sql/schema.sql}
	local ports pg_port sqs_port ddb_port http_port dlq_arn rp status i
	[ -f "$schema" ] || die "schema file $schema not found"
	for c in curl jq node psql; do
		command -v "$c" >/dev/null || die "$c not found (tests/lib/deps.sh installs it)"
	done
	[ ! -e "$STATE/env" ] || die "$STATE/env exists: a stack is already up there (stack.sh down $STATE)"
	mkdir -p "$STATE"
	STATE=$(cd "$STATE" && pwd -P)
	chmod 0755 "$STATE"
	mkdir -p "$STATE/sqs" "$STATE/ddb"

	ports=$("$LIB/free-port" 4)
	read -r pg_port sqs_port ddb_port http_port <<<"$(echo $ports)"

	"$LIB/pg-up.sh" "$STATE/pg" "$pg_port" >/dev/null
	export PGHOST=127.0.0.1 PGPORT=$pg_port PGUSER=postgres PGDATABASE=outboxd
	PGDATABASE=postgres psql -v ON_ERROR_STOP=1 -qAt -c 'CREATE DATABASE outboxd' >/dev/null ||
		die "CREATE DATABASE outboxd failed"
	psql -v ON_ERROR_STOP=1 -q -f "$schema" >"$STATE/schema.log" 2>&1 ||
		{ cat "$STATE/schema.log" >&2; die "applying $schema failed (psql output above)"; }

	"$LIB/emu-up.sh" fauxqs "$sqs_port" "$STATE/sqs" >/dev/null
	"$LIB/emu-up.sh" dynalite "$ddb_port" "$STATE/ddb" >/dev/null
	SQS_ENDPOINT=http://127.0.0.1:$sqs_port
	DDB_ENDPOINT=http://127.0.0.1:$ddb_port

	DLQ_URL=$(aws_call sqs "$SQS_ENDPOINT" CreateQueue '{"QueueName":"order-events-dlq"}' |
		jq -er .QueueUrl) || die "CreateQueue order-events-dlq failed"
	dlq_arn=$(aws_call sqs "$SQS_ENDPOINT" GetQueueAttributes \
		"$(jq -nc --arg q "$DLQ_URL" '{QueueUrl:$q, AttributeNames:["QueueArn"]}')" |
		jq -er .Attributes.QueueArn) || die "GetQueueAttributes QueueArn failed"
	rp=$(jq -rnc --arg a "$dlq_arn" --arg n "${STACK_MAX_RECEIVE:-5}" \
		'{deadLetterTargetArn:$a, maxReceiveCount:($n|tonumber)} | tostring')
	QUEUE_URL=$(aws_call sqs "$SQS_ENDPOINT" CreateQueue \
		"$(jq -nc --arg rp "$rp" --arg vt "${STACK_VISIBILITY_TIMEOUT:-10}" \
		   '{QueueName:"order-events", Attributes:{VisibilityTimeout:$vt, RedrivePolicy:$rp}}')" |
		jq -er .QueueUrl) || die "CreateQueue order-events failed"

	aws_call dynamodb "$DDB_ENDPOINT" CreateTable '{"TableName":"fulfillments",
		"AttributeDefinitions":[{"AttributeName":"orderId","AttributeType":"S"}],
		"KeySchema":[{"AttributeName":"orderId","KeyType":"HASH"}],
		"BillingMode":"PAY_PER_REQUEST"}' >/dev/null || die "CreateTable fulfillments failed"
	status=
	for i in $(seq 1 100); do
		status=$(aws_call dynamodb "$DDB_ENDPOINT" DescribeTable '{"TableName":"fulfillments"}' |
			jq -r .Table.TableStatus) || true
		[ "$status" = ACTIVE ] && break
		sleep 0.1
	done
	[ "$status" = ACTIVE ] || die "table fulfillments not ACTIVE (status '$status')"

	DATABASE_URL=postgresql://postgres@127.0.0.1:$pg_port/outboxd
	HTTP_PORT=$http_port
	{
		echo "# written by tests/lib/stack.sh up; source it"
		printf 'export %s=%q\n' \
			STACK_DIR "$STATE" \
			OUTBOXD_ROOT "$ROOT" \
			PGHOST 127.0.0.1 PGPORT "$pg_port" PGUSER postgres PGDATABASE outboxd \
			DATABASE_URL "$DATABASE_URL" \
			PG_PORT "$pg_port" \
			SQS_PORT "$sqs_port" SQS_ENDPOINT "$SQS_ENDPOINT" \
			QUEUE_URL "$QUEUE_URL" DLQ_URL "$DLQ_URL" \
			DDB_PORT "$ddb_port" DDB_ENDPOINT "$DDB_ENDPOINT" DDB_TABLE fulfillments \
			HTTP_PORT "$http_port" OUTBOXD_URL "http://127.0.0.1:$http_port" \
			OUTBOXD_CONF "$STATE/outbox.conf"
	} >"$STATE/env"
	export DATABASE_URL HTTP_PORT QUEUE_URL SQS_ENDPOINT DDB_ENDPOINT
	outbox_conf_write "$STATE/outbox.conf"
	echo "stack: up in $STATE: postgres 127.0.0.1:$pg_port, fauxqs $SQS_ENDPOINT, dynalite $DDB_ENDPOINT; outboxd port $http_port (source $STATE/env)"
}

case $CMD in
up)
	trap 'rc=$?; if [ $rc != 0 ]; then echo "stack: up failed, stopping what was started" >&2; STACK_KEEP=1 stack_down >&2 || true; fi' EXIT
	stack_up
	trap - EXIT
	;;
down)	stack_down ;;
env)	cat "$STATE/env" ;;
*)	die "unknown command '$CMD' (up, down or env)" ;;
esac
