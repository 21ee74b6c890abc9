#!/usr/bin/env bash
# master-stop.sh -- stopping the master, three ways:
# (a) SIGTERM under a steady stream of orders: the master exits 0 within
#     shutdown_timeout, every worker drained (exit 0, none killed by the
#     timeout), none left; every request that got a 201 has its order and
#     its outbox row, and no order was stored whose request did not get its
#     201 (the drain answers every request it took);
# (b) kill -9 of the master under load: no outboxd child is left after 3 s
#     (they get SIGTERM from the kernel, PR_SET_PDEATHSIG);
#     then outboxd is started again and every order accepted in (a) and (b)
#     is fulfilled, exactly once;
# (c) SIGQUIT while an HTTP worker holds a request (the orders table is
#     locked, so its INSERT waits): the master and every worker are gone at
#     once (well under a second, although shutdown_timeout is 5 s), exit 0;
# (d) SIGTERM while DynamoDB does not answer the consumer's PutItem: the
#     consumer gives up the messages in hand at half of shutdown_timeout, all
#     exit 0 in time, and after a restart every order is fulfilled once;
# (e) SIGHUP, then SIGTERM, while SQS does not answer the relay's
#     SendMessageBatch: the relay the reload retired waits for its request
#     (no deadline), then gives up the rows at the sink at half of
#     shutdown_timeout after the SIGTERM; all exit 0 in time, and after a
#     restart (once their lease has ended) every order is published and
#     fulfilled once.
# The queue's visibility timeout is 5 s: a consumer stopped in a long poll
# may leave a message invisible that long before the restart gets it.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/load.sh"
test_init
need_binaries
export STACK_VISIBILITY_TIMEOUT=5
stack_up

SHUTDOWN_MS=5000
# (a)-(c): rows a relay held when the master was killed in (b) wait for their
# lease before the restart publishes them: 5 s here, not the default 30 s
# (the lease must be at least twice relay.timeout).
OB_HTTP_WORKERS=2 OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=5 \
OB_SHUTDOWN_TIMEOUT=$SHUTDOWN_MS OB_EXTRA_RELAY="timeout = 2000
	lease = 5000" outbox_conf_write "$T_DIR/outbox.conf"

# alive_of PIDS... -- those of PIDS still running (zombies are not)
alive_of() {
	local p
	for p in "$@"; do
		# Still outboxd's (its title): a PID freed by a worker may be
		# reused at once by the load's processes (pid_max 32768 here).
		[ -e "/proc/$p" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null &&
			tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q '^outboxd' && echo "$p"
	done
	return 0
}

# ---- (a) SIGTERM under load ---------------------------------------------------
outboxd_start "$T_DIR/outbox.conf" a
M=$(proc_pid "$OUTBOXD_PIDFILE")
wait_counts "$M" 10 2 2 1 || die "workers did not all start: $(counts_now "$M")"
kids=$(children "$M" | awk '{ print $1 }')
load_start a --threads 4 --rate 60
load_wait_created a 100 20 || die "no orders flowing"
t0=$(now_ms)
kill -TERM "$M"
wait_until $((SHUTDOWN_MS / 1000 + 5)) "outboxd to exit after SIGTERM" outboxd_gone || true
t_exit=$(($(now_ms) - t0))
load_stop a
rc=0
if outboxd_gone; then wait "$M" 2>/dev/null || rc=$?; else rc=running; fi
say "(a) SIGTERM under load: master gone after $t_exit ms (poll step 200 ms), exit status $rc"
echo "TIMING master-stop sigterm_under_load_exit_ms=$t_exit shutdown_timeout_ms=$SHUTDOWN_MS"
check_eq "(a) exit status after SIGTERM" 0 "$rc"
check "(a) exited within shutdown_timeout ($t_exit ms <= $SHUTDOWN_MS ms + 500 ms of polling)" \
	[ "$t_exit" -le $((SHUTDOWN_MS + 500)) ]
check "(a) the master logged the graceful stop" \
	grep -q "msg=\"graceful stop: draining 5 worker(s), up to $SHUTDOWN_MS ms\"" "$OUTBOXD_LOG"
check_eq "(a) workers that exited 0 (drained)" 5 \
	"$(grep -cE 'role=master .*msg="(http|relay|consumer) [0-9]+ pid=[0-9]+ exited with status 0"' "$OUTBOXD_LOG" || true)"
check_eq "(a) workers killed by the shutdown timeout" 0 "$(grep -c 'shutdown_timeout reached' "$OUTBOXD_LOG" || true)"
check_eq "(a) no worker left" "" "$(alive_of $kids | tr '\n' ' ')"
check "(a) orders answered 201 before the stop" [ "$(load_created a)" -ge 100 ]
check_orders_stored "$T_DIR/a.ids" "(a) SIGTERM"
lost=$(load_failed_stored a)
check_eq "(a) orders stored whose request got no 201 (answer lost in the drain)" "" "$lost"
say "(a) requests that failed once the stop began: $(jq -r .kind "$T_DIR/a.fail" | sort | uniq -c | tr '\n' ' ') (no worker takes new connections while draining; the master's exit closes the socket)"
say "(a) outbox rows left pending by the stop: $(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")"

