#!/usr/bin/env bash
# db-down-start.sh -- outboxd started while PostgreSQL is down: the master
# only logs it (outboxd(8), Start-up), the HTTP and relay workers start all
# the same and retry with backoff instead of exiting (which made the master
# give up with "N worker crashes within 60 s").  Meanwhile POST /orders
# answers 503 database_unavailable and /readyz 503; once PostgreSQL is
# started, without a restart of outboxd, an order is answered 201 within a
# bounded wait and its event reaches the SQS queue.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
stack_up

PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
if [ "$(id -u)" = 0 ]; then as_pg() { runuser -u "${PG_OS_USER:-postgres}" -- "$@"; }; else as_pg() { "$@"; }; fi

OB_HTTP_WORKERS=2 OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=0 outbox_conf_write "$T_DIR/outbox.conf"
"$T_LIB/pg-down.sh" "$T_STACK/pg" --keep >/dev/null || die "could not stop PostgreSQL"
say "PostgreSQL stopped; starting outboxd"
outboxd_start "$T_DIR/outbox.conf"
M=$(proc_pid "$OUTBOXD_PIDFILE")

sleep 5
check "the master is still running 5 s after a start without PostgreSQL" proc_alive "$OUTBOXD_PIDFILE"
check_eq "the master did not give up" 0 "$(grep -c 'crashes within' "$OUTBOXD_LOG" || true)"
check_eq "no worker exited" 0 "$(grep -cE 'role=master .*exited with status' "$OUTBOXD_LOG" || true)"
check "the master said the database is unreachable" grep -q 'database unreachable at start-up' "$OUTBOXD_LOG"
check "the relays said they retry" grep -qE 'role=relay\.[12] .*PostgreSQL unreachable at start \(retrying with backoff\)' "$OUTBOXD_LOG"
n=$({ grep -E 'role=(http|relay)\.[12] .*(unreachable|connect)' "$OUTBOXD_LOG" || true; } | grep -vc 'serving with' || true)
check "retries are not logged one by one ($n lines about connecting in 5 s from 4 workers, <= 6)" [ "$n" -le 6 ]

post_order down-1 100
check_eq "POST /orders without PostgreSQL" 503 "$HTTP_STATUS"
check "  ... database_unavailable: $HTTP_BODY" jq_true '.error == "database_unavailable" and (.message | length > 0)' "$HTTP_BODY"
http GET /readyz
check_eq "GET /readyz without PostgreSQL" 503 "$HTTP_STATUS"
check "  ... says PostgreSQL is unreachable: $HTTP_BODY" \
	jq_true '.status == "not_ready" and .database == "unreachable" and (.message | test("PostgreSQL"))' "$HTTP_BODY"
http GET /healthz
check_eq "GET /healthz (liveness) without PostgreSQL" 200 "$HTTP_STATUS"

say "starting PostgreSQL"
as_pg "$PG_BINDIR/pg_ctl" -D "$T_STACK/pg/data" -l "$T_STACK/pg/pg.log" -w -t 60 start >"$T_DIR/pg_ctl.out" 2>&1 ||
	die "pg_ctl start failed: $(cat "$T_DIR/pg_ctl.out")"
t0=$(now_ms)
order_ok() { post_order up-1 4999; [ "$HTTP_STATUS" = 201 ]; }
wait_until 15 "POST /orders answered 201" order_ok || true
took=$(($(now_ms) - t0))
check_eq "POST /orders once PostgreSQL is up (after $took ms)" 201 "$HTTP_STATUS"
id=$(jq -r '.id // empty' <<<"$HTTP_BODY" 2>/dev/null || true)
check "  ... within 10 s of the start ($took ms; the pool's backoff is at most 5 s)" [ "$took" -le 10000 ]
ready() { http GET /readyz; [ "$HTTP_STATUS" = 200 ]; }
wait_until 10 "/readyz 200" ready || true
check_eq "GET /readyz once PostgreSQL is up" 200 "$HTTP_STATUS"

sent() { [ "$(sql "SELECT status FROM outbox WHERE ordering_key = '$id'")" = sent ]; }
wait_until 15 "the order's event to be marked sent" sent || true
check "the order's outbox row was published (status sent)" sent
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$QUEUE_URL" --count 1 --idle 5 \
	>"$T_DIR/queue.txt" 2>"$T_DIR/drain.err" || true
check "its event is in the SQS queue" grep -q "$id" "$T_DIR/queue.txt"
check_eq "no worker exited" 0 "$(grep -cE 'role=master .*exited with status' "$OUTBOXD_LOG" || true)"
check "the master started first is still running ($M)" proc_alive "$OUTBOXD_PIDFILE"
