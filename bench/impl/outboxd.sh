# impl/outboxd.sh -- bench adapter for outboxd (sourced by the peers' workload scripts,
# peers/bench/README.md "The adapter contract"; bench/run.sh copies it into the scratch
# copy of peers/bench/impl/).
#
# outboxd is one daemon (master + HTTP, relay and consumer workers).  The adapter keeps
# the worker counts it wants in $OB_RUN and (re)starts the daemon with a configuration
# written for them: impl_relays_stop stops the whole daemon (B2 needs no HTTP),
# impl_relays_start N starts it with N relays, no HTTP worker and, after
# impl_consumers_stop, no consumer.
#
# Settings (environment; bench/run.sh exports them, or put them in $OB_ENV):
#   OB_BIN              outboxd binary                        (required)
#   OB_SCHEMA           sql/schema.sql                        (required)
#   OB_DATABASE_URL     outboxd's database                    (required)
#   OB_QUEUE_URL OB_SQS_ENDPOINT OB_DDB_ENDPOINT              (required; the local stack's)
#   OB_DDB_TABLE        fulfillments table                    (fulfillments)
#   OB_PORT             HTTP port                             (required)
#   OB_RUN              pid file, configuration, logs          (/tmp/peers-run/outboxd)
#   OB_HTTP_WORKERS OB_RELAYS OB_CONSUMERS   impl_up's counts (2 2 1: the shipped defaults)
#   OB_DB_CONNECTIONS   http.db_connections                   (unset: default 1)
#   OB_SINK             sqs | sns | http | multi              (sqs)
#   OB_SINK_URL OB_WEBHOOK_SECRET   for OB_SINK=http and multi
#   OB_SINK=pubsub      every row to a Pub/Sub destination (project "bench-project", topic
#                       "events") at PUBSUB_EMULATOR_HOST, the default
#   OB_SNS_TOPIC        the SNS topic ARN for OB_SINK=sns (every row) and multi: B2's rows go in turn to the
#                       queue (the default destination), the topic ("topic") and the
#                       HTTP sink ("hook")
#   OB_POLL_INTERVAL OB_BATCH_SIZE  relay settings            (unset: defaults 1000, 10)
#   OB_CONSUMER_CONCURRENCY  consumer.concurrency          (unset: default 4)
#   OB_WAKE             self | off | trigger                  (self)
#       self:    the shipped design: sql/schema.sql's trigger skips outboxd's sessions
#                (outboxd.notify = off) and each HTTP worker sends one NOTIFY per 5 ms
#       off:     no NOTIFY at all; relays find rows by poll_interval only
#       trigger: the naive design, one NOTIFY in every order transaction (trigger
#                without the outboxd.notify condition)
#       off/trigger replace the trigger with one that src/http.c's detection query takes
#       for "a trigger notifies for us" (so the HTTP workers do not notify); the next
#       impl_reset or OB_WAKE=self start re-applies sql/schema.sql.
#   OB_HANDOFF          relay.handoff: true | false             (unset: default true;
#                       OB_WAKE=off sets false, so that nothing but the poll finds rows)
#   OB_EXTRA_SQL        SQL run after sql/schema.sql at every start (e.g. a candidate index;
#                       bench/run.sh drops what it adds)
#   OB_RELAY_MODE       relay.mode: table | wal                (table).  wal needs a server
#                       with wal_level = logical (bench/run.sh --only wal starts one); the
#                       relays then stream the slot "outboxd" (one streams, the others stand
#                       by), and impl_reset makes sure the slot exists before rows are
#                       written, so that B2's rows come from the WAL, not from the catch-up
#   OB_LOG_LEVEL        (info: B2's "from ready" time reads the relays' "publishing to" line)
OB_RUN=${OB_RUN:-/tmp/peers-run/outboxd}
[ -n "${OB_ENV:-}" ] && [ -f "$OB_ENV" ] && source "$OB_ENV"
: "${OB_BIN:?OB_BIN (outboxd binary) is not set}" "${OB_SCHEMA:?OB_SCHEMA (sql/schema.sql) is not set}"
: "${OB_DATABASE_URL:?}" "${OB_QUEUE_URL:?}" "${OB_SQS_ENDPOINT:?}" "${OB_DDB_ENDPOINT:?}" "${OB_PORT:?}"
OB_DDB_TABLE=${OB_DDB_TABLE:-fulfillments}
OB_RELAY_MODE=${OB_RELAY_MODE:-table}
_OB_SLOT=outboxd	# relay.wal_slot's default (the configuration sets no other)
IMPL_NAME=outboxd
# The workload scripts read these; they point at outboxd's database, queue and table.
export DATABASE_URL=$OB_DATABASE_URL SQS_QUEUE_URL=$OB_QUEUE_URL DDB_TABLE=$OB_DDB_TABLE
export AWS_ENDPOINT_URL_SQS=$OB_SQS_ENDPOINT AWS_ENDPOINT_URL_DYNAMODB=$OB_DDB_ENDPOINT
export AWS_REGION=${AWS_REGION:-us-east-1} AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-AKIDOUTBOXDTEST}
export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-outboxd-test-secret}
export BASE_URL=http://127.0.0.1:$OB_PORT
export ORDER_ID_FIELD=id

