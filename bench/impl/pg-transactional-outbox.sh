# impl/pg-transactional-outbox.sh -- bench adapter for the peer pg-transactional-outbox
# (npm; bench/peers/pg-transactional-outbox: its package-lock.json pins it, bench/run.sh
# runs npm ci there; it is no dependency of the project).  Sourced by b2-drain.sh like
# impl/outboxd.sh.  Only B2 is wired: there is no HTTP front (the library is an outbox
# library, not a server), so impl_up/impl_down are the listener's start and stop.
#
# The library's outbox table public.outbox in a database of its own, set up with the
# library's DatabaseSetupExporter (setup.mjs).  The relay is the library's outbox listener
# (listener.mjs), one Node process, whose message publisher sends each message to the
# queue with one @aws-sdk/client-sqs SendMessage.
#
# Settings (environment; bench/run.sh exports them):
#   PTO_DIR           the peer folder with node_modules        (required)
#   PTO_DATABASE_URL  its database (created by impl_reset)     (required)
#   PTO_QUEUE_URL     its SQS queue (on the emulator)          (required)
#   SQS_ENDPOINT      the emulator                             (required)
#   PTO_LISTENER      polling | replication                    (polling)
#                     replication needs wal_level = logical; impl_reset creates the
#                     publication and the slot (pto_outbox_slot) before B2's rows
#   PTO_RUN           pid file and log                         (/tmp/peers-run/pto)
#   PTO_BATCH_SIZE PTO_POLL_MS   polling settings (unset: the library's defaults 5, 500 ms)
#
# "Done" is the library's own mark: processed_at (or abandoned_at) set on the outbox row,
# which both listeners write in the message's transaction after the handler returned.
: "${PTO_DIR:?}" "${PTO_DATABASE_URL:?}" "${PTO_QUEUE_URL:?}" "${SQS_ENDPOINT:?}"
PTO_LISTENER=${PTO_LISTENER:-polling}
PTO_RUN=${PTO_RUN:-/tmp/peers-run/pto}
IMPL_NAME=pg-transactional-outbox-$PTO_LISTENER
export DATABASE_URL=$PTO_DATABASE_URL SQS_QUEUE_URL=$PTO_QUEUE_URL

OUTBOX_PENDING_SQL="select count(*) from outbox where processed_at is null and abandoned_at is null"
OUTBOX_COUNT_SQL="select count(*) from outbox"
# :n messages shaped like outboxd's B2 rows: the order id is the aggregate id and the
# segment (the library's ordering group, as outboxd's ordering key), so every message is
# its segment's head; concurrency stays the table default ('sequential')
B2_INSERT_SQL="insert into outbox (id, aggregate_type, aggregate_id, message_type, segment, payload)
  select gen_random_uuid(), 'order', u::text, 'order_created', u::text,
         json_build_object('orderId', u, 'customerId', 'c' || (i % 1000),
         'amountCents', 100 + i % 10000, 'createdAt', now())
  from (select i, gen_random_uuid() as u from generate_series(1, :n) i) s"

_pto_sql() { PGOPTIONS="-c client_min_messages=warning" psql "$PTO_DATABASE_URL" -qAtX -v ON_ERROR_STOP=1 "$@"; }
_pto_pids() { cat "$PTO_RUN"/listener.*.pid 2>/dev/null; }

_pto_stop() {
  local p
  for p in $(_pto_pids); do kill -TERM "$p" 2>/dev/null || true; done
  for p in $(_pto_pids); do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -f "$PTO_RUN"/listener.*.pid
}

# N listener processes (the replication listener: one, the slot takes one reader)
_pto_start() {
  local n=${1:-1} i p
  [ "$PTO_LISTENER" = polling ] || n=1
  mkdir -p "$PTO_RUN"; _pto_stop
  for i in $(seq "$n"); do
    : >"$PTO_RUN/listener.$i.log"
    (cd "$PTO_DIR" && exec env PTO_DATABASE_URL="$PTO_DATABASE_URL" PTO_QUEUE_URL="$PTO_QUEUE_URL" \
      node listener.mjs "$PTO_LISTENER") >>"$PTO_RUN/listener.$i.log" 2>&1 &
    echo $! >"$PTO_RUN/listener.$i.pid"
  done
  for i in $(seq "$n"); do
    p=$(cat "$PTO_RUN/listener.$i.pid")
    for _ in $(seq 200); do
      kill -0 "$p" 2>/dev/null || { echo "pto adapter: listener exited; log:" >&2; tail -20 "$PTO_RUN/listener.$i.log" >&2; return 1; }
      grep -q 'listener started' "$PTO_RUN/listener.$i.log" && break
      sleep 0.05
    done
  done
}

impl_up() { _pto_start "${PTO_LISTENERS:-1}"; }
impl_down() { _pto_stop; }
impl_relays_start() { _pto_start "${1:-1}"; }
impl_relays_stop() { _pto_stop; }
impl_consumers_start() { :; }
impl_consumers_stop() { :; }
# epoch s of the last listener's "listener started" line (modules loaded, listener
# initialised; its first database connection follows)
impl_relays_ready_ts() {
  local t
  t=$(cat "$PTO_RUN"/listener.*.log 2>/dev/null | grep 'listener started' | jq -r .time | sort | tail -1)
  [ -n "$t" ] && [ "$t" != null ] || return 1
  date -d "$t" +%s.%3N
}
# back to empty: listener stopped, the library's setup run afresh for PTO_LISTENER (table,
# and the polling function and indexes, or the publication and the slot), queue purged
impl_reset() {
  local base=${PTO_DATABASE_URL%/*} db=${PTO_DATABASE_URL##*/}
  _pto_stop
  # a slot left by a replication run would keep WAL; the library's setup drops its own
  _pto_sql -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots
              where slot_name = 'pto_outbox_slot' and not active" >/dev/null 2>&1 || true
  [ "$(psql "$base/postgres" -qAtX -c "select count(*) from pg_database where datname = '$db'")" = 1 ] ||
    psql "$base/postgres" -qAtX -c "create database $db" >/dev/null
  (cd "$PTO_DIR" && PTO_DB=$db PTO_ROLE=$(_pto_sql -c 'select current_user') node setup.mjs "$PTO_LISTENER") |
    _pto_sql -f - >/dev/null || { echo "pto adapter: the library's setup SQL failed" >&2; return 1; }
  (cd "$PTO_DIR" && node queue.mjs purge "$PTO_QUEUE_URL")
}
impl_pids() { local p i=0; for p in $(_pto_pids); do i=$((i+1)); echo "listener$i $p"; done; }
