#!/usr/bin/env bash
# ceiling.sh -- the physical ceiling: pgbench running POST /orders' own statement (the
# order + outbox CTE of src/http_orders.c, one autocommitted statement, prepared) with the same
# client count as B1 on outboxd's database, outboxd stopped.
#   notify-off       sessions as outboxd's HTTP workers (HTTP_SESSION_OPTIONS of
#                    src/outboxd.h: outboxd.notify = off, outboxd.stamp = off): no NOTIFY
#   notify-trigger   the same but for outboxd.notify: sql/schema.sql's trigger sends one
#                    NOTIFY per transaction (the naive wake-up; the ~28% of DELIVERY-NOTES.md)
# Each run starts from empty tables (truncate, checkpoint) like B1.
# env: WL (workload dir: lib.sh, the adapter), IMPL=outboxd and the adapter's OB_* settings;
#      CEIL_CLIENTS (32) CEIL_THREADS (2) CEIL_DURATION (10) CEIL_WARMUP (3)
#      CEIL_MODES ("trigger off")  LABEL RESULTS_FILE
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "${WL:?WL: the workload folder (peers/bench copy)}/lib.sh"; IMPL=${IMPL:-$WL/impl/outboxd.sh}; load_impl
C=${CEIL_CLIENTS:-32} J=${CEIL_THREADS:-2} D=${CEIL_DURATION:-10} W=${CEIL_WARMUP:-3}
SRC=${OB_HTTP_C:-$(dirname "$OB_SCHEMA")/../src/http_orders.c}
script=$(mktemp /tmp/ceiling.XXXXXX.sql)
trap 'rm -f "$script"' EXIT

# The statement, taken from src/http_orders.c so the ceiling runs exactly what outboxd runs: its
# declaration and the HTTP_SQL_* macros it is built from, through the C preprocessor, then
# the adjacent string literals joined.
stmt=$({ awk '/^#define[ \t]+HTTP_SQL_/{f=1} f{print} f&&!/\\$/{f=0}' "$SRC"
         awk '/http_sql_insert\[\] =/{f=1} f{print} f&&/;[[:space:]]*$/{exit}' "$SRC"; } 2>/dev/null |
  cpp -P 2>/dev/null | grep -o '"\([^"\\]\|\\.\)*"' | sed 's/^"//; s/"$//' | tr -d '\n' |
  sed 's/\\"/"/g')
case $stmt in
"WITH o AS (INSERT INTO orders"*'$1'*'$2'*) ;;
*) echo "ceiling: cannot read http_sql_insert from $SRC" >&2; exit 1 ;;
esac
{
  echo '\set cust random(0, 999)'
  echo '\set amt random(100, 10099)'
  printf '%s\n' "$stmt" | sed 's/\$1/:cust/; s/\$2/:amt/'
} >"$script"

# The HTTP workers' session options (src/outboxd.h HTTP_SESSION_OPTIONS: notify off, and
# whatever else their sessions skip), so the ceiling runs as outboxd's own sessions do.
HDR=$(dirname "$SRC")/outboxd.h
sess=$(awk '/#define[ \t]+HTTP_SESSION_OPTIONS/{f=1} f{print} f&&!/\\$/{exit}' "$HDR" 2>/dev/null |
  sed -n 's/^[^"]*"\(.*\)".*$/\1/p' | tr -d '\n')
[ -n "$sess" ] || sess="-c TimeZone=UTC -c outboxd.notify=off"
case $sess in *outboxd.notify=off*) ;; *) sess="$sess -c outboxd.notify=off" ;; esac

impl_down
OB_WAKE=self _ob_wake
for mode in ${CEIL_MODES:-trigger off}; do
  # off: exactly the HTTP workers' options; trigger: the same but the NOTIFY trigger fires
  opts=$sess; [ "$mode" = off ] || opts=$(sed 's/-c outboxd.notify=off//' <<<"$sess")
  sql -c "truncate orders, outbox" -c "checkpoint" >/dev/null
  PGOPTIONS="$opts" pgbench -n -M prepared -c "$C" -j "$J" -T "$W" -f "$script" "$DATABASE_URL" >/dev/null 2>&1 || true
  sql -c "truncate orders, outbox" -c "checkpoint" >/dev/null
  o0=$(sql -c "select count(*) from outbox")
  out=$(PGOPTIONS="$opts" pgbench -n -M prepared -c "$C" -j "$J" -T "$D" -f "$script" "$DATABASE_URL" 2>&1) ||
    { echo "$out" >&2; exit 1; }
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time).*/\1/p' <<<"$out")
  lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' <<<"$out")
  n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
  fail=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
  o1=$(sql -c "select count(*) from outbox")
  result "$(jq -cn --arg lbl "${LABEL:+$LABEL-}notify-$mode" --arg mode "$mode" --arg opts "$opts" --argjson c "$C" --argjson d "$D" \
    --argjson tps "${tps:-0}" --argjson lat "${lat:-0}" --argjson n "${n:-0}" --argjson f "${fail:-0}" --argjson rows $((o1-o0)) \
    '{bench:"ceiling",impl:"pgbench",label:$lbl,notify:$mode,session_options:$opts,clients:$c,duration_s:$d,tps:$tps,latency_avg_ms:$lat,transactions:$n,failed:$f,outbox_rows:$rows}')"
done
sql -c "truncate orders, outbox" >/dev/null