OUTBOX_PENDING_SQL="select count(*) from outbox where status = 'pending'"
ORDERS_COUNT_SQL="select count(*) from orders"
OUTBOX_COUNT_SQL="select count(*) from outbox"
# :n pending events shaped like POST /orders' own (ordering key = the order id, so every
# event is its key's head, as with real orders)
B2_INSERT_SQL="insert into outbox (event_type, ordering_key, payload)
  select 'order.created', u::text, json_build_object('orderId', u, 'customerId', 'c' || (i % 1000),
         'amountCents', 100 + i % 10000, 'createdAt', now())
  from (select i, gen_random_uuid() as u from generate_series(1, :n) i) s"
if [ "${OB_SINK:-sqs}" = multi ]; then
  B2_INSERT_SQL="insert into outbox (event_type, ordering_key, payload, destination)
  select 'order.created', u::text, json_build_object('orderId', u, 'customerId', 'c' || (i % 1000),
         'amountCents', 100 + i % 10000, 'createdAt', now()), (array[null, 'topic', 'hook'])[1 + i % 3]
  from (select i, gen_random_uuid() as u from generate_series(1, :n) i) s"
fi

_ob_sql() { PGOPTIONS="-c client_min_messages=warning" psql "$OB_DATABASE_URL" -qAtX -v ON_ERROR_STOP=1 "$@"; }
_ob_pid() { [ -f "$OB_RUN/outboxd.pid" ] && cat "$OB_RUN/outboxd.pid"; }
_ob_running() { local p; p=$(_ob_pid) && kill -0 "$p" 2>/dev/null; }

# The NOTIFY design under test (see OB_WAKE above).
_ob_wake() {
  local mode=${OB_WAKE:-self} when
  _ob_sql -f "$OB_SCHEMA" >/dev/null
  [ -z "${OB_EXTRA_SQL:-}" ] || _ob_sql -c "$OB_EXTRA_SQL" >/dev/null
  case $mode in
  self) return 0 ;;
  off) when="WHEN (false)" ;;
  trigger) when="" ;;
  *) echo "outboxd adapter: OB_WAKE=$mode: expected self, off or trigger" >&2; return 1 ;;
  esac
  _ob_sql -c "DROP TRIGGER IF EXISTS outbox_notify ON outbox" \
    -c "CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT $when EXECUTE FUNCTION outbox_notify()" >/dev/null
}

