#!/usr/bin/env bash
# dest-isolation.sh -- a destination that is down backs off alone.  Two
# destinations: the SQS queue (the default) and a webhook ("hooks").  One
# psql session writes a transaction every 100 ms with one row for each,
# keys from a small pool, for 40 s; from the 10th second the webhook
# answers 500 to everything for 15 s, then hangs past its timeout for
# 15 s.  Meanwhile every SQS row is sent
# within 2 s of its commit (p50/p99 reported for the calm part and the
# outage), the queue receives each once, and once the webhook is back every
# one of its rows arrives, per key in commit order, none dead-lettered.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up
webhook_receiver_start

CALM=10		# s before the outage
OUTAGE=30	# s the webhook answers 500
TXNS=$(((CALM + OUTAGE) * 10))
KEYS=8

# The webhook's rows retry quickly, so that the outage keeps its
# destination busy failing rather than idle in backoff.
OB_CONSUMER_WORKERS=0 OB_POLL_INTERVAL=200 outbox_conf_write "$T_DIR/outbox.conf"
sed -i "s/^relay {/relay {\n\tbackoff_base = 200\n\tbackoff_max = 1000\n\tmax_attempts = 1000/" "$T_DIR/outbox.conf"
cat >>"$T_DIR/outbox.conf" <<CONF

destination hooks {
	sink = "http"
	url = "$WH/hooks"
	secret = "$SECRET"
	timeout = 2000
}
CONF
outboxd_start "$T_DIR/outbox.conf"
check "the relays publish to both destinations" \
	grep -q 'msg="publishing to http .*destination=hooks' "$OUTBOXD_LOG"

# The writer: TXNS transactions, 100 ms apart, each with a row for the
# default destination and one for hooks; seq orders a key's rows.
{
	for i in $(seq 1 $TXNS); do
		k=$((i % KEYS))
		printf "BEGIN;\n"
		printf "INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('iso.event', 'q-%d', '{\"seq\": %d}');\n" "$k" "$i"
		printf "INSERT INTO outbox (event_type, ordering_key, payload, destination) VALUES ('iso.event', 'h-%d', '{\"seq\": %d}', 'hooks');\n" "$k" "$i"
		printf "COMMIT;\nSELECT pg_sleep(0.1);\n"
	done
} >"$T_DIR/writer.sql"
psql -X -v ON_ERROR_STOP=1 -qAt -f "$T_DIR/writer.sql" >"$T_DIR/writer.out" 2>&1 &
WRITER=$!
t0=$(date +%s.%N)
sleep $CALM
outage_from=$(date +%s.%N)
curl -fsS -o /dev/null -X POST "$WH/__control" \
	--data-binary '{"script": [], "default": {"status": 500, "body": "down (injected)"}}' ||
	die "could not script the receiver"
say "webhook answers 500 from now on for $((OUTAGE / 2))s"
sleep $((OUTAGE / 2))
# Then it hangs: each delivery runs into the destination's timeout.
curl -fsS -o /dev/null -X POST "$WH/__control" \
	--data-binary '{"script": [], "default": {"status": 500, "delay_ms": 3000}}' ||
	die "could not script the receiver"
say "webhook hangs (3 s, past its 2 s timeout) from now on for $((OUTAGE / 2))s"
sleep $((OUTAGE / 2))
outage_to=$(date +%s.%N)
curl -fsS -o /dev/null -X POST "$WH/__control" \
	--data-binary '{"script": [], "default": {"status": 204}}' ||
	die "could not script the receiver"
say "webhook answers 204 again"
wait "$WRITER"
check_eq "the writer's transactions all committed (psql exit status)" 0 $?

all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" = $((2 * TXNS)) ]; }
wait_until 60 "every row sent" all_sent || true
check_eq "rows sent" $((2 * TXNS)) "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "rows dead-lettered" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"

# The default destination during the outage: commit -> broker ack.
lat() {	# FROM TO (unix s): "n p50 p99 max" in ms of the SQS rows created then
	sql "SELECT count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l)),
		round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l)), round(max(l))
	FROM (SELECT 1000 * extract(epoch FROM sent_at - created_at) AS l FROM outbox
		WHERE destination IS NULL AND created_at >= to_timestamp($1)
		  AND created_at < to_timestamp($2)) s" | tr '|' ' '
}
read -r n1 p50_1 p99_1 max_1 <<<"$(lat "$t0" "$outage_from")"
read -r n2 p50_2 p99_2 max_2 <<<"$(lat "$outage_from" "$outage_to")"
say "SQS commit -> ack before the outage: n=$n1 p50 ${p50_1} ms p99 ${p99_1} ms max ${max_1} ms"
say "SQS commit -> ack during the outage: n=$n2 p50 ${p50_2} ms p99 ${p99_2} ms max ${max_2} ms"
check "SQS rows were written during the outage ($n2)" [ "${n2:-0}" -ge $((OUTAGE * 10 * 9 / 10)) ]
check_eq "SQS rows sent more than 2 s after their commit" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE destination IS NULL
		AND sent_at - created_at > interval '2 s'")"
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" \
	--count "$TXNS" --idle 5 >"$T_DIR/queue.txt" || true
check_eq "messages on the SQS queue" "$TXNS" "$(wc -l <"$T_DIR/queue.txt")"
check_eq "distinct seqs among them" "$TXNS" \
	"$(cut -f4 "$T_DIR/queue.txt" | jq -r .seq | sort -u | wc -l)"

# The webhook: the outage happened, then every row arrived, per key in order.
n500=$(jq -r 'select(.status == 500) | .n' "$REC" | wc -l)
check "the webhook refused deliveries during the outage ($n500)" [ "$n500" -ge 50 ]
jq -r 'select(.status >= 200 and .status < 300) | [.body | fromjson | .seq] | @tsv' "$REC" >"$T_DIR/hook-seqs.txt"
check_eq "rows the webhook received (2xx), once each" "$TXNS" "$(sort -un "$T_DIR/hook-seqs.txt" | wc -l)"
check_eq "... and no row twice" "$TXNS" "$(wc -l <"$T_DIR/hook-seqs.txt")"
inv=$(awk -v K=$KEYS '{ k = $1 % K; if (k in last && $1 < last[k]) bad++; last[k] = $1 } END { print bad + 0 }' \
	"$T_DIR/hook-seqs.txt")
check_eq "webhook deliveries out of their key's commit order" 0 "$inv"
check "the webhook's failures were logged under its destination" \
	grep -q 'msg="webhook: [0-9]* of [0-9]* deliveries failed.*destination=hooks' "$OUTBOXD_LOG"
check "no SQS failure was logged" bash -c "! grep -q 'SendMessageBatch of' '$OUTBOXD_LOG'"

outboxd_stop
