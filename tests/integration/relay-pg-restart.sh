#!/usr/bin/env bash
# relay-pg-restart.sh -- PostgreSQL restarts (pg_ctl restart -m fast) while
# POST /orders keeps coming (60 orders, one every 0.2 s).
# Asserts: every order that got a 201 has exactly one DynamoDB fulfillment
# and a 'sent' outbox row, nothing 'failed'; POST /orders answers 201 again
# after the restart; every relay logs "reconnected" (and does not flood the
# log while the server is down); rows inserted with SQL after the relays
# reconnected are published within poll_interval (+ 300 ms), i.e. LISTEN
# works again or at worst the poll does; a row inserted right after
# pg_ctl returned (relays possibly still backing off) is published within
# poll_interval + the relay's maximum reconnect delay (5 s).  Then the
# server is stopped for 4 s and started again: the relays notice at once,
# back off without flooding the log, reconnect within 5 s of the start and
# publish new rows within poll_interval again.  "Within poll_interval" is
# also checked for being NOTIFY-driven (median < 300 ms): LISTEN is live.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

POLL=1000
RECONNECT_MAX=5000	# RELAY_RECONNECT_MAX in src/relay.c
N=${RELAY_PGRESTART_ORDERS:-60}
RELAYS=2

# a short lease: a batch whose outcome could not be recorded because the
# server went away is published again after the lease (5 s, not 30 s)
OB_RELAY_WORKERS=$RELAYS OB_POLL_INTERVAL=$POLL OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
	OB_EXTRA_TOP=$'webhook {\n\ttimeout = 4000\n}' \
	relay_conf_write "$T_DIR/outbox.conf" "lease = 5000" "timeout = 2500"
outboxd_start "$T_DIR/outbox.conf"

PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
if [ "$(id -u)" = 0 ]; then as_pg() { runuser -u "${PG_OS_USER:-postgres}" -- "$@"; }; else as_pg() { "$@"; }; fi

# publish latency of outbox row ID in ms (sent_at - created_at), or empty
latency_ms() { sql "SELECT round(1000 * extract(epoch FROM sent_at - created_at)) FROM outbox WHERE id = $1 AND status = 'sent'"; }
row_sent() { [ -n "$(latency_ms "$1")" ]; }
# sql_order prints the order id; the outbox row's id
outbox_id_of() { sql "SELECT id FROM outbox WHERE ordering_key = '$1'"; }

orders_post_bg "$T_DIR/orders" "$N" 0.2 pgr
sleep 4
say "restarting PostgreSQL (fast)"
t_r0=$(now_ms)
as_pg "$PG_BINDIR/pg_ctl" -D "$T_STACK/pg/data" -l "$T_STACK/pg/pg.log" -m fast -w -t 60 restart >"$T_DIR/pg_ctl.out" 2>&1 ||
	die "pg_ctl restart failed: $(cat "$T_DIR/pg_ctl.out")"
t_r1=$(now_ms)
say "pg_ctl restart returned after $((t_r1 - t_r0)) ms"

# a row right away, while relays may still be waiting to reconnect
early_order=$(sql_order pgr-early 1) || die "insert right after the restart failed"
early_row=$(outbox_id_of "$early_order")

reconnected() { [ "$(grep -c 'reconnected to PostgreSQL' "$OUTBOXD_LOG" || true)" -ge "$RELAYS" ]; }
wait_until 20 "every relay to log 'reconnected'" reconnected || true
t_rc=$(now_ms)
check "every relay logged that it reconnected ($(grep -c 'reconnected to PostgreSQL' "$OUTBOXD_LOG" || true) of $RELAYS)" reconnected
grep 'reconnected to PostgreSQL' "$OUTBOXD_LOG" | sed 's/^/    /' | head -4
say "all relays reconnected at most $((t_rc - t_r1)) ms after pg_ctl returned (poll step 200 ms)"
unreach=$(grep -c 'PostgreSQL unreachable' "$OUTBOXD_LOG" || true)
check "no log flood while PostgreSQL was down ($unreach 'unreachable' lines <= $((RELAYS * 2)))" [ "$unreach" -le $((RELAYS * 2)) ]

