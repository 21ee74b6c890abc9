#!/usr/bin/env bash
# b5-consumer.sh -- B5 (issue 32): the consumer's drain.  B5_N messages (20,000) are put
# in the queue the way the relays put them (B2's rows, relayed with the consumers stopped),
# then the consumers alone are started: items/s from that start until the queue is empty
# (every message deleted, which happens only after its item is written), and the items
# counted at the end.  Run from the workload folder with the outboxd adapter loaded, as
# bench/run.sh's other workloads are.
# env: B5_N (20000), OB_CONSUMERS (1), OB_CONSUMER_CONCURRENCY (unset: the default),
#      B5_MAX_S (180), LABEL, RESULTS_FILE
set -euo pipefail
source "${WL:?WL: the workload folder (peers/bench copy)}/lib.sh"; IMPL=${IMPL:-$WL/impl/outboxd.sh}; load_impl
N=${B5_N:-20000} MAX=${B5_MAX_S:-180} C=${OB_CONSUMERS:-1}
# The queue's depth (visible + in flight) with tests/lib/aws.sh's curl call, not tools.mjs:
# a Node process with the AWS SDK every 0.1 s took most of a core from the drain it measured
# (perf -a: short-lived node processes 39% of the two cores).
source "$(dirname "$0")/../tests/lib/aws.sh"
depth() {
  aws_call sqs "${SQS_ENDPOINT:?}" GetQueueAttributes "$(jq -cn --arg q "$SQS_QUEUE_URL" \
    '{QueueUrl:$q,AttributeNames:["ApproximateNumberOfMessages","ApproximateNumberOfMessagesNotVisible"]}')" |
    jq -e '.Attributes | (.ApproximateNumberOfMessages|tonumber) + (.ApproximateNumberOfMessagesNotVisible|tonumber)'
}

impl_reset >/dev/null
# Fill the queue through outboxd's own relays (consumers off): relay-shaped messages.
impl_consumers_stop
sql -v n="$N" <<<"$B2_INSERT_SQL" >/dev/null
impl_relays_start 2
for _ in $(seq $((MAX * 10))); do
  [ "$(sql -c "$OUTBOX_PENDING_SQL")" = 0 ] && break; sleep 0.1
done
impl_relays_stop
q=$(depth)
[ "$q" = "$N" ] || { echo "b5: $q messages queued, expected $N" >&2; exit 1; }

# The consumers alone (no HTTP worker, no relay).
rm -f "$OB_RUN/consumers-off"
t0=$(now); _ob_start 0 0 "$C"
while :; do
  q=$(depth); t=$(now); el=$(fsub "$t" "$t0")
  [ "$q" = 0 ] && break
  awk -v e="$el" -v m="$MAX" 'BEGIN{exit !(e>=m)}' && break
  sleep 0.1
done
impl_relays_stop
items=$(tools ddb-count "$DDB_TABLE")
result "$(jq -cn --arg impl "$IMPL_NAME" --arg lbl "${LABEL:-}" --argjson n "$N" --argjson c "$C" \
  --arg cc "${OB_CONSUMER_CONCURRENCY:-default}" --argjson el "$el" --argjson left "$q" --argjson items "$items" \
  '{bench:"b5",impl:$impl,label:$lbl,consumers:$c,concurrency:$cc,queued:$n,left:$left,items:$items,elapsed_s:$el,
    items_per_s:(($items/$el*10|round)/10),complete:($left==0 and $items==$n)}')"
