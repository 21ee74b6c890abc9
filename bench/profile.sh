#!/usr/bin/env bash
# profile.sh -- where the time goes for B1, B2 and B3 (bench/README.md "Profiling notes").
#
#   bench/profile.sh [--out DIR] [--no-callgrind] [--no-b3] [--only-b3] [--only-callgrind]
#                    [--wal] [--multi]
#
# About 10 minutes in all on the 2-core machine; --only-b3 runs step 3 alone (about 1 minute),
# on a fresh stack, as the first thing after it comes up; --only-callgrind runs step 2 alone
# (about 3 minutes).
#
# 1. CPU split: during steady B1 (wrk -t2 -c32) and B2 (100,000 rows) the CPU seconds of
#    PostgreSQL, outboxd, the emulators, the nginx sink, the load generator and everything
#    else on the machine (lib/cpu.sh), as JSON lines in DIR/cpu.jsonl; and PostgreSQL's time
#    by statement (pg_stat_statements, nested statements and planning included) in
#    DIR/pgss.LABEL.txt.
# 2. callgrind (perf has no hardware counters on this VM): one HTTP worker under
#    valgrind --tool=callgrind for a short wrk run, one relay draining 2,000 rows to SQS and
#    to the HTTP sink; DIR/callgrind.*.txt are callgrind_annotate's inclusive and
#    self-cost listings, DIR/callgrind.*.objects.txt the cost by shared object.
# 3. B3 hops, run first, on the fresh stack: one B3 run (50 orders/s for 20 s) under a
#    loopback capture (tcpdump, as root); per order, its commit -> ack time split into
#    PostgreSQL, outboxd and the emulator (lib/b3-split.py), in DIR/b3-split.json; the
#    capture and the rows it was matched with are DIR/b3.pcap and DIR/b3-rows.csv, the run's
#    own result DIR/b3.jsonl (and its output b3-e2e.txt), tcpdump's messages tcpdump.log.
# --wal: step 1 only, relay.mode "wal" beside "table" on one server (wal_level = logical,
#    synchronous_commit = on, as run.sh --only wal): B1 full chain to SQS and to the 204 sink,
#    B2 (1 relay) to both, each in both modes, labels ending -table and -wal.  cpu.jsonl then
#    also splits outboxd by worker kind and PostgreSQL's walsender out (lib/cpu.sh).
# --multi: step 1's B2 only, SQS alone beside three destinations (issue 26: the rows in turn
#    to SQS, an SNS topic on fauxqs and the 204 sink, as run.sh's "sqs + sns + http"), 1 and
#    4 relays each: labels b2-sqs-Nrelay and b2-multi-Nrelay.
# Exits non-zero when a step's run or split failed.
# Brings up its own stack (tests/lib/stack.sh) and nginx sink; OUTBOXD_BIN as in run.sh.
# Needs the workload folder: uses the vendored bench/workloads (npm ci in a scratch copy).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
OUT= CG=1 B3=1 SPLIT=1 WAL=0 MULTI=0 tp= failed=0
while [ $# -gt 0 ]; do
  case $1 in
  --out) OUT=${2:?--out needs a folder}; shift ;;
  --no-callgrind) CG=0 ;;
  --no-b3) B3=0 ;;
  --only-b3) SPLIT=0 CG=0 ;;
  --only-callgrind) SPLIT=0 B3=0 ;;
  --wal) WAL=1 CG=0 B3=0 ;;
  --multi) MULTI=1 CG=0 B3=0 ;;
  *) echo "profile.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
