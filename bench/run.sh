#!/usr/bin/env bash
# bench/run.sh -- outboxd's benchmarks (B1-B4, NOTIFY cost, pgbench ceiling) and, when the
# peers' kit is there, the same workloads on the reference Node server and graphile-worker,
# all in one run on one local stack.  See bench/README.md.
#
#   bench/run.sh [--quick] [--outboxd-only] [--only LIST] [--reps N] [--out DIR]
#                [--no-install] [--keep]
#
#   --quick          short runs for trying the bench out (1 rep, B1 3 s, B2 2,000 rows,
#                    B3 5 s); figures from it are not for reporting
#   --outboxd-only   skip the peers even when their kit is there (pto included)
#   --only LIST      run only these parts of outboxd's run, comma-separated: b1 (B1 and its
#                    variants), keys (B1 ingest only with and without an Idempotency-Key
#                    per request, also part of b1), ceiling (NOTIFY cost and pgbench), b2,
#                    b3, b4, b5 (the consumer drain and dynalite's PutItem ceiling), b6
#                    (the hot key), wal (relay.mode = "wal" beside table mode:
#                    B1 full chain to SQS and to the HTTP sink, B2 to both, B3, and the
#                    SQS emulator's raw ceiling; the server runs with wal_level = logical),
#                    pto (the peer pg-transactional-outbox: B2 with its polling and its
#                    logical-replication listener; wal_level = logical as for wal);
#                    implies --outboxd-only (pto excepted).  For tuning; a run to report
#                    runs everything.
#   --reps N         repetitions of each measured workload (3; 1 with --quick)
#   --out DIR        results folder (bench/results/YYYYmmdd-HHMMSS)
#   --no-install     do not apt-get / npm ci (fail instead when something is missing)
#   --keep           leave the scratch folder (stack logs, outboxd logs) in place
# env: OUTBOXD_BIN (default ./outboxd, built with make if missing); PTO_B2_MAX_S (600: cap
#      of each pg-transactional-outbox drain), PTO_REPS (1: its repetitions); PEERS_DIR
#      (../shared/peers) and REFERENCE_DIR (../shared/reference): the peers' kit, copied
#      to the scratch folder, never used in place.  Without it only outboxd is measured,
#      with the workload scripts vendored in bench/workloads/.
#
# Output: every result is a JSON line in OUT/*.jsonl; OUT/report.md (the table, ratios
# against the targets of issue 7) and OUT/summary.jsonl (the same, one JSON line a row).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
QUICK=0 PEERS=1 REPS= OUT= INSTALL=1 KEEP=0 ONLY= PTO=1
while [ $# -gt 0 ]; do
  case $1 in
  --quick) QUICK=1 ;;
  --outboxd-only) PEERS=0 PTO=0 ;;
  --only) ONLY=,$2,; PEERS=0; shift ;;
  --reps) REPS=$2; shift ;;
  --out) OUT=$2; shift ;;
  --no-install) INSTALL=0 ;;
  --keep) KEEP=1 ;;
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "run.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$REPS" ] || { [ $QUICK = 1 ] && REPS=1 || REPS=3; }
OUT=${OUT:-$BENCH/results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
PEERS_DIR=${PEERS_DIR:-$ROOT/../shared/peers}
REFERENCE_DIR=${REFERENCE_DIR:-$ROOT/../shared/reference}
say() { echo "bench: $(date +%H:%M:%S) $*" >&2; }
want() { [ -z "$ONLY" ] || [[ $ONLY == *,$1,* ]]; }
die() { say "ERROR: $*"; exit 1; }
if [ $PEERS = 1 ] && [ ! -d "$PEERS_DIR/bench" ]; then
  say "no peers' kit at $PEERS_DIR (set PEERS_DIR): measuring outboxd only"
  PEERS=0
fi

if [ $QUICK = 1 ]; then
  export B1_DURATION=3s B1_WARMUP=1s B2_N=2000 B3_DURATION=5 B3_GRACE=10 CEIL_DURATION=3 CEIL_WARMUP=1
  GROWTH=2 GW_LAT_DURATION=5
else
  export B1_DURATION=10s B1_WARMUP=3s B2_N=20000 B3_DURATION=20 B3_GRACE=30 CEIL_DURATION=10 CEIL_WARMUP=3
  GROWTH=5 GW_LAT_DURATION=20
fi
export B1_THREADS=2 B1_CONNS=32 B3_RATE=50 CEIL_CLIENTS=32 GW_LAT_DURATION
# outboxd's drains stop after 180 s (a result with complete=false) rather than hang if the
# daemon is gone (on a shared machine a foreign signal once stopped it mid-drain)
OB_B2_MAX_S=${OB_B2_MAX_S:-180}
# pg-transactional-outbox (bench/peers/pg-transactional-outbox, in the repository, not in the
# peers' kit): run by a full run and by --only pto, never by --outboxd-only
want pto || PTO=0
PTO_B2_MAX_S=${PTO_B2_MAX_S:-600} PTO_REPS=${PTO_REPS:-1}

# ---- what the bench needs --------------------------------------------------------------
if [ $INSTALL = 1 ]; then
  need=()
  command -v wrk >/dev/null || need+=(wrk)
  command -v nginx >/dev/null || need+=(nginx-light)
  command -v jq >/dev/null || need+=(jq)
  command -v bc >/dev/null || need+=(bc)
  command -v pgbench >/dev/null || need+=(postgresql-client postgresql-contrib)
  command -v valgrind >/dev/null || need+=(valgrind)
  if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -q && apt-get install -y -q --no-install-recommends "${need[@]}"; } >&2 || die "apt-get install ${need[*]} failed"
  fi
  # PostgreSQL, Node.js and the emulators of the test stack
  ( source "$ROOT/tests/lib/deps.sh"; ensure_deps && emu_install ) || die "tests/lib/deps.sh failed"
