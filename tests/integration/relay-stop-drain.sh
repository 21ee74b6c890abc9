#!/usr/bin/env bash
# relay-stop-drain.sh -- SIGTERM to the master while the relays drain a
# backlog, as systemd stops the service (KillMode=mixed: the master alone);
# then SIGINT to the whole process group, as Ctrl-C in a terminal.
# A relay keeps claiming while earlier rows are still at the sink: when the
# stop comes it has a claim or a mark under way and chunks waiting for the
# sink.  The stop must finish all of that: every row it claimed is
# published and marked sent before it exits, so nothing is left under a
# lease to be published a second time.
# Asserts, for each stop: exit 0 within shutdown_timeout, each relay exited 0 and none was
# killed or forced; no row left claimed; the queue holds exactly the rows
# marked sent; after a restart the rest drains and every row went to SQS
# exactly once (messages = rows = distinct outbox ids, attempts = 1).
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

N=${RELAY_STOP_ROWS:-20000}
SHUTDOWN_MS=10000

# No consumer: the queue keeps every message for the counts below.
OB_RELAY_WORKERS=2 OB_BATCH_SIZE=100 OB_CONSUMER_WORKERS=0 OB_HTTP_WORKERS=1 \
	OB_SHUTDOWN_TIMEOUT=$SHUTDOWN_MS relay_conf_write "$T_DIR/outbox.conf"

# add_rows N: rows shaped like POST /orders' own, each its own ordering
# key, written before outboxd starts so that the drain begins at full speed.
add_rows() {
	sql "INSERT INTO outbox (event_type, ordering_key, payload)
		SELECT 'order.created', u::text, json_build_object('orderId', u, 'n', i)
		FROM (SELECT i, gen_random_uuid() AS u FROM generate_series(1, $1) i) s"
}
add_rows "$N"

# stop_mid_drain LABEL HOW: start outboxd, let 1000 more rows go out, stop
# it while the drain is in full swing and check that the stop finished the
# relays' work.  HOW "term": SIGTERM to the master alone (systemd,
# KillMode=mixed).  HOW "ctrl-c": SIGINT to the whole process group, as a
# terminal's Ctrl-C sends it: the workers must not take their own SIGINT
# and the master's SIGTERM after it as two stop signals ("second stop
# signal: exiting now" skips the drain and leaves rows to go out twice).
# HOW "group-term": SIGTERM to the whole process group (systemd's default
# KillMode=control-group, supervisors that signal a group): the same, each
# worker gets the group's signal and then the master's word.
stop_mid_drain() {
	local label=$1 how=$2 M before t0 t_exit sent pending claimed
	# A stop needs a backlog to land in: a stop that came late (a loaded
	# machine sees the 1000 rows late) may have left only a few rows.
	pending=$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")
	[ "$pending" -ge $((N / 2)) ] || add_rows $((N - pending))
	before=$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")
	outboxd_start "$T_DIR/outbox.conf" "$label"
	M=$(proc_pid "$OUTBOXD_PIDFILE")
	sent_some() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" -ge $((before + 1000)) ]; }
	wait_until 30 "1000 more rows sent" sent_some || die "the drain did not start"
	t0=$(now_ms)
	case $how in
	term) kill -TERM "$M" ;;
	ctrl-c) kill -INT -- "-$M" ;;
	group-term) kill -TERM -- "-$M" ;;
	esac
	gone() { ! proc_alive "$OUTBOXD_PIDFILE"; }
	wait_until $((SHUTDOWN_MS / 1000 + 5)) "outboxd to exit after the stop" gone || true
	t_exit=$(($(now_ms) - t0))
	read -r sent pending claimed <<<"$(sql "SELECT count(*) FILTER (WHERE status = 'sent'),
		count(*) FILTER (WHERE status = 'pending'),
		count(*) FILTER (WHERE claim IS NOT NULL) FROM outbox" | tr '|' ' ')"
	say "$how: stopped after $t_exit ms: $sent sent, $pending pending, $claimed claimed"
	check "$how: outboxd exited" gone
	check "$how: within shutdown_timeout ($t_exit ms <= $SHUTDOWN_MS ms + 500 ms)" \
		[ "$t_exit" -le $((SHUTDOWN_MS + 500)) ]
	check_eq "$how: relays that exited 0" 2 \
		"$(grep -cE 'role=master .*msg="relay [0-9]+ pid=[0-9]+ exited with status 0"' "$OUTBOXD_LOG" || true)"
	check_eq "$how: workers killed by the shutdown timeout" 0 "$(grep -c 'shutdown_timeout reached' "$OUTBOXD_LOG" || true)"
	check_eq "$how: workers that skipped their drain" 0 "$(grep -c 'second stop signal' "$OUTBOXD_LOG" || true)"
	check "$how: the stop came in the middle of the drain ($sent sent, $pending pending)" \
		[ "$sent" -ge $((before + 1000)) -a "$pending" -gt 0 ]
	check_eq "$how: rows left claimed (would go out again after the lease)" 0 "$claimed"
	check_eq "$how: messages in the queue = rows marked sent" "$sent" \
		"$(sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessages)"
}

stop_mid_drain a term
stop_mid_drain b ctrl-c
stop_mid_drain c group-term

# The rest, after a restart: every row exactly once
outboxd_start "$T_DIR/outbox.conf" d
drained() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
wait_until 60 "the rest to drain" drained || true
outboxd_stop
check_eq "rows not sent after the restart" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
check_eq "rows sent more than once (attempts > 1)" 0 "$(sql "SELECT count(*) FROM outbox WHERE attempts <> 1")"
check_eq "messages in the queue = rows" "$(sql "SELECT count(*) FROM outbox")" \
	"$(sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessages)"
