#!/usr/bin/env bash
# b6-hot-key.sh -- B6 (issue 32): a hot key.  B6_HOT rows (100,000) behind one ordering key
# whose head can never be published (a payload over relay.max_message_size: the relay
# dead-letters it at its first claim and holds the key's rows), plus B2_N rows (20,000) on
# fresh keys inserted after them; one relay is started and timed until the fresh keys'
# rows are all sent -> their events/s ("hot").  Run twice by bench/run.sh: with the hot key
# and without it ("none"), same rows otherwise.
# B6_STREAM=1 writes the hot key's rows one transaction each (a service's stream of events)
# instead of in one statement: then none is held at its commit (outbox_stamp() holds a
# transaction's later rows of a key), and the relay's dead-letter of the head holds them.
# outbox_claim()'s time per claimed row comes from pg_stat_user_functions (track_functions
# = pl for the relays' sessions): its total time over the rows claimed (first_claimed_at).
# env: B6_HOT (100000; 0 = no hot key), B6_STREAM (0), B2_N (20000), B6_MAX_S (180), LABEL,
#      RESULTS_FILE
set -euo pipefail
source "${WL:?WL: the workload folder (peers/bench copy)}/lib.sh"; IMPL=${IMPL:-$WL/impl/outboxd.sh}; load_impl
HOT=${B6_HOT:-100000} N=${B2_N:-20000} MAX=${B6_MAX_S:-180}
FRESH_PENDING="select count(*) from outbox where status = 'pending' and ordering_key <> 'b6-hot'"
impl_reset >/dev/null
impl_consumers_stop
if [ "$HOT" -gt 0 ]; then
  sql -c "insert into outbox (event_type, ordering_key, payload)
    select 'order.created', 'b6-hot', json_build_object('seq', 0, 'pad', repeat('x', 300000))" >/dev/null
  if [ "${B6_STREAM:-0}" = 1 ]; then
    sql -c "set synchronous_commit = off" -c "do \$\$ begin for g in 1..$HOT loop
      insert into outbox (event_type, ordering_key, payload)
      values ('order.created', 'b6-hot', json_build_object('seq', g)); commit; end loop; end \$\$" >/dev/null
  else
    sql -c "insert into outbox (event_type, ordering_key, payload)
      select 'order.created', 'b6-hot', json_build_object('seq', g) from generate_series(1, $HOT) g" >/dev/null
  fi
fi
sql -v n="$N" <<<"$B2_INSERT_SQL" >/dev/null
# Vacuumed before the clock starts: 120,000 rows written seconds before the drain otherwise
# leave autovacuum to run during it in some variants and not in others (after the one
# statement it did, after the slow stream of transactions it had not yet), and that, not the
# claims, was most of the difference between them.
sql -c "vacuum analyze outbox" >/dev/null
p0=$(sql -c "$FRESH_PENDING")
CLAIM_FN="'outbox_claim(bigint,bigint,integer,text,text[])'::regprocedure"
sql -c "do \$\$ begin execute format('alter database %I set track_functions = pl', current_database()); end \$\$" \
  -c "select pg_stat_reset_single_function_counters($CLAIM_FN)" >/dev/null
t0=$(now); impl_relays_start 1
while :; do
  p=$(sql -c "$FRESH_PENDING"); t=$(now); el=$(fsub "$t" "$t0")
  [ "$p" = 0 ] && break
  awk -v e="$el" -v m="$MAX" 'BEGIN{exit !(e>=m)}' && break
  sleep 0.1
done
held=$(sql -c "select count(*) filter (where held) || ' ' || count(*) filter (where status = 'failed') from outbox where ordering_key = 'b6-hot'" 2>/dev/null || echo "0 0")
impl_relays_stop
sleep 1  # the relays' sessions have ended and flushed their function counters
read -r claim_calls claim_ms claimed <<<"$(sql -F ' ' -c "select coalesce(max(calls), 0), coalesce(max(total_time), 0),
  (select count(*) from outbox where first_claimed_at is not null)
  from pg_stat_user_functions where funcid = $CLAIM_FN::oid")"
sql -c "do \$\$ begin execute format('alter database %I reset track_functions', current_database()); end \$\$" >/dev/null
result "$(jq -cn --arg impl "$IMPL_NAME" --arg lbl "${LABEL:-}" --argjson hot "$HOT" --argjson n "$p0" --argjson el "$el" \
  --argjson left "$p" --arg held "$held" --argjson stream "${B6_STREAM:-0}" \
  --argjson cc "$claim_calls" --argjson cms "$claim_ms" --argjson cr "$claimed" \
  '{bench:"b6",impl:$impl,label:$lbl,hot_rows:$hot,fresh_rows:$n,left:$left,elapsed_s:$el,
    events_per_s:((($n-$left)/$el*10|round)/10),held:($held|split(" ")[0]|tonumber),
    head_failed:($held|split(" ")[1]|tonumber),complete:($left==0),stream:($stream==1),
    claim_calls:$cc,claim_ms:(($cms*10|round)/10),claimed_rows:$cr,
    claim_us_per_row:(if $cr > 0 then ($cms*1000/$cr*100|round)/100 else null end)}')"