# ---- (b) kill -9 of the master --------------------------------------------------
outboxd_start "$T_DIR/outbox.conf" b
M=$(proc_pid "$OUTBOXD_PIDFILE")
wait_counts "$M" 10 2 2 1 || die "workers did not all start: $(counts_now "$M")"
kids=$(children "$M" | awk '{ print $1 }')
load_start b --threads 4 --rate 60
load_wait_created b 100 20 || die "no orders flowing"
t0=$(now_ms)
kill -KILL "$M"
t_gone=
while [ $(($(now_ms) - t0)) -lt 3000 ]; do
	if [ -z "$(alive_of $kids)" ]; then
		t_gone=$(($(now_ms) - t0))
		break
	fi
	sleep 0.05
done
[ -n "$t_gone" ] || sleep 0.1
left=$(alive_of $kids | tr '\n' ' ')
check_eq "(b) outboxd children still running 3 s after kill -9 of the master" "" "${left% }"
[ -z "$left" ] || ps -o pid,ppid,stat,args -p "$(echo $left | tr ' ' ,)" || true
say "(b) every child gone ${t_gone:-(not all)} ms after kill -9 of the master (poll step 50 ms)"
echo "TIMING master-stop orphans_gone_after_master_kill_ms=${t_gone:-none}"
wait "$M" 2>/dev/null || true
check_eq "(b) no process of outboxd's process group still running" "" "$(group_running "$M" | tr '\n' ' ')"
check_eq "(b) workers that logged their stop (SIGTERM from the kernel)" 5 \
	"$(grep -cE 'msg="stop signal: finishing work in hand"' "$OUTBOXD_LOG" || true)"
load_stop b
say "(b) orders stored whose answer was lost with the master: $(load_failed_stored b | wc -l)"

# ---- restart: everything accepted is fulfilled -----------------------------------
outboxd_start "$T_DIR/outbox.conf" c
M=$(proc_pid "$OUTBOXD_PIDFILE")
cat "$T_DIR/a.ids" "$T_DIR/b.ids" >"$T_DIR/ab.ids"
t0=$(now_ms)
wait_fulfilled "$T_DIR/ab.ids" 60 || true
wait_outbox_sent 40 || true
echo "TIMING master-stop restart_to_all_fulfilled_ms=$(($(now_ms) - t0)) orders=$(wc -l <"$T_DIR/ab.ids")"
check_orders_stored "$T_DIR/b.ids" "(b) kill -9"
check_fulfilled_once "$T_DIR/ab.ids" "(a+b) after a restart"

# ---- (c) SIGQUIT with a request in hand -------------------------------------------
wait_counts "$M" 10 2 2 1 || fail "(c) workers did not all start: $(counts_now "$M")"
kids=$(children "$M" | awk '{ print $1 }')
on_exit "proc_stop '$T_DIR/locker.pid' 2"
proc_start "$T_DIR/locker.pid" "$T_DIR/locker.log" psql -X -q -c \
	"BEGIN; LOCK TABLE orders IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(8); COMMIT;" ||
	die "could not lock the orders table"
locked() { [ "$(sql "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'orders' AND l.mode = 'AccessExclusiveLock' AND l.granted")" = 1 ]; }
wait_until 5 "the orders table locked" locked || die "the orders table did not get locked"
curl -sS -o /dev/null -w '%{http_code}' --max-time 20 -H 'Content-Type: application/json' \
	--data-binary '{"customerId":"quit-1","amountCents":1}' "$OUTBOXD_URL/orders" \
	>"$T_DIR/quit.code" 2>"$T_DIR/quit.err" &