_ob_conf() { # FILE HTTP RELAYS CONSUMERS
  local sink=${OB_SINK:-sqs}
  {
    echo "database = \"$OB_DATABASE_URL\""
    echo "log_level = \"${OB_LOG_LEVEL:-info}\""
    echo "shutdown_timeout = 5000"
    echo "http {"
    echo "  listen = \"127.0.0.1:$OB_PORT\""
    echo "  workers = $2"
    [ -n "${OB_DB_CONNECTIONS:-}" ] && echo "  db_connections = $OB_DB_CONNECTIONS"
    echo "}"
    echo "relay {"
    echo "  workers = $3"
    [ -n "${OB_BATCH_SIZE:-}" ] && echo "  batch_size = $OB_BATCH_SIZE"
    [ -n "${OB_POLL_INTERVAL:-}" ] && echo "  poll_interval = $OB_POLL_INTERVAL"
    [ "$OB_RELAY_MODE" = table ] || echo "  mode = \"$OB_RELAY_MODE\""
    if [ "${OB_WAKE:-self}" = off ]; then echo "  handoff = false"
    elif [ -n "${OB_HANDOFF:-}" ]; then echo "  handoff = $OB_HANDOFF"; fi
    case $sink in
    multi) ;;
    sns) echo "  default_destination = \"topic\"" ;;
    pubsub) echo "  default_destination = \"events\"" ;;
    *) echo "  sink = \"$sink\"" ;;
    esac
    echo "}"
    if [ "$sink" = pubsub ]; then
      echo "destination events {"
      echo "  sink = \"pubsub\""
      echo "  project = \"bench-project\""
      echo "  topic = \"events\""
      echo "}"
    fi
    if [ "$sink" = multi ] || [ "$sink" = sns ]; then
      echo "sns { endpoint_url = \"$OB_SQS_ENDPOINT\" }"
      echo "destination topic {"
      echo "  sink = \"sns\""
      echo "  topic_arn = \"${OB_SNS_TOPIC:?OB_SNS_TOPIC is needed with OB_SINK=sns and multi}\""
      echo "}"
    fi
    if [ "$sink" = multi ]; then
      echo "destination hook {"
      echo "  sink = \"http\""
      echo "  url = \"${OB_SINK_URL:?OB_SINK_URL is needed with OB_SINK=multi}\""
      echo "  secret = \"${OB_WEBHOOK_SECRET:-whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}\""
      echo "}"
    fi
    if [ "$sink" = http ]; then
      echo "webhook {"
      echo "  url = \"${OB_SINK_URL:?OB_SINK_URL is needed with OB_SINK=http}\""
      echo "  secret = \"${OB_WEBHOOK_SECRET:-whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}\""
      echo "}"
    fi
    echo "consumer {"
    echo "  workers = $4"
    echo "  wait_time = 20"
    [ -n "${OB_CONSUMER_CONCURRENCY:-}" ] && echo "  concurrency = $OB_CONSUMER_CONCURRENCY"
    echo "}"
    echo "aws {"
    echo "  region = \"$AWS_REGION\""
    echo "  access_key_id = \"$AWS_ACCESS_KEY_ID\""
    echo "  secret_access_key = \"$AWS_SECRET_ACCESS_KEY\""
    echo "}"
    echo "sqs {"
    echo "  queue_url = \"$OB_QUEUE_URL\""
    echo "  endpoint_url = \"$OB_SQS_ENDPOINT\""
    echo "}"
    echo "dynamodb {"
    echo "  table = \"$OB_DDB_TABLE\""
    echo "  endpoint_url = \"$OB_DDB_ENDPOINT\""
    echo "}"
  } >"$1"
}

_ob_stop() {
  local p c
  p=$(_ob_pid) || return 0
  if kill -0 "$p" 2>/dev/null; then
    c=$(ps -o pid= --ppid "$p" 2>/dev/null | tr '\n' ' ')
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" $c 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$OB_RUN/outboxd.pid" "$OB_RUN/running"
}

