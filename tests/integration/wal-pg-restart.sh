#!/usr/bin/env bash
# wal-pg-restart.sh -- relay.mode = "wal" while PostgreSQL restarts
# (pg_ctl restart -m fast) under load: 60 orders through POST /orders, one
# every 0.2 s, 2 relays (one streams).
# Asserts: the stream is taken again after the restart (a second
# "streaming slot" line) without flooding the log; a row written right
# after the restart is published within 5 s; every order that got a 201
# has exactly one fulfillment and a 'sent' row, nothing 'failed'.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
PG_WAL_LEVEL=logical stack_up

N=${WAL_PGRESTART_ORDERS:-60}
OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
	relay_conf_write "$T_DIR/outbox.conf" 'mode = "wal"' "backoff_base = 200" "backoff_max = 2000"
outboxd_start "$T_DIR/outbox.conf"
PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
if [ "$(id -u)" = 0 ]; then as_pg() { runuser -u "${PG_OS_USER:-postgres}" -- "$@"; }; else as_pg() { "$@"; }; fi
streams() { grep -c 'msg="streaming slot outboxd' "$OUTBOXD_LOG" || true; }
wait_until 10 "a relay streaming" test "$(streams)" -ge 1 || true

orders_post_bg "$T_DIR/orders" "$N" 0.2 pgr
sleep 4
say "restarting PostgreSQL (fast)"
as_pg "$PG_BINDIR/pg_ctl" -D "$T_STACK/pg/data" -l "$T_STACK/pg/pg.log" -m fast -w -t 60 restart >"$T_DIR/pg_ctl.out" 2>&1 ||
	die "pg_ctl restart failed: $(cat "$T_DIR/pg_ctl.out")"
t_up=$(now_ms)
early=$(sql "INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('wal.early', 'early', '{\"early\": true}') RETURNING id")
back() { [ "$(streams)" -ge 2 ]; }
wait_until 15 "the slot streamed again" back || true
check "the slot is streamed again after the restart" back
early_sent() { [ "$(sql "SELECT status FROM outbox WHERE id = $early")" = sent ]; }
wait_until 10 "the row written right after the restart sent" early_sent || true
check "a row written right after the restart is sent within 5 s ($(($(now_ms) - t_up)) ms)" \
	[ "$(sql "SELECT status FROM outbox WHERE id = $early")" = sent -a $(($(now_ms) - t_up)) -le 5000 ]
warns=$(grep -c 'level=warn.*replication stream of slot' "$OUTBOXD_LOG" || true)
check "stream warnings while the server was down: a few, not one a second per relay ($warns)" [ "$warns" -le 6 ]

wait "$ORDERS_BG_PID"
say "POST /orders: $(orders_codes "$T_DIR/orders")"
orders_201_ids "$T_DIR/orders" >"$T_DIR/ids"
check "most orders answered 201 ($(wc -l <"$T_DIR/ids") of $N)" [ "$(wc -l <"$T_DIR/ids")" -ge $((N - 15)) ]
wait_fulfilled 40 "$T_DIR/ids" || true
fulfilled_ids >"$T_DIR/fulfilled"
check_eq "orders (201) without a fulfillment" 0 "$(LC_ALL=C comm -23 "$T_DIR/ids" "$T_DIR/fulfilled" | wc -l)"
check_eq "fulfillment items that are no order (exactly one per order)" 0 "$(LC_ALL=C comm -13 <(sql "SELECT id FROM orders" | LC_ALL=C sort) "$T_DIR/fulfilled" | wc -l)"
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
wait_until 20 "every outbox row sent" all_sent || true
check_eq "outbox rows not 'sent'" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
check_queue_drained 20 "consumers to delete every message"
