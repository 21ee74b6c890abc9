#!/usr/bin/env bash
# b3-ack.sh -- B3's second figure, from outboxd's own timestamps: per outbox row, commit ->
# broker acknowledgement = sent_at - created_at (created_at: now() of the order's
# transaction, a fraction of a millisecond before its commit; sent_at: the moment SQS's
# answer to the batch reached the relay, by its clock).  Run right after b3-e2e.sh (which
# starts from an empty outbox, so every row is one of B3's orders).
# env: WL (workload folder), the adapter's OB_* settings; LABEL RESULTS_FILE
set -euo pipefail
source "${WL:?WL: the workload folder (peers/bench copy)}/lib.sh"; IMPL=${IMPL:-$WL/impl/outboxd.sh}; load_impl
row=$(sql -F ' ' -c "select count(*), count(*) filter (where status <> 'sent'),
    coalesce(round(percentile_disc(0.5) within group (order by ms)::numeric, 2), 0),
    coalesce(round(percentile_disc(0.95) within group (order by ms)::numeric, 2), 0),
    coalesce(round(percentile_disc(0.99) within group (order by ms)::numeric, 2), 0),
    coalesce(round(max(ms)::numeric, 2), 0)
  from (select status, extract(epoch from sent_at - created_at) * 1000 as ms from outbox) s")
read -r n unsent p50 p95 p99 max <<<"$row"
result "$(jq -cn --arg lbl "${LABEL:-}" --argjson n "$n" --argjson u "$unsent" --argjson a "$p50" --argjson b "$p95" \
  --argjson c "$p99" --argjson m "$max" \
  '{bench:"b3-ack",impl:"outboxd",label:$lbl,events:$n,unsent:$u,ack_p50_ms:$a,ack_p95_ms:$b,ack_p99_ms:$c,ack_max_ms:$m}')"