# Start the daemon with HTTP RELAYS CONSUMERS workers; wait until it serves (HTTP > 0)
# or its relays are up.
_ob_start() {
  local h=$1 r=$2 c=$3 p ndest=1 want="$1 $2 $3 ${OB_SINK:-sqs} ${OB_WAKE:-self} ${OB_HANDOFF:-} ${OB_EXTRA_SQL:+extra} ${OB_CONSUMER_CONCURRENCY:-} $OB_RELAY_MODE"
  mkdir -p "$OB_RUN"
  [ "${OB_SINK:-sqs}" != multi ] || ndest=3
  if _ob_running && [ "$(cat "$OB_RUN/running" 2>/dev/null)" = "$want" ]; then return 0; fi
  _ob_stop
  _ob_wake
  # table mode after wal mode: drop the slot, as outboxd(8) tells an operator to (a slot
  # kept through a table-mode period replays that period's inserts when wal mode returns)
  if [ "$OB_RELAY_MODE" = table ]; then
    _ob_sql -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots
                where slot_name = '$_OB_SLOT' and not active" >/dev/null
  fi
  _ob_conf "$OB_RUN/outbox.conf" "$h" "$r" "$c"
  "$OB_BIN" -t -c "$OB_RUN/outbox.conf" >/dev/null || { echo "outboxd adapter: bad configuration $OB_RUN/outbox.conf" >&2; return 1; }
  : >"$OB_RUN/outboxd.log"
  "$OB_BIN" -c "$OB_RUN/outbox.conf" >>"$OB_RUN/outboxd.log" 2>&1 &
  p=$!
  echo "$p" >"$OB_RUN/outboxd.pid"
  echo "$want" >"$OB_RUN/running"
  for _ in $(seq 200); do
    kill -0 "$p" 2>/dev/null || { echo "outboxd adapter: outboxd exited; log:" >&2; tail -20 "$OB_RUN/outboxd.log" >&2; return 1; }
    if [ "$h" -gt 0 ]; then
      curl -s -o /dev/null -m 1 "$BASE_URL/healthz" && return 0
    else
      if [ "$OB_RELAY_MODE" = wal ]; then
        # one relay streams (the others stand by)
        grep -q 'streaming slot' "$OB_RUN/outboxd.log" && return 0
      else
        # one line per relay and destination
        [ "$(grep -c 'publishing to' "$OB_RUN/outboxd.log")" -ge $((r * ndest)) ] && return 0
      fi
    fi
    sleep 0.05
  done
  echo "outboxd adapter: outboxd did not come up; log:" >&2; tail -20 "$OB_RUN/outboxd.log" >&2; return 1
}

_ob_consumers() { [ -f "$OB_RUN/consumers-off" ] && echo 0 || echo "${OB_CONSUMERS:-1}"; }

impl_up() {
  rm -f "$OB_RUN/consumers-off"
  _ob_start "${OB_HTTP_WORKERS:-2}" "${OB_RELAYS:-2}" "${OB_CONSUMERS:-1}"
}
impl_down() { _ob_stop; }
impl_relays_start() { _ob_start 0 "${1:-${OB_RELAYS:-2}}" "$(_ob_consumers)"; }
impl_relays_stop() { _ob_stop; }
impl_consumers_start() {
  rm -f "$OB_RUN/consumers-off"
  if _ob_running; then set -- $(cat "$OB_RUN/running"); _ob_start "$1" "$2" "${OB_CONSUMERS:-1}"; fi
}
impl_consumers_stop() {
  mkdir -p "$OB_RUN"; touch "$OB_RUN/consumers-off"
  if _ob_running; then set -- $(cat "$OB_RUN/running"); [ "$3" = 0 ] || _ob_start "$1" "$2" 0; fi
}
# wall clock (epoch s) when the last relay logged "publishing to" (its start-up is done;
# in wal mode: when the streaming relay logged "streaming slot")
impl_relays_ready_ts() {
  local t ready='publishing to'
  [ "$OB_RELAY_MODE" = table ] || ready='streaming slot'
  t=$(grep "$ready" "$OB_RUN/outboxd.log" 2>/dev/null | sed -n 's/^time=\([^ ]*\) .*/\1/p' | sort | tail -1)
  [ -n "$t" ] || return 1
  date -d "$t" +%s.%3N
}
# back to empty: daemon stopped, no orders/outbox rows, empty queue, empty fulfillments table
impl_reset() {
  _ob_stop
  rm -f "$OB_RUN/consumers-off"
  OB_WAKE=self _ob_wake
  _ob_sql -c "truncate orders, outbox, outbox_idempotency_keys" >/dev/null
  tools flush-waiters "$SQS_QUEUE_URL"   # also purges
  tools ddb-reset "$DDB_TABLE"
  # wal mode: the slot must exist before B2 writes its rows (a slot created after them
  # hands them to the table path's catch-up); outboxd creates it, then stands down
  if [ "$OB_RELAY_MODE" = wal ] &&
     [ "$(_ob_sql -c "select count(*) from pg_replication_slots where slot_name = '$_OB_SLOT'")" = 0 ]; then
    _ob_start 0 1 0 && _ob_stop
  fi
}
impl_pids() {
  local p
  p=$(_ob_pid) || return 0
  kill -0 "$p" 2>/dev/null || return 0
  echo "master $p"
  ps -o pid=,args= --ppid "$p" | while read -r pid title; do
    title=${title#outboxd: }; echo "${title// /.} $pid"
  done
}
