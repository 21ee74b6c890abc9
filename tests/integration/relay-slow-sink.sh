#!/usr/bin/env bash
# relay-slow-sink.sh -- a broker that takes 2.5 s per SendMessageBatch (the
# fault proxy delays each one).  A relay claims more rows than its sink
# takes at once; the rest wait in the relay for a free slot.  With lease =
# 4000 ms and relay.timeout = 3000 ms a row may wait at most 1 s: one that
# waited longer could still be at the broker when its lease ends and the
# next claim takes it again, and it would be published twice.  Such rows
# are left to the end of their lease instead, with a warning.
# Asserts: the warning is logged; every row ends 'sent' after one attempt
# and the queue holds exactly one message per row; nothing failed.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

N=400
proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
fault_ctl -X POST --data-binary '{"mode":"delay","ms":2500,"actions":["SendMessageBatch"]}' >/dev/null
# No consumer: the queue keeps every message for the count below.
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events \
	OB_RELAY_WORKERS=1 OB_BATCH_SIZE=100 OB_CONSUMER_WORKERS=0 OB_HTTP_WORKERS=1 \
	OB_POLL_INTERVAL=200 relay_conf_write "$T_DIR/outbox.conf" \
	"lease = 4000" "timeout = 3000" "max_attempts = 10"
outboxd_start "$T_DIR/outbox.conf"

sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'order.created', 'k' || i, json_build_object('n', i)
	FROM generate_series(1, $N) i"
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" = "$N" ]; }
wait_until 120 "all $N rows sent" all_sent || true
outboxd_stop

check "rows that waited too long for the sink were left to their lease (warning logged)" \
	grep -q 'the sink is slow: [0-9]* claimed row(s) waited' "$OUTBOXD_LOG"
check_eq "rows sent" "$N" "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "rows failed" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"
check_eq "rows published more than once (attempts > 1)" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE attempts > 1")"
check_eq "messages in the queue (one per row)" "$N" \
	"$(sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessages)"
