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
    coalesce(round(max(ms)::numeric, 2), 0),
    coalesce(round(percentile_disc(0.5) within group (order by c)::numeric, 2), 0),
    coalesce(round(percentile_disc(0.99) within group (order by c)::numeric, 2), 0),
    coalesce(round(percentile_disc(0.5) within group (order by a)::numeric, 2), 0),
    coalesce(round(percentile_disc(0.99) within group (order by a)::numeric, 2), 0)
  from (select status, extract(epoch from sent_at - created_at) * 1000 as ms,
               extract(epoch from first_claimed_at - created_at) * 1000 as c,
               extract(epoch from sent_at - first_claimed_at) * 1000 as a from outbox) s")
read -r n unsent p50 p95 p99 max c50 c99 a50 a99 <<<"$row"
# The ten slowest rows as "position:ms" (position 1 = the first order of the run): a tail made
# of the first orders after the start is a cold start, one spread over the run is contention.
slowest=$(sql -c "select coalesce(string_agg(rn || ':' || round(ms::numeric, 1), ' ' order by ms desc), '')
  from (select row_number() over (order by id) as rn, extract(epoch from sent_at - created_at) * 1000 as ms
        from outbox where status = 'sent' order by ms desc limit 10) s")
# With track_commit_timestamp on (bench/run.sh sets it), also from the order's commit itself:
# its orders row is never updated, so its xmin is the order's transaction.
commit_row=$(sql -F ' ' -c "select coalesce(round(percentile_disc(0.5) within group (order by ms)::numeric, 2), -1),
    coalesce(round(percentile_disc(0.95) within group (order by ms)::numeric, 2), -1),
    coalesce(round(percentile_disc(0.99) within group (order by ms)::numeric, 2), -1),
    coalesce(round(max(ms)::numeric, 2), -1)
  from (select extract(epoch from o.sent_at - pg_xact_commit_timestamp(r.xmin)) * 1000 as ms
        from outbox o join orders r on r.id::text = o.ordering_key
        where current_setting('track_commit_timestamp') = 'on' and o.status = 'sent') s")
read -r k50 k95 k99 kmax <<<"$commit_row"
# The split at the claim (first_claimed_at: now() of the claiming transaction) says which
# half of the path a tail comes from: created_at -> claim (the order's commit, the NOTIFY,
# the relay's wake-up) and claim -> ack (the claim's answer, the request to SQS).
result "$(jq -cn --arg lbl "${LABEL:-}" --argjson n "$n" --argjson u "$unsent" --argjson a "$p50" --argjson b "$p95" \
  --argjson c "$p99" --argjson m "$max" --argjson c50 "$c50" --argjson c99 "$c99" --argjson a50 "$a50" --argjson a99 "$a99" --arg slow "$slowest" \
  --argjson k50 "$k50" --argjson k95 "$k95" --argjson k99 "$k99" --argjson kmax "$kmax" \
  '{bench:"b3-ack",impl:"outboxd",label:$lbl,events:$n,unsent:$u,ack_p50_ms:$a,ack_p95_ms:$b,ack_p99_ms:$c,ack_max_ms:$m,
    to_claim_p50_ms:$c50,to_claim_p99_ms:$c99,claim_to_ack_p50_ms:$a50,claim_to_ack_p99_ms:$a99,slowest:$slow}
    + (if $k50 < 0 then {} else {commit_ack_p50_ms:$k50,commit_ack_p95_ms:$k95,commit_ack_p99_ms:$k99,commit_ack_max_ms:$kmax} end)')"
