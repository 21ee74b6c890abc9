#!/usr/bin/env bash
# b1-keys.sh -- B1 with a unique Idempotency-Key on every request (bench/b1-keys.lua): the
# peers' b1-ingest.sh as it is, but for the wrk script (the vendored workloads stay verbatim
# copies), so its figures sit beside B1's without a key.  Adds the keys written and whether
# every new order got one.
# env: WL (workload folder), the adapter's OB_* settings; B1_THREADS (2) B1_CONNS (32)
#      B1_DURATION (10s) B1_WARMUP (3s); LABEL RESULTS_FILE
set -euo pipefail
source "${WL:?WL: the workload folder (peers/bench copy)}/lib.sh"; IMPL=${IMPL:-$WL/impl/outboxd.sh}; load_impl
LUA=$(cd "$(dirname "$0")" && pwd)/b1-keys.lua
T=${B1_THREADS:-2} C=${B1_CONNS:-32} D=${B1_DURATION:-10s} W=${B1_WARMUP:-3s}
KEYS_COUNT_SQL="select count(*) from outbox_idempotency_keys"
o0=$(sql -c "$ORDERS_COUNT_SQL"); x0=$(sql -c "$OUTBOX_COUNT_SQL"); k0=$(sql -c "$KEYS_COUNT_SQL")
warm=$(wrk -t"$T" -c"$C" -d"$W" -s "$LUA" "$BASE_URL/orders" | sed -n 's/^WRKJSON //p')
out=$(wrk -t"$T" -c"$C" -d"$D" -s "$LUA" "$BASE_URL/orders" | sed -n 's/^WRKJSON //p')
sleep 1   # requests cut off by wrk at the end may still commit
o1=$(sql -c "$ORDERS_COUNT_SQL"); x1=$(sql -c "$OUTBOX_COUNT_SQL"); k1=$(sql -c "$KEYS_COUNT_SQL")
ok2xx=$(jq -n --argjson w "$warm" --argjson o "$out" '($w.requests-$w.non2xx)+($o.requests-$o.non2xx)')
do=$((o1-o0)); dx=$((x1-x0)); dk=$((k1-k0))
result "$(jq -cn --arg impl "$IMPL_NAME" --arg lbl "${LABEL:-ingest-only-keyed}" --argjson o "$out" --argjson dor $do --argjson dxr $dx --argjson dkr $dk --argjson ok $ok2xx \
  '{bench:"b1",impl:$impl,"label":$lbl,keys:true} + $o + {orders_delta:$dor, outbox_delta:$dxr, keys_delta:$dkr, responses_2xx_incl_warmup:$ok, orders_eq_outbox:($dor==$dxr), orders_eq_keys:($dor==$dkr)}')"