fi
for c in wrk nginx jq pgbench psql node npm curl; do command -v $c >/dev/null || die "$c not found (run without --no-install)"; done

OUTBOXD_BIN=${OUTBOXD_BIN:-$ROOT/outboxd}
if [ ! -x "$OUTBOXD_BIN" ]; then
  say "building outboxd"
  ( cd "$ROOT" && { [ -f Makefile ] || { autoreconf -fi && ./configure; }; } && make outboxd ) >&2 || die "build failed"
fi

# ---- scratch folder: the peers' kit (or the vendored workloads) and the stack ----------
SCRATCH=$(mktemp -d /tmp/outboxd-bench.XXXXXX); chmod 0755 "$SCRATCH"
cleanup() {
  set +e
  say "stopping"
  [ -n "${OB_RUN:-}" ] && (cd "$WL" && IMPL=$WL/impl/outboxd.sh bash -c 'source lib.sh; load_impl; impl_down') 2>/dev/null
  for f in "$SCRATCH"/run/*/*.pid "$SCRATCH"/run/sink/sink.pid /tmp/peers-run/sink/sink.pid; do
    [ -f "$f" ] && kill "$(awk '{print $1; exit}' "$f")" 2>/dev/null
  done
  "$ROOT/tests/lib/stack.sh" down "$SCRATCH/stack" >/dev/null 2>&1
  if [ $KEEP = 1 ]; then say "kept $SCRATCH"; else rm -rf "$SCRATCH"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ $PEERS = 1 ]; then
  cp -r "$PEERS_DIR" "$SCRATCH/peers"
  [ -d "$REFERENCE_DIR" ] && cp -r "$REFERENCE_DIR" "$SCRATCH/reference"
  chmod -R u+w "$SCRATCH"
else
  mkdir -p "$SCRATCH/peers/bench/impl"; cp "$BENCH"/workloads/* "$SCRATCH/peers/bench/"
fi
export WL=$SCRATCH/peers/bench
cp "$BENCH/impl/outboxd.sh" "$WL/impl/outboxd.sh"
npm_ci() { [ -d "$1/node_modules" ] || (cd "$1" && npm ci --no-audit --no-fund --loglevel=error) >&2; }
npm_ci "$WL" || die "npm ci in the workload folder failed"
if [ $PEERS = 1 ]; then
  npm_ci "$SCRATCH/peers/reference-node" && npm_ci "$SCRATCH/peers/graphile-worker" || die "npm ci in the peers failed"
fi
if [ $PTO = 1 ]; then
  # its package-lock.json pins pg-transactional-outbox, pg and @aws-sdk/client-sqs; with
  # --no-install only a node_modules already in bench/peers/pg-transactional-outbox is used
  PTO_DIR=$SCRATCH/pto; cp -r "$BENCH/peers/pg-transactional-outbox" "$PTO_DIR"
  if [ $INSTALL = 1 ]; then npm_ci "$PTO_DIR" || die "npm ci in bench/peers/pg-transactional-outbox failed"
  else [ -d "$PTO_DIR/node_modules" ] || die "bench/peers/pg-transactional-outbox has no node_modules (run without --no-install)"; fi
  cp "$BENCH/impl/pg-transactional-outbox.sh" "$WL/impl/pg-transactional-outbox.sh"
fi


# The load generators (wrk: B1, B4's growth runs, the emulator ceilings) run in a session
# of their own, as the remote clients they stand for.  Debian's kernel shares CPU between
# sessions first (kernel.sched_autogroup_enabled), then between the processes of a session:
# PostgreSQL and the emulators are started with setsid (tests/lib/proc.sh, pg_ctl), but the
# server under test (outboxd or the reference, started from here) shared its session with
# wrk, whose two threads then took half of that server's share.  The shim applies to every
# implementation, the peers' scripts included, since they call wrk by name.
mkdir -p "$SCRATCH/bin"
printf '#!/bin/sh\n# bench/run.sh: wrk in a session of its own\nexec setsid -w %s "$@"\n' "$(command -v wrk)" >"$SCRATCH/bin/wrk"
chmod 0755 "$SCRATCH/bin/wrk"
export PATH=$SCRATCH/bin:$PATH

say "stack up"
# track_commit_timestamp: b3-ack.sh also measures B3 from each order's own commit
# wal_level = logical for the wal part (and so for every part of a full run: table mode's
# figures beside wal mode's come from the same server) with synchronous_commit back at
# PostgreSQL's default: the test stack turns it off, and a walsender streams only WAL that
# is flushed, so each transaction would wait for the WAL writer (wal_writer_delay, 200 ms)
pg_extra="track_commit_timestamp = on"
if want wal || [ $PTO = 1 ]; then export PG_WAL_LEVEL=logical; pg_extra="$pg_extra
synchronous_commit = on"; fi
PG_EXTRA_CONF=$pg_extra "$ROOT/tests/lib/stack.sh" up "$SCRATCH/stack" >&2 ||
  die "stack.sh up failed"
source "$SCRATCH/stack/env"
read -r SINK_PORT REF_PORT GW_SINK_PORT <<<"$("$ROOT/tests/lib/free-port" 3 | tr '\n' ' ')"

# outboxd's adapter settings
export OB_BIN=$OUTBOXD_BIN OB_SCHEMA=$ROOT/sql/schema.sql OB_HTTP_C=$ROOT/src/http_orders.c
export OB_DATABASE_URL=$DATABASE_URL OB_QUEUE_URL=$QUEUE_URL OB_SQS_ENDPOINT=$SQS_ENDPOINT
export OB_DDB_ENDPOINT=$DDB_ENDPOINT OB_DDB_TABLE=fulfillments OB_PORT=$HTTP_PORT OB_RUN=$SCRATCH/run/outboxd
export OB_SINK_URL=http://127.0.0.1:$SINK_PORT/ OB_WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
export SINK_RUN=$SCRATCH/run/sink STACK_DIR
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=AKIDOUTBOXDTEST AWS_SECRET_ACCESS_KEY=outboxd-test-secret
export AWS_ENDPOINT_URL_SQS=$SQS_ENDPOINT AWS_ENDPOINT_URL_DYNAMODB=$DDB_ENDPOINT SQS_ENDPOINT DDB_ENDPOINT
export NODE_NO_WARNINGS=1

# the 204 HTTP sink for outboxd's relay.sink = "http" (nginx-light, loopback)
mkdir -p "$SINK_RUN"
sed "s#@RUN@#$SINK_RUN#g; s#@PORT@#$SINK_PORT#g" "$BENCH/sink-nginx.conf.in" >"$SINK_RUN/nginx.conf"
nginx -p "$SINK_RUN" -c "$SINK_RUN/nginx.conf" >"$SINK_RUN/stdout.log" 2>&1 &
echo $! >"$SINK_RUN/sink.pid"
for _ in $(seq 50); do curl -s -o /dev/null -X POST -d '{}' "$OB_SINK_URL" && break; sleep 0.1; done
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' "$OB_SINK_URL")" = 204 ] || die "nginx sink did not start ($SINK_RUN)"

# ---- run metadata ----------------------------------------------------------------------
commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l)
jq -cn --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg commit "$commit" --argjson dirty "$dirty" \
  --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --argjson cpus "$(nproc)" \
  --arg autogroup "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo unknown)" --argjson reps "$REPS" --argjson quick "$QUICK" \
  --arg bin "$OUTBOXD_BIN" --argjson peers "$PEERS" --arg pg "$(psql -qAtX "$DATABASE_URL" -c 'show server_version')" \
  '{bench:"meta",date:$date,commit:$commit,modified_files:$dirty,loadavg_start:$load,cpus:$cpus,sched_autogroup:$autogroup,reps:$reps,quick:($quick==1),outboxd_bin:$bin,peers:($peers==1),postgresql:$pg}' >"$OUT/meta.jsonl"
say "results in $OUT (commit ${commit:0:12}, load $(cut -d' ' -f1-3 /proc/loadavg))"

# ---- the emulators, warmed --------------------------------------------------------------
# fauxqs and dynalite are Node.js processes: their first tens of thousands of requests run
# before V8 has compiled their hot paths (fauxqs spends about twice the CPU a message on a
# fresh stack, bench/README.md), and the peers, measured after outboxd, always meet them
# warm.  So before the first workload the peers' lean C client (emu-raw.sh: wrk, 16
# connections) drives each for a few seconds, against queues and a table of its own;
# nothing of it is recorded.
EMU_KIT=
if [ -x "$WL/emu-raw.sh" ]; then EMU_KIT=$WL
elif [ -x "$PEERS_DIR/bench/emu-raw.sh" ]; then
  cp -r "$PEERS_DIR/bench" "$SCRATCH/emu" && chmod -R u+w "$SCRATCH/emu" && npm_ci "$SCRATCH/emu" &&
    EMU_KIT=$SCRATCH/emu
fi
if [ -n "$EMU_KIT" ]; then
  say "emulators: warm-up (wrk, 4 s a request type, not recorded)"
  (cd "$EMU_KIT" && EMU_DUR=4 RESULTS_FILE=/dev/null ./emu-raw.sh wrk >/dev/null) || die "emulator warm-up failed"
else
  say "emulators: no warm-up (no peers' kit at $PEERS_DIR): the first workloads meet them cold"
fi

# ---- outboxd -----------------------------------------------------------------------------
ob() { (cd "$WL" && IMPL=$WL/impl/outboxd.sh RESULTS_FILE=$OUT/outboxd.jsonl "$@"); }
ob_do() { ob bash -c "source lib.sh; load_impl; $*"; }
ob_backlog() { # LABEL: outbox rows still pending ~1 s after a B1 (did the relays keep up?)
  local n
  # the adapter's own idea of "pending", as b2-drain.sh uses it
  n=$(ob_do 'echo "$(sql -c "$OUTBOX_PENDING_SQL") $(sql -c "SELECT count(*) FROM outbox")"')
  [[ $n =~ ^[0-9]+\ [0-9]+$ ]] || die "cannot count the outbox rows after B1 $1: '$n'"
  jq -cn --arg l "$1" --arg n "$n" '($n | split(" ") | map(tonumber)) as $v |
    {bench:"b1-backlog",impl:"outboxd",label:$l,pending:$v[0],rows:$v[1]}' >>"$OUT/outboxd.jsonl"
}
ob_b1() { # LABEL [VAR=VALUE...]: reset, start, B1 (B1_KEYS=1: bench/b1-keys.sh instead)
  local lbl=$1 b1=./b1-ingest.sh; shift
  [[ " $* " == *" B1_KEYS=1 "* ]] && b1=$BENCH/b1-keys.sh
  ob_do impl_reset >/dev/null
  ob env "$@" bash -c 'source lib.sh; load_impl; impl_up' && sleep 2
  ob env "$@" LABEL="$lbl" "$b1"
}

if want b1 || want b4; then
  say "outboxd: B4 idle (default configuration)"
  ob_do impl_reset >/dev/null; ob_do impl_up; sleep 5
  ob ./b4-mem.sh idle
  for r in $(seq "$REPS"); do
    say "outboxd: B1 full chain ($r/$REPS)"
    ob_b1 full-chain
    ob_backlog full-chain
  done
  ob ./b4-mem.sh after-b1
  # The same with the relays publishing to the nginx 204 sink (relay.sink = "http") instead
  # of SQS: a broker that costs these two cores little, as SQS and DynamoDB on AWS's machines
  # would cost them nothing; the consumer then has nothing to read.  (The emulators at nice
  # 19, the earlier stand-in, starved the relays instead: bench/README.md.)  (info)
  for r in $(seq "$REPS"); do
    say "outboxd: B1 full chain to the HTTP sink ($r/$REPS)"
    ob_b1 full-chain-webhook OB_SINK=http
    ob_backlog full-chain-webhook
  done
fi

if want b1 || want ceiling; then
  for r in $(seq "$REPS"); do
    if want ceiling; then say "outboxd: B1 ingest only, wake-up self/off/trigger, pgbench ceiling ($r/$REPS)"
    else say "outboxd: B1 ingest only ($r/$REPS)"; fi
    # On and off back to back, off first in every other repetition: what drifts within a
    # repetition (a checkpoint, the machine) does not always fall on the same side.
    if want ceiling && [ $((r % 2)) = 0 ]; then
      ob_b1 ingest-wake-off OB_RELAYS=0 OB_CONSUMERS=0 OB_WAKE=off
      ob_b1 ingest-only OB_RELAYS=0 OB_CONSUMERS=0
    else
      ob_b1 ingest-only OB_RELAYS=0 OB_CONSUMERS=0
      if want ceiling; then ob_b1 ingest-wake-off OB_RELAYS=0 OB_CONSUMERS=0 OB_WAKE=off; fi
    fi
    if want ceiling; then
      ob_b1 ingest-wake-trigger OB_RELAYS=0 OB_CONSUMERS=0 OB_WAKE=trigger
      ob "$BENCH/ceiling.sh" || die "ceiling.sh failed: no pgbench ceiling"
    fi
  done
fi

if want b1 || want keys; then
  # B1 ingest only with a unique Idempotency-Key on every request (bench/b1-keys.sh), each
  # right after one without keys (without first in every other repetition): the cost of the
  # keyed path (a statement and transaction per order, the key's row) against group commit.
  for r in $(seq "$REPS"); do
    say "outboxd: B1 ingest only, without and with an Idempotency-Key per request ($r/$REPS)"
    if [ $((r % 2)) = 0 ]; then ob_b1 ingest-only-keyed OB_RELAYS=0 OB_CONSUMERS=0 B1_KEYS=1; fi
    ob_b1 ingest-only-nokeys OB_RELAYS=0 OB_CONSUMERS=0
    if [ $((r % 2)) = 1 ]; then ob_b1 ingest-only-keyed OB_RELAYS=0 OB_CONSUMERS=0 B1_KEYS=1; fi
  done
fi

if want b2; then
  # SQS alone, SNS alone (a topic with no subscriber), the nginx 204 sink
  # alone, and the same rows spread over the three in turn, back to back in
  # each repetition: the machine's rate drifts by a quarter between parts
  # of one run, and the spread drain against SQS alone is issue 26's
  # figure (against the three alone, what bounds it).  2 relays is the
  # default configuration.
  OB_SNS_TOPIC=$(/usr/bin/python3 "$ROOT/tests/lib/sns-setup.py" --endpoint "$OB_SQS_ENDPOINT" \
    topic bench-events) || die "CreateTopic bench-events failed"
  for rel in 1 2 4; do
    for r in $(seq "$REPS"); do
      for sink in sqs sns http; do
        say "outboxd: B2 drain to $sink, $rel relay(s) ($r/$REPS)"
        ob_do impl_reset >/dev/null
        ob env OB_SINK=$sink OB_SNS_TOPIC="$OB_SNS_TOPIC" LABEL=$sink B2_RELAYS=$rel \
          B2_MAX_S=$OB_B2_MAX_S ./b2-drain.sh
      done
      say "outboxd: B2 drain to sqs + sns + http, $rel relay(s) ($r/$REPS)"
      ob_do impl_reset >/dev/null
      ob env OB_SINK=multi OB_SNS_TOPIC="$OB_SNS_TOPIC" LABEL=multi B2_RELAYS=$rel \
        B2_MAX_S=$OB_B2_MAX_S ./b2-drain.sh
    done
  done
  # To the Google Pub/Sub stand-in of the tests (no emulator can be
  # installed here), in its emulator mode (PUBSUB_EMULATOR_HOST: no token):
  # a Python server, so this measures it more than outboxd.
  PS_RUN=$SCRATCH/run/pubsub; mkdir -p "$PS_RUN"
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PS_RUN/sa.key" 2>/dev/null &&
    openssl pkey -in "$PS_RUN/sa.key" -pubout -out "$PS_RUN/sa.pub" || die "openssl genpkey failed"
  PS_PORT=$("$ROOT/tests/lib/free-port" 1)
  /usr/bin/python3 "$ROOT/tests/lib/pubsub-standin.py" --record /dev/null --pubkey "$PS_RUN/sa.pub" \
    --client-email bench@bench.iam.gserviceaccount.com --emulator --topic bench-project/events \
    --port "$PS_PORT" >"$PS_RUN/standin.log" 2>&1 &
  PS_PID=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PS_PORT/__control" && break; sleep 0.1; done
  for r in $(seq "$REPS"); do
    say "outboxd: B2 drain to the Pub/Sub stand-in, 1 relay ($r/$REPS)"
    ob_do impl_reset >/dev/null
    ob env OB_SINK=pubsub PUBSUB_EMULATOR_HOST=127.0.0.1:$PS_PORT LABEL=pubsub B2_RELAYS=1 \
      B2_MAX_S=$OB_B2_MAX_S ./b2-drain.sh
  done
  kill "$PS_PID" 2>/dev/null || true
fi

if want b3; then
  for r in $(seq "$REPS"); do
    say "outboxd: B3 at 50 orders/s ($r/$REPS)"
    ob env LABEL=rate50 ./b3-e2e.sh && ob env LABEL=rate50 "$BENCH/b3-ack.sh"
  done
  say "outboxd: B3 at 50 orders/s with the wake-up off (poll only)"
  ob env LABEL=rate50-wake-off OB_WAKE=off ./b3-e2e.sh && ob env LABEL=rate50-wake-off "$BENCH/b3-ack.sh"
  for r in $(seq "$REPS"); do
    say "outboxd: B3 at 50 orders/s with relay.handoff off (a NOTIFY and a claim per order) ($r/$REPS)"
    ob env LABEL=rate50-handoff-off OB_HANDOFF=false ./b3-e2e.sh &&
      ob env LABEL=rate50-handoff-off "$BENCH/b3-ack.sh"
  done
fi

if want wal; then
  # relay.mode = "wal" beside table mode, each repetition table first then wal, on the
  # same server (wal_level = logical); one relay in wal mode streams whatever the count
  for r in $(seq "$REPS"); do
    say "outboxd: B1 ingest only, full chain to SQS and to the HTTP sink, table and wal ($r/$REPS)"
    ob_b1 ingest-only OB_RELAYS=0 OB_CONSUMERS=0
    ob_b1 full-chain-table
    ob_backlog full-chain-table
    ob_b1 full-chain-wal OB_RELAY_MODE=wal
    ob_backlog full-chain-wal
    ob_b1 full-chain-webhook-table OB_SINK=http
    ob_backlog full-chain-webhook-table
    ob_b1 full-chain-webhook-wal OB_SINK=http OB_RELAY_MODE=wal
    ob_backlog full-chain-webhook-wal
  done
  for r in $(seq "$REPS"); do
    for sink in sqs http; do
      for mode in table wal; do
        say "outboxd: B2 drain to $sink, 1 relay, $mode mode ($r/$REPS)"
        OB_RELAY_MODE=$mode ob_do impl_reset >/dev/null
        ob env OB_SINK=$sink OB_RELAY_MODE=$mode LABEL=$sink-$mode B2_RELAYS=1 \
          B2_MAX_S=$OB_B2_MAX_S ./b2-drain.sh
      done
    done
  done
  for r in $(seq "$REPS"); do
    for mode in table wal; do
      say "outboxd: B3 at 50 orders/s, $mode mode ($r/$REPS)"
      # b3-ack.sh (commit -> sent_at) only in table mode: in wal mode sent_at is the time
      # of the bulk mark, up to 100 ms after the acknowledgement
      ob env LABEL=rate50-$mode OB_RELAY_MODE=$mode ./b3-e2e.sh &&
        if [ $mode = table ]; then ob env LABEL=rate50-$mode "$BENCH/b3-ack.sh"; fi
    done
  done
  ob_do impl_down >/dev/null
  # the SQS emulator's raw ceiling in the same run (the peers' emu-raw.sh; a full run with
  # the peers measures it at its end anyway)
  if [ $PEERS = 0 ] && [ -n "$EMU_KIT" ]; then
    say "emulators: raw ceilings with the lean C client (wrk)"
    (cd "$EMU_KIT" && EMU_DUR=5 RESULTS_FILE=$OUT/emulators.jsonl ./emu-raw.sh wrk >/dev/null) ||
      say "emu-raw.sh failed"
  fi
fi

if want b5; then
  # B5: 20,000 queued messages, the consumers alone until the queue is empty, beside
  # dynalite's raw conditional-PutItem ceiling (wrk) measured before and after them.
  say "emulators: dynalite's conditional-PutItem ceiling (wrk, 16 connections)"
  ob env DUR=5 "$BENCH/ddb-ceiling.sh"
  for r in $(seq "$REPS"); do
    for v in "1 default" "2 default" "1 1"; do
      set -- $v
      say "outboxd: B5 consumer drain, consumer.workers = $1, concurrency $2 ($r/$REPS)"
      if [ "$2" = default ]; then
        ob env OB_CONSUMERS=$1 LABEL=workers-$1 B5_N=$B2_N "$BENCH/b5-consumer.sh"
      else
        ob env OB_CONSUMERS=$1 OB_CONSUMER_CONCURRENCY=$2 LABEL=workers-$1-one-batch B5_N=$B2_N \
          "$BENCH/b5-consumer.sh"
      fi
    done
  done
  ob env DUR=5 "$BENCH/ddb-ceiling.sh"
fi

if want b6; then
  # B6: the fresh keys' drain with 100,000 rows behind one dead-lettered head (written in one
  # statement, and a transaction each), and without.
  for r in $(seq "$REPS"); do
    say "outboxd: B6 fresh keys' drain, no hot key ($r/$REPS)"
    ob env B6_HOT=0 LABEL=none "$BENCH/b6-hot-key.sh"
    say "outboxd: B6 fresh keys' drain behind a hot key of 100,000 rows ($r/$REPS)"
    ob env B6_HOT=${B6_HOT:-100000} LABEL=hot "$BENCH/b6-hot-key.sh"
    say "outboxd: B6 the same, the hot key's rows written a transaction each ($r/$REPS)"
    ob env B6_HOT=${B6_HOT:-100000} B6_STREAM=1 LABEL=hot-stream "$BENCH/b6-hot-key.sh"
  done
fi

if want b4; then
  say "outboxd: B4 growth over $GROWTH B1 runs without restart"
  ob_do impl_reset >/dev/null; ob_do impl_up; sleep 3
  ob ./b4-mem.sh growth-0
  for i in $(seq "$GROWTH"); do
    ob env LABEL=growth ./b1-ingest.sh >/dev/null; sleep 2
    ob ./b4-mem.sh "growth-$i"
  done
  ob_do impl_down
fi

# ---- pg-transactional-outbox: B2 with each of its two listeners -------------------------------
if [ $PTO = 1 ]; then
  PTO_QUEUE_URL=$(cd "$PTO_DIR" && node queue.mjs create pto-events) || die "CreateQueue pto-events failed"
  pto() { # LISTENER CMD...: in the workload folder with the adapter's settings
    local l=$1; shift
    (cd "$WL" && env IMPL=$WL/impl/pg-transactional-outbox.sh PTO_LISTENER=$l PTO_DIR="$PTO_DIR" \
      PTO_DATABASE_URL="${DATABASE_URL%/*}/pto" PTO_QUEUE_URL="$PTO_QUEUE_URL" PTO_RUN="$SCRATCH/run/pto" \
      RESULTS_FILE="$OUT/pg-transactional-outbox.jsonl" "$@")
  }
  # one repetition unless PTO_REPS says otherwise: its polling listener drains 20,000 rows
  # in ~8 minutes, three of them would double a full run
  for r in $(seq "$PTO_REPS"); do
    for l in polling replication; do
      say "pg-transactional-outbox: B2 drain to SQS, $l listener ($r/$PTO_REPS)"
      pto $l bash -c 'source lib.sh; load_impl; impl_reset' >/dev/null || { say "pto: impl_reset ($l) failed"; continue; }
      pto $l env LABEL=sqs B2_RELAYS=1 B2_MAX_S=$PTO_B2_MAX_S ./b2-drain.sh ||
        say "pg-transactional-outbox $l: b2-drain.sh failed (log: $SCRATCH/run/pto)"
      # what reached the queue (every processed row should be one message there)
      q=$(cd "$PTO_DIR" && node queue.mjs depth "$PTO_QUEUE_URL") || q=null
      jq -cn --arg impl "pg-transactional-outbox-$l" --argjson q "$q" \
        '{bench:"b2-queue",impl:$impl,label:"sqs",messages:$q}' >>"$OUT/pg-transactional-outbox.jsonl"
    done
  done
  # the last reset leaves a polling setup: no slot keeps WAL for the rest of the run
  pto polling bash -c 'source lib.sh; load_impl; impl_down; impl_reset' >/dev/null
fi

# ---- the peers, on the same stack --------------------------------------------------------
if [ $PEERS = 1 ]; then
  PG_BASE=${DATABASE_URL%/*}
  for db in reference graphile; do
    psql -qAtX "$PG_BASE/postgres" -c "drop database if exists $db" -c "create database $db" >/dev/null
  done
  ref_env=(env DATABASE_URL="$PG_BASE/reference" QUEUE_NAME=ref-events
    SQS_QUEUE_URL="$SQS_ENDPOINT/000000000000/ref-events" DDB_TABLE=ref-fulfillments
    REF_PORT="$REF_PORT" REF_RUN="$SCRATCH/run/reference-node" RESULTS_FILE="$OUT/reference-node.jsonl")
  gw_env=(env DATABASE_URL="$PG_BASE/graphile" GW_RUN="$SCRATCH/run/graphile-worker"
    SINK_PORT="$GW_SINK_PORT" RESULTS_FILE="$OUT/graphile-worker.jsonl")
  if [ $QUICK = 0 ] && [ "$REPS" = 3 ]; then
    say "reference-node: run-reference.sh (B4, B1x3, B2 1 and 4 relays x3, B3 50/s and 5/s x3)"
    (cd "$WL" && "${ref_env[@]}" ./run-reference.sh) || say "run-reference.sh failed"
    say "graphile-worker: run-gw.sh (B2 noop, noop 100k, post x3, latency x3)"
    (cd "$SCRATCH/peers/graphile-worker" && "${gw_env[@]}" ./run-gw.sh) || say "run-gw.sh failed"
  else
    # the same workloads, REPS times (the peers' run scripts do 3)
    say "reference-node: B4, B1, B2, B3 (x$REPS)"
    (cd "$WL" && "${ref_env[@]}" IMPL=reference-node bash -c '
      set -e; source lib.sh; load_impl; trap impl_down EXIT
      impl_reset; impl_up; sleep 5; ./b4-mem.sh idle
      for r in $(seq '"$REPS"'); do impl_reset; impl_up; sleep 2; LABEL=full-chain ./b1-ingest.sh; done
      ./b4-mem.sh after-b1
      for n in 1 4; do for r in $(seq '"$REPS"'); do impl_reset; LABEL=${n}relay-30s B2_RELAYS=$n B2_MAX_S=30 ./b2-drain.sh; done; done
      for r in $(seq '"$REPS"'); do LABEL=rate50 ./b3-e2e.sh; done') || say "reference-node failed"
    say "graphile-worker: B2 noop and post, latency (x$REPS)"
    (cd "$SCRATCH/peers/graphile-worker" && "${gw_env[@]}" IMPL=graphile-worker bash -c '
      set -e; export SINK_URL=http://127.0.0.1:$SINK_PORT/ SINK_RUN='"$SCRATCH"'/run/gw-sink
      source ../bench/lib.sh; load_impl; ./sink-up.sh "$SINK_PORT" >/dev/null
      trap "impl_down; kill \$(cat \$SINK_RUN/sink.pid) 2>/dev/null" EXIT
      cd ../bench; impl_reset; impl_up; sleep 5; ./b4-mem.sh idle
      for r in $(seq '"$REPS"'); do impl_reset; LABEL=noop B2_POLL_S=0.05 GW_TASK=noop ./b2-drain.sh; done
      for r in $(seq '"$REPS"'); do impl_reset; LABEL=http-post B2_POLL_S=0.05 GW_TASK=post ./b2-drain.sh; done
      impl_reset
      for r in $(seq '"$REPS"'); do LABEL=rate50 ../graphile-worker/gw-latency.sh; done') || say "graphile-worker failed"
  fi
  say "emulators: raw ceilings with the lean C client (wrk)"
  (cd "$WL" && EMU_DUR=5 RESULTS_FILE=$OUT/emulators.jsonl ./emu-raw.sh wrk >/dev/null) || say "emu-raw.sh failed"
fi

# ---- report ------------------------------------------------------------------------------
jq -c --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '. + {loadavg_end:$load}' "$OUT/meta.jsonl" >"$OUT/meta.tmp" && mv "$OUT/meta.tmp" "$OUT/meta.jsonl"
node "$WL/summarize.mjs" "$OUT"/outboxd.jsonl $( [ $PEERS = 1 ] && ls "$OUT"/reference-node.jsonl "$OUT"/graphile-worker.jsonl "$OUT"/emulators.jsonl 2>/dev/null) >"$OUT/summarize.txt" 2>&1
node "$BENCH/report.mjs" "$OUT" >"$OUT/report.md" || die "report.mjs failed"
cat "$OUT/report.md"
say "done: $OUT/report.md, $OUT/summary.jsonl, raw results $OUT/*.jsonl"