CURL=$!
waiting() { [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT%'")" -ge 1 ]; }
check "(c) an HTTP worker holds a POST /orders (its INSERT waits for the lock)" \
	wait_until 5 "an INSERT waiting for the lock" waiting
t0=$(now_ms)
kill -QUIT "$M"
gone_all() { outboxd_gone && [ -z "$(alive_of $kids)" ]; }
wait_until 5 "outboxd and its workers to exit after SIGQUIT" gone_all || true
t_quit=$(($(now_ms) - t0))
rc=0
if outboxd_gone; then wait "$M" 2>/dev/null || rc=$?; else rc=running; fi
say "(c) SIGQUIT: master and workers gone after $t_quit ms (poll step 200 ms), exit status $rc"
echo "TIMING master-stop sigquit_exit_ms=$t_quit"
check_eq "(c) exit status after SIGQUIT" 0 "$rc"
check "(c) gone at once ($t_quit ms < 1000 ms; shutdown_timeout is $SHUTDOWN_MS ms)" [ "$t_quit" -lt 1000 ]
check "(c) the master logged the immediate stop" grep -q 'msg="immediate stop"' "$OUTBOXD_LOG"
check_eq "(c) no worker left" "" "$(alive_of $kids | tr '\n' ' ')"
check_eq "(c) no process of outboxd's process group still running" "" "$(group_running "$M" | tr '\n' ' ')"
wait "$CURL" 2>/dev/null || true
say "(c) the request in hand got: HTTP $(cat "$T_DIR/quit.code") $(head -c 120 "$T_DIR/quit.err")"
check "(c) the request in hand was not answered 201 (an immediate stop does not finish work)" \
	[ "$(cat "$T_DIR/quit.code")" != 201 ]

# Phases (d) and (e): a broker that does not answer at a stop.
# hung_start PHASE CONF PREFIX -- start outboxd (one worker of each kind) with
# CONF and post 3 orders, customers PREFIX-1..3, their ids in $T_DIR/PHASE.ids
hung_start() {
	local i
	outboxd_start "$2" "$1"
	M=$(proc_pid "$OUTBOXD_PIDFILE")
	wait_counts "$M" 10 1 1 1 || die "($1) workers did not all start: $(counts_now "$M")"
	: >"$T_DIR/$1.ids"
	for i in 1 2 3; do
		post_order "$3-$i" "$i"
		[ "$HTTP_STATUS" = 201 ] || die "($1) POST /orders answered $HTTP_STATUS"
		jq -r .id <<<"$HTTP_BODY" >>"$T_DIR/$1.ids"
	done
}
# fulfilled_once PHASE SECONDS -- each order of PHASE gets exactly one item
fulfilled_once() {
	local id
	wait_fulfilled "$T_DIR/$1.ids" "$2" || true
	for id in $(cat "$T_DIR/$1.ids"); do
		check_eq "($1) order $id: fulfillment items after the restart" 1 \
			"$(ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" | jq --arg id "$id" '[.[] | select(.orderId.S == $id)] | length')"
	done
}

# ---- (d) SIGTERM while DynamoDB does not answer ------------------------------------
# A PutItem may take 10 s before it times out, as long as the default
# shutdown_timeout.  The consumer gives up the messages in hand at half of
# shutdown_timeout and exits 0 before the master's SIGKILL; SQS delivers them
# again after the visibility timeout, and a restart with DynamoDB back
# fulfils every order once.
proc_stop "$T_DIR/locker.pid" 2	# (c)'s lock on the orders table
unlocked() { ! locked; }
wait_until 10 "the orders table unlocked" unlocked || die "(d) the orders table is still locked"
proxy_start ddbfault fault-proxy.py --upstream "$DDB_ENDPOINT"
DP=http://127.0.0.1:$PROXY_PORT
curl -fsS -o /dev/null -X POST "$DP/__fault" --data-binary '{"mode":"delay","ms":20000,"actions":["PutItem"]}' ||
	die "(d) could not set the DynamoDB proxy's delay"
DDB_ENDPOINT=$DP OB_HTTP_WORKERS=1 OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
OB_SHUTDOWN_TIMEOUT=$SHUTDOWN_MS outbox_conf_write "$T_DIR/outbox-d.conf"
hung_start d "$T_DIR/outbox-d.conf" ddb-hangs
puts_held() { [ "$(stat_of ddbfault '.stats.by_action.PutItem // 0')" -ge 1 ]; }
check "(d) a PutItem of the consumer is held by the DynamoDB proxy" \
	wait_until 15 "a PutItem at the proxy" puts_held
stop_before_kill "(d)" "$SHUTDOWN_MS" "consumer 1" 1 DynamoDB
check "(d) the consumer said what it gave up, and when" \
	grep -qE "role=consumer\.1 .*msg=\"stopping with [1-3] PutItem\(s\) of the [1-3] message\(s\) in hand unanswered $((SHUTDOWN_MS / 2)) ms after the stop signal: SQS delivers the messages again after the visibility timeout\"" "$OUTBOXD_LOG"
curl -fsS -o /dev/null -X POST "$DP/__fault" --data-binary '{"mode":"pass"}' ||
	die "(d) could not clear the DynamoDB proxy's delay"
outboxd_start "$T_DIR/outbox-d.conf" d2
fulfilled_once d 30

# ---- (e) SIGHUP, then SIGTERM, while SQS does not answer the relay ----------------
# A SendMessageBatch may take relay.timeout (10 s by default) before it times
# out, as long as the default shutdown_timeout.  A reload retires the relay
# with no deadline (the master will not kill it), so it keeps waiting; the
# SIGTERM that follows gives it one, and it gives up the rows at the sink at
# half of shutdown_timeout and exits 0 before the master's SIGKILL.  The
# rows stay claimed, and once their lease ends the restarted relay publishes
# them.  relay.timeout 10000 outlasts the give-up (about 6 s after the
# request started); the lease must be at least twice the timeout.
outboxd_stop
proxy_start sqsfault fault-proxy.py --upstream "$SQS_ENDPOINT"
SP=http://127.0.0.1:$PROXY_PORT
curl -fsS -o /dev/null -X POST "$SP/__fault" --data-binary '{"mode":"delay","ms":20000,"actions":["SendMessageBatch"]}' ||
	die "(e) could not set the SQS proxy's delay"
SQS_ENDPOINT=$SP OB_HTTP_WORKERS=1 OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=1 \
OB_SHUTDOWN_TIMEOUT=$SHUTDOWN_MS OB_EXTRA_RELAY="timeout = 10000
	lease = 20000" outbox_conf_write "$T_DIR/outbox-e.conf"
hung_start e "$T_DIR/outbox-e.conf" sqs-hangs
sends_held() { [ "$(stat_of sqsfault '.stats.by_action.SendMessageBatch // 0')" -ge 1 ]; }
check "(e) a SendMessageBatch of the relay is held by the SQS proxy" \
	wait_until 5 "a SendMessageBatch at the proxy" sends_held
kill -HUP "$M"
reloaded() { grep -q 'msg="reload done: generation 2"' "$OUTBOXD_LOG"; }
wait_until 5 "the reload" reloaded || die "(e) the reload did not happen"
sleep $((SHUTDOWN_MS / 2000 + 1))
check_eq "(e) give-ups by the relay a reload retired, past half of shutdown_timeout" 0 \
	"$(grep -c 'still unanswered' "$OUTBOXD_LOG" || true)"
check "(e) ... which is still waiting for its request" grep -q 'msg="retired by a reload: finishing work in hand"' "$OUTBOXD_LOG"
stop_before_kill "(e)" "$SHUTDOWN_MS" "relay 1" 2 SQS
check "(e) the relay said what it gave up, and when" \
	grep -qE "role=relay\.1 .*msg=\"stopping with [1-3] row\(s\) given to SQS \(SendMessageBatch\) still unanswered $((SHUTDOWN_MS / 2)) ms after the stop signal: they are published again when their lease ends \(relay.lease 20000 ms\)\"" "$OUTBOXD_LOG"
check_eq "(e) rows marked sent by the stopped relay" 0 \
	"$(sql "SELECT count(*) FROM outbox o JOIN orders r ON o.payload->>'orderId' = r.id::text WHERE r.customer_id LIKE 'sqs-hangs-%' AND o.status = 'sent'")"
curl -fsS -o /dev/null -X POST "$SP/__fault" --data-binary '{"mode":"pass"}' ||
	die "(e) could not clear the SQS proxy's delay"
t0=$(now_ms)
outboxd_start "$T_DIR/outbox-e.conf" e2
fulfilled_once e 40
say "(e) restart: the given-up orders fulfilled after $(($(now_ms) - t0)) ms (their lease is 20 s)"