OUT=${OUT:-$BENCH/results/profile-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
say() { echo "profile: $(date +%H:%M:%S) $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
OUTBOXD_BIN=${OUTBOXD_BIN:-$ROOT/outboxd}
[ -x "$OUTBOXD_BIN" ] || die "no $OUTBOXD_BIN (make first, or set OUTBOXD_BIN)"
for c in wrk nginx jq psql; do command -v $c >/dev/null || die "$c not found (bench/run.sh installs it: apt-get install wrk nginx-light jq)"; done
[ $CG = 0 ] || command -v valgrind >/dev/null || die "valgrind not found (apt-get install valgrind)"
[ $B3 = 0 ] || command -v tcpdump >/dev/null || die "tcpdump not found (apt-get install tcpdump), or --no-b3"

SCRATCH=$(mktemp -d /tmp/outboxd-profile.XXXXXX); chmod 0755 "$SCRATCH"
mkdir -p "$SCRATCH/peers/bench/impl"; cp "$BENCH"/workloads/* "$SCRATCH/peers/bench/"
export WL=$SCRATCH/peers/bench
cp "$BENCH/impl/outboxd.sh" "$WL/impl/outboxd.sh"
(cd "$WL" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci failed"
cleanup() {
  set +e
  [ -n "${tp:-}" ] && kill "$tp" 2>/dev/null   # the B3 step's tcpdump
  (cd "$WL" && IMPL=$WL/impl/outboxd.sh bash -c 'source lib.sh; load_impl; impl_down') 2>/dev/null
  [ -f "$SCRATCH/run/sink/sink.pid" ] && kill "$(cat "$SCRATCH/run/sink/sink.pid")" 2>/dev/null
  "$ROOT/tests/lib/stack.sh" down "$SCRATCH/stack" >/dev/null 2>&1
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ $WAL = 0 ] || export PG_WAL_LEVEL=logical
"$ROOT/tests/lib/stack.sh" up "$SCRATCH/stack" >&2 || die "stack.sh up failed"
source "$SCRATCH/stack/env"
SINK_PORT=$("$ROOT/tests/lib/free-port")
export OB_BIN=$OUTBOXD_BIN OB_SCHEMA=$ROOT/sql/schema.sql OB_DATABASE_URL=$DATABASE_URL OB_QUEUE_URL=$QUEUE_URL
export OB_SQS_ENDPOINT=$SQS_ENDPOINT OB_DDB_ENDPOINT=$DDB_ENDPOINT OB_PORT=$HTTP_PORT OB_RUN=$SCRATCH/run/outboxd
export OB_SINK_URL=http://127.0.0.1:$SINK_PORT/ SINK_RUN=$SCRATCH/run/sink STACK_DIR NODE_NO_WARNINGS=1
mkdir -p "$SINK_RUN"
sed "s#@RUN@#$SINK_RUN#g; s#@PORT@#$SINK_PORT#g" "$BENCH/sink-nginx.conf.in" >"$SINK_RUN/nginx.conf"
nginx -p "$SINK_RUN" -c "$SINK_RUN/nginx.conf" >"$SINK_RUN/stdout.log" 2>&1 &
echo $! >"$SINK_RUN/sink.pid"
for _ in $(seq 50); do curl -s -o /dev/null -X POST -d '{}' "$OB_SINK_URL" && break; sleep 0.1; done

# pg_stat_statements (nested statements and planning time too) for the PostgreSQL side
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
printf '%s\n' "shared_preload_libraries = 'pg_stat_statements'" "pg_stat_statements.track = all" \
  "pg_stat_statements.track_planning = on" "track_commit_timestamp = on" \
  >>"$STACK_DIR/pg/data/postgresql.conf"
[ $WAL = 0 ] || printf '%s\n' "synchronous_commit = on" "track_wal_io_timing = on" >>"$STACK_DIR/pg/data/postgresql.conf"
as_pg=(); [ "$(id -u)" = 0 ] && as_pg=(runuser -u postgres --)
"${as_pg[@]}" "$PGBIN/pg_ctl" -D "$STACK_DIR/pg/data" -l "$STACK_DIR/pg/pg.log" -w restart >/dev/null ||
  die "PostgreSQL restart with pg_stat_statements failed"
psql -qAtX "$DATABASE_URL" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
# pg_stat_wal between the two snapshots (--wal): WAL records and bytes written, and the
# flushes (wal_sync) and their time, which every commit with synchronous_commit = on waits for.
wal_snap() { psql -qAtX -F' ' "$DATABASE_URL" -c "SELECT wal_records, wal_bytes, wal_sync, wal_sync_time FROM pg_stat_wal" >"$1"; }
wal_result() { # LABEL A B
  local a b
  read -r -a a <"$2"; read -r -a b <"$3"
  echo "{\"bench\":\"wal-io\",\"label\":\"$1\",\"wal_records\":$((b[0] - a[0])),\"wal_bytes\":$((b[1] - a[1])),\"wal_syncs\":$((b[2] - a[2])),\"wal_sync_ms\":$(awk -v x="${a[3]}" -v y="${b[3]}" 'BEGIN { printf "%.0f", y - x }')}" |
    tee -a "$OUT/cpu.jsonl" >&2
}
# Index entries the claims read (B2): outbox_ready_idx (the claims' scan; a row in flight
# stays in it until its mark) and outbox_key_idx (each head's NOT EXISTS), between the two
# snapshots; the statistics collector is read after pg_stat_clear_snapshot().
idx_snap() { psql -qAtX -F' ' "$DATABASE_URL" -c "SELECT pg_stat_clear_snapshot()" -c "SELECT
  sum(idx_tup_read) FILTER (WHERE indexrelname = 'outbox_ready_idx'),
  sum(idx_tup_read) FILTER (WHERE indexrelname = 'outbox_key_idx')
  FROM pg_stat_user_indexes WHERE relname = 'outbox'" | tail -1 >"$1"; }
idx_result() { # LABEL A B EVENTS
  local a b
  read -r -a a <"$2"; read -r -a b <"$3"
  echo "{\"bench\":\"idx-reads\",\"label\":\"$1\",\"ready_idx_read\":$((b[0] - a[0])),\"key_idx_read\":$((b[1] - a[1])),\"ready_idx_per_event\":$(awk -v x=$((b[0] - a[0])) -v n="$4" 'BEGIN { printf "%.1f", x / n }')}" |
    tee -a "$OUT/cpu.jsonl" >&2
}
pgss_reset() { psql -qAtX "$DATABASE_URL" -c "SELECT pg_stat_statements_reset()" >/dev/null; }
pgss_dump() { # LABEL: where PostgreSQL spent its time, by statement (nested ones included)
  psql -X "$DATABASE_URL" -c "SELECT calls, round(total_exec_time::numeric) AS exec_ms,
      round(total_plan_time::numeric) AS plan_ms,
      round(((total_exec_time + total_plan_time) / greatest(calls, 1))::numeric, 3) AS ms_per_call,
      rows, toplevel AS top, left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS query
    FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
    ORDER BY total_exec_time + total_plan_time DESC LIMIT 12" >"$OUT/pgss.$1.txt"
}

cd "$WL"
export IMPL=$WL/impl/outboxd.sh RESULTS_FILE=$OUT/cpu.jsonl
source lib.sh; load_impl; source "$BENCH/lib/cpu.sh"
echo "{\"bench\":\"meta\",\"date\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"commit\":\"$(git -C "$ROOT" rev-parse HEAD 2>/dev/null)\",\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}" >>"$OUT/cpu.jsonl"

# steady-state B1: snapshots 3 s and 9 s into a wrk run, which is stopped after the second
# (wrk prints its figures on SIGINT).  It is given 30 s: on a saturated machine a snapshot
# itself takes seconds, and wrk must still be running when the second one looks for it.
b1_split() { # LABEL
  wrk -t2 -c32 -d30s -s b1-post.lua "$BASE_URL/orders" >"$OUT/wrk.$1.txt" 2>&1 &
  local w=$!
  sleep 3; cpu_snap "$SCRATCH/a"; pgss_reset; wal_snap "$SCRATCH/wa"
  sleep 6; cpu_snap "$SCRATCH/b"; wal_snap "$SCRATCH/wb"; pgss_dump "$1"
  kill -INT $w 2>/dev/null; wait $w
  cpu_result "$1" "$SCRATCH/a" "$SCRATCH/b"
  wal_result "$1" "$SCRATCH/wa" "$SCRATCH/wb"
}
# B2: N rows, R relays; snapshots 0.5 s after the start and when 20% are left (or ~3 min).
# 100,000 rows, not B2's 20,000: those drain in under 2 s now, most of it before the first
# snapshot is taken.  Written 20,000 a transaction: the schema's commit stamp takes a lock
# per key, and 100,000 in one transaction overflow PostgreSQL's lock table.
b2_split() { # LABEL RELAYS
  local p p0 n=100000
  impl_relays_stop; impl_consumers_stop
  for _ in 1 2 3 4 5; do sql -v n=$((n / 5)) <<<"$B2_INSERT_SQL" >/dev/null; done
  impl_relays_start "$2"; sleep 0.5
  cpu_snap "$SCRATCH/a"; pgss_reset; wal_snap "$SCRATCH/wa"; idx_snap "$SCRATCH/ia"; p0=$(sql -c "$OUTBOX_PENDING_SQL")
  for _ in $(seq 1200); do
    p=$(sql -c "$OUTBOX_PENDING_SQL"); [ "$p" -le $((n / 5)) ] && break; sleep 0.1
  done
  cpu_snap "$SCRATCH/b"; wal_snap "$SCRATCH/wb"; idx_snap "$SCRATCH/ib"; pgss_dump "$1"
  # the rows sent between the two snapshots, the window every figure covers
  cpu_result "$1 events=$((p0 - p))" "$SCRATCH/a" "$SCRATCH/b"
  idx_result "$1" "$SCRATCH/ia" "$SCRATCH/ib" $((p0 - p))
  wal_result "$1 events=$((p0 - p))" "$SCRATCH/wa" "$SCRATCH/wb"
  impl_relays_stop
}

# Step 3 first: B3 on a fresh stack (after B2's drains fauxqs answers slower).
if [ $B3 = 1 ]; then
  say "B3 hops: one B3 run under a loopback capture"
  tcpdump -i lo -s 0 -B 16384 -U -w "$OUT/b3.pcap" "tcp port $SQS_PORT or tcp port $PG_PORT" \
    2>"$OUT/tcpdump.log" &
  tp=$!
  for _ in $(seq 50); do grep -q 'listening on' "$OUT/tcpdump.log" && break; sleep 0.1; done
  grep -q 'listening on' "$OUT/tcpdump.log" ||
    die "tcpdump did not start (root is needed): $(cat "$OUT/tcpdump.log")"
  b3ok=1
  RESULTS_FILE=$OUT/b3.jsonl LABEL=profile-b3 ./b3-e2e.sh >"$OUT/b3-e2e.txt" 2>&1 || b3ok=0
  sleep 1   # tcpdump writes what the kernel still holds, then stops
  kill "$tp" 2>/dev/null; wait "$tp" 2>/dev/null; tp=
  drops=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$OUT/tcpdump.log")
  [ "${drops:-0}" = 0 ] || say "WARNING: tcpdump dropped $drops packets: rows will be missing"
  # b3-e2e.sh starts from an empty outbox: every row is one of its orders
  sql -F, -c "SELECT o.id, extract(epoch FROM o.created_at), extract(epoch FROM
      pg_xact_commit_timestamp(r.xmin)), extract(epoch FROM o.sent_at), r.id
    FROM outbox o JOIN orders r ON r.id::text = o.ordering_key WHERE o.status = 'sent'" >"$OUT/b3-rows.csv"
  if [ $b3ok = 0 ]; then
    say "b3-e2e.sh failed, no split: $OUT/b3-e2e.txt"; failed=1
  elif python3 "$BENCH/lib/b3-split.py" "$OUT/b3.pcap" "$SQS_PORT" "$PG_PORT" "$OUT/b3-rows.csv" \
    >"$OUT/b3-split.json"; then
    say "B3 hops (ms, p50/p99): $(jq -r '[.total_ms, .statement_ms, .reply_ms, .to_sqs_ms, .sqs_ms, .to_stamp_ms] |
      map("\(.p50)/\(.p99)") | "total \(.[0]), statement \(.[1]), reply \(.[2]), to_sqs \(.[3]), sqs \(.[4]), to_stamp \(.[5])"' "$OUT/b3-split.json")"
  else
    say "b3-split.py failed"; failed=1
  fi
  impl_down
fi

if [ $SPLIT = 1 ] && [ $WAL = 1 ]; then
  say "CPU split: B1 ingest only"
  impl_reset >/dev/null; OB_RELAYS=0 OB_CONSUMERS=0 impl_up; sleep 1
  b1_split b1-ingest-only
  for OB_RELAY_MODE in table wal; do
    for sink in sqs http; do
      say "CPU split: B1 full chain to $sink, relay.mode $OB_RELAY_MODE"
      impl_reset >/dev/null; OB_SINK=$sink impl_up; sleep 1
      OB_SINK=$sink b1_split "b1-full-chain-$sink-$OB_RELAY_MODE"
      say "CPU split: B2 $sink, 1 relay, relay.mode $OB_RELAY_MODE"
      impl_reset >/dev/null
      OB_SINK=$sink b2_split "b2-$sink-1relay-$OB_RELAY_MODE" 1
    done
  done
  OB_RELAY_MODE=table SPLIT=0
fi
if [ $SPLIT = 1 ] && [ $MULTI = 1 ]; then
  OB_SNS_TOPIC=$(/usr/bin/python3 "$ROOT/tests/lib/sns-setup.py" --endpoint "$OB_SQS_ENDPOINT" \
    topic bench-events) || die "CreateTopic bench-events failed"
  export OB_SNS_TOPIC
  for cfg in "sqs 1" "multi 1" "sqs 4" "multi 4"; do
    set -- $cfg
    say "CPU split: B2 $1, $2 relay(s)"
    # the adapter's B2 rows (B2_INSERT_SQL) follow OB_SINK: loaded again for each
    (export OB_SINK=$1; load_impl; impl_reset >/dev/null; b2_split "b2-$1-$2relay" "$2")
  done
  SPLIT=0
fi
if [ $SPLIT = 1 ]; then
  say "CPU split: B1 ingest only"
  impl_reset >/dev/null; OB_RELAYS=0 OB_CONSUMERS=0 impl_up; sleep 1
  b1_split b1-ingest-only
  say "CPU split: B1 default configuration"
  impl_reset >/dev/null; impl_up; sleep 1
  b1_split b1-full-chain
  IDX="CREATE INDEX IF NOT EXISTS bench_outbox_busy_idx ON outbox (ordering_key) WHERE status <> 'sent' AND (status = 'failed' OR first_claimed_at IS NOT NULL)"
  for cfg in "sqs 1" "sqs 4" "http 1" "http 4" "sqs 1 index" "sqs 4 index"; do
    set -- $cfg
    say "CPU split: B2 $1, $2 relay(s)${3:+, with the proposed index}"
    impl_reset >/dev/null
    OB_SINK=$1 OB_EXTRA_SQL=${3:+$IDX} b2_split "b2-$1-$2relay${3:+-index}" "$2"
  done
  sql -c "DROP INDEX IF EXISTS bench_outbox_busy_idx" >/dev/null
fi

if [ $CG = 1 ]; then
  # outboxd under callgrind: forked workers are followed (one output file per process)
  cg_start() { # NAME HTTP RELAYS
    local p
    _ob_stop; _ob_wake; mkdir -p "$OB_RUN"
    _ob_conf "$OB_RUN/outbox.conf" "$2" "$3" 0
    : >"$OB_RUN/outboxd.log"
    valgrind --tool=callgrind --callgrind-out-file="$SCRATCH/cg.$1.%p" "$OB_BIN" -c "$OB_RUN/outbox.conf" >>"$OB_RUN/outboxd.log" 2>&1 &
    p=$!; echo "$p" >"$OB_RUN/outboxd.pid"; echo "cg" >"$OB_RUN/running"
    for _ in $(seq 600); do
      if [ "$2" -gt 0 ]; then curl -s -o /dev/null -m 1 "$BASE_URL/healthz" && return 0
      else [ "$(grep -c 'publishing to' "$OB_RUN/outboxd.log")" -ge "$3" ] && return 0; fi
      sleep 0.1
    done
    die "outboxd under valgrind did not come up: $(tail -5 "$OB_RUN/outboxd.log")"
  }
  cg_report() { # NAME ROLE-title-pattern
    local f biggest=""
    _ob_stop; sleep 1
    # the worker's file is the largest cost file except the master's (the master is the
    # first pid); pick by total Ir
    biggest=$(for f in "$SCRATCH"/cg."$1".*; do
      echo "$(awk '/^(summary|totals):/{print $2; exit}' "$f") $f"; done | sort -n | tail -1 | cut -d' ' -f2)
    [ -n "$biggest" ] || { say "no callgrind output for $1"; return; }
    callgrind_annotate --inclusive=yes "$biggest" 2>/dev/null | head -60 >"$OUT/callgrind.$1.inclusive.txt"
    callgrind_annotate "$biggest" 2>/dev/null | head -60 >"$OUT/callgrind.$1.self.txt"
    # self cost by shared object
    callgrind_annotate --threshold=100 --show-percs=no "$biggest" 2>/dev/null | awk '
      /^-+$/ { sep++; next } sep >= 2 && NF >= 3 {
        ir = $1; gsub(",", "", ir); if (ir !~ /^[0-9]+$/) next
        obj = $NF; if (obj !~ /^\[.*\]$/) next
        sub(/^\[.*\//, "", obj); sub(/\]$/, "", obj); s[obj] += ir; t += ir }
      END { for (o in s) printf "%5.1f%% %s\n", 100 * s[o] / t, o }' | sort -rn | head -12 >"$OUT/callgrind.$1.objects.txt"
    cp "$biggest" "$OUT/callgrind.out.$1"
    say "callgrind $1: $(head -3 "$OUT/callgrind.$1.objects.txt" | tr '\n' ' ')"
  }
  say "callgrind: one HTTP worker, wrk -t1 -c8 -d10s"
  impl_reset >/dev/null
  cg_start http 1 0
  wrk -t1 -c8 -d10s -s b1-post.lua "$BASE_URL/orders" >"$OUT/wrk.callgrind.txt" 2>&1
  cg_report http
  for sink in sqs http; do
    say "callgrind: one relay draining 2,000 rows to $sink"
    impl_reset >/dev/null
    sql -v n=2000 <<<"$B2_INSERT_SQL" >/dev/null
    OB_SINK=$sink cg_start "relay-$sink" 0 1
    for _ in $(seq 1200); do [ "$(sql -c "$OUTBOX_PENDING_SQL")" = 0 ] && break; sleep 0.1; done
    cg_report "relay-$sink"
  done
fi
say "done: $OUT"
exit $failed