wait_until 15 "the row inserted right after the restart to be sent" row_sent "$early_row" || true
early_ms=$(latency_ms "$early_row")
say "row inserted right after the restart: published ${early_ms:-never} ms after its insert"
check "row inserted right after the restart published within poll_interval + reconnect max ($early_ms <= $((POLL + RECONNECT_MAX)) ms)" \
	[ -n "$early_ms" ] && [ "${early_ms:-99999}" -le $((POLL + RECONNECT_MAX)) ]

# after_rows TAG -- 5 rows inserted with SQL, 0.3 s apart: publish
# latencies; checks max <= poll_interval + 300 ms, median < 300 ms
after_rows() {
	local tag=$1 i oid row l med
	lat=()
	for i in 1 2 3 4 5; do
		oid=$(sql_order "pgr-$tag-$i" $((10 + i))) || die "insert after the restart failed"
		row=$(outbox_id_of "$oid")
		wait_until 10 "row $row to be sent" row_sent "$row" || true
		l=$(latency_ms "$row")
		lat+=("${l:-99999}")
		sleep 0.3
	done
	say "$tag: publish latency of 5 rows inserted after the reconnect: ${lat[*]} ms (poll_interval $POLL ms)"
	maxlat=$(printf '%s\n' "${lat[@]}" | sort -n | tail -1)
	med=$(printf '%s\n' "${lat[@]}" | sort -n | sed -n 3p)
	check "$tag: rows inserted after the reconnect published within poll_interval + 300 ms (max $maxlat ms)" \
		[ "$maxlat" -le $((POLL + 300)) ]
	check "$tag: ... and woken by NOTIFY, not only by the poll: LISTEN is live again (median $med ms < 300)" \
		[ "$med" -lt 300 ]
}
after_rows restart
echo "TIMING relay-pg-restart pg_restart_ms=$((t_r1 - t_r0)) reconnect_after_ms=$((t_rc - t_r1)) early_row_ms=${early_ms:-none} after_reconnect_max_ms=$maxlat"

wait "$ORDERS_BG_PID"
codes=$(orders_codes "$T_DIR/orders")
say "POST /orders answers: $codes"
orders_201_ids "$T_DIR/orders" >"$T_DIR/ids"
n201=$(wc -l <"$T_DIR/ids")
check "most POSTs answered 201 ($n201 of $N)" [ "$n201" -ge $((N / 2)) ]
# the POSTs that started 2 s after pg_ctl returned must all succeed
late_bad=0
for f in "$T_DIR"/orders/*.t; do
	[ "$(cat "$f")" -ge $((t_r1 + 2000)) ] || continue
	[ "$(cat "${f%.t}.code")" = 201 ] || late_bad=$((late_bad + 1))
done
check_eq "POSTs started >= 2 s after the restart that did not answer 201" 0 "$late_bad"

sql "SELECT id FROM orders WHERE customer_id = 'pgr-early' OR customer_id LIKE 'pgr-restart-%'" >>"$T_DIR/ids"
LC_ALL=C sort -o "$T_DIR/ids" "$T_DIR/ids"
wait_fulfilled 40 "$T_DIR/ids" || true
fulfilled_ids >"$T_DIR/fulfilled"
check_eq "orders (201 or SQL) without a fulfillment" 0 "$(LC_ALL=C comm -23 "$T_DIR/ids" "$T_DIR/fulfilled" | wc -l)"
# an order may be committed although its POST got no answer: count the table
norders=$(sql "SELECT count(*) FROM orders")
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
wait_until 20 "every outbox row sent" all_sent || true
check_eq "outbox rows not 'sent'" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
wait_until 20 "a fulfillment for every order row" bash -c "[ \$(jq length <<<'$(ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE")') -ge $norders ]" || true
check_eq "fulfillment items = orders in the table (exactly one each)" "$norders" "$(fulfilled_ids | wc -l)"
check_eq "outbox rows = orders in the table" "$norders" "$(sql "SELECT count(*) FROM outbox")"
check "outboxd still running" proc_alive "$OUTBOXD_PIDFILE"

# ---- a longer outage: stopped for 4 s ---------------------------------------
say "stopping PostgreSQL for 4 s"
nrc0=$(grep -c 'reconnected to PostgreSQL' "$OUTBOXD_LOG" || true)
nun0=$(grep -c 'PostgreSQL unreachable' "$OUTBOXD_LOG" || true)
nlost0=$(grep -c 'lost the PostgreSQL connection' "$OUTBOXD_LOG" || true)
as_pg "$PG_BINDIR/pg_ctl" -D "$T_STACK/pg/data" -m fast -w -t 60 stop >"$T_DIR/pg_ctl.out" 2>&1 ||
	die "pg_ctl stop failed: $(cat "$T_DIR/pg_ctl.out")"
t_s0=$(now_ms)
sleep 4
lost=$(($(grep -c 'lost the PostgreSQL connection' "$OUTBOXD_LOG" || true) - nlost0))
check "every relay noticed the lost connection while the server was down ($lost lines)" [ "$lost" -ge "$RELAYS" ]
as_pg "$PG_BINDIR/pg_ctl" -D "$T_STACK/pg/data" -l "$T_STACK/pg/pg.log" -w -t 60 start >"$T_DIR/pg_ctl.out" 2>&1 ||
	die "pg_ctl start failed: $(cat "$T_DIR/pg_ctl.out")"
t_s1=$(now_ms)
say "PostgreSQL down for $((t_s1 - t_s0)) ms"
early2_order=$(sql_order pgr-early2 2) || die "insert right after the start failed"
early2_row=$(outbox_id_of "$early2_order")
reconnected2() { [ $(($(grep -c 'reconnected to PostgreSQL' "$OUTBOXD_LOG" || true) - nrc0)) -ge "$RELAYS" ]; }
wait_until 20 "every relay to reconnect" reconnected2 || true
t_rc2=$(now_ms)
check "every relay reconnected within reconnect max + 1 s after the start ($((t_rc2 - t_s1)) ms)" \
	[ $((t_rc2 - t_s1)) -le $((RECONNECT_MAX + 1000)) ]
unreach=$(($(grep -c 'PostgreSQL unreachable' "$OUTBOXD_LOG" || true) - nun0))
check "reconnect attempts logged sparingly during 4 s down ($unreach lines <= $((RELAYS * 2)))" [ "$unreach" -le $((RELAYS * 2)) ]
wait_until 15 "the row inserted right after the start to be sent" row_sent "$early2_row" || true
early2_ms=$(latency_ms "$early2_row")
say "stop4s: row inserted right after the start: published ${early2_ms:-never} ms after its insert"
check "stop4s: row inserted right after the start published within poll_interval + reconnect max ($early2_ms <= $((POLL + RECONNECT_MAX)) ms)" \
	[ -n "$early2_ms" ] && [ "${early2_ms:-99999}" -le $((POLL + RECONNECT_MAX)) ]
after_rows stop4s
echo "TIMING relay-pg-restart stop4s_reconnect_after_ms=$((t_rc2 - t_s1)) stop4s_early_row_ms=${early2_ms:-none} stop4s_after_reconnect_max_ms=$maxlat"
all_sent2() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
wait_until 20 "every outbox row sent" all_sent2 || true
check_eq "after the 4 s outage: outbox rows not 'sent'" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
sql "SELECT id FROM orders ORDER BY 1" >"$T_DIR/ids2"
wait_fulfilled 20 "$T_DIR/ids2" || true
check_eq "after the 4 s outage: orders without a fulfillment" 0 "$(LC_ALL=C comm -23 "$T_DIR/ids2" <(fulfilled_ids) | wc -l)"

# libpq reports the server's "terminating connection" between queries
# through its notice processor, which writes to stderr unless told
# otherwise: every line of the log must still be a log line.
check_eq "log lines not in the log format (a bare libpq message)" 0 \
	"$(grep -cv '^time=' "$OUTBOXD_LOG" || true)"
{ grep -v '^time=' "$OUTBOXD_LOG" || true; } | head -3 | sed 's/^/    /'
check "the server's goodbye is logged as a warning" \
	grep -q 'level=warn .*msg="database FATAL: terminating connection due to administrator command"' "$OUTBOXD_LOG"
