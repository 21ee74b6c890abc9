#!/usr/bin/env bash
# master-reload.sh -- SIGHUP, while load generators send orders (one with a
# new connection per request, one reusing keep-alive connections):
# (a) a file with an unterminated string, then one whose first line is only
#     "###" plus an unknown option further down: the master logs
#     "reload failed" with FILE:LINE (the right line) and exactly what
#     `outboxd -t` prints for that file, keeps its workers, and POST /orders
#     still answers 201;
# (b) relay.workers 2 -> 4, then relay.workers 4 -> 1 with http.workers
#     2 -> 3: a new generation each time, the old one drained (exit 0); no
#     connection refused, no request failed, every order fulfilled, and the
#     children are what the file says (counted by title), and no order
#     waited for the queue's visibility timeout (a retired consumer lets its
#     long poll end);
# (c) a new master sent 20 SIGHUPs in a tight loop as soon as it has
#     blocked its signals (still starting up), and 20 more once serving:
#     it survives, ends with exactly one generation of workers (every child
#     started by the last "reload done" generation), no <defunct> child, no
#     request failed; SIGHUPs that come before the running generation is a
#     second old are held and served by one reload then (outboxd(8));
# (d) an HTTP worker of a retired generation still draining a request (its
#     INSERT waits for a table lock) is not cut short by the next reload or
#     by SIGTERM (a second SIGTERM means "stop now" to a worker): the
#     request gets its 201;
# (e) a SIGHUP, 10 ms later a SIGUSR1 (log reopen, passed on to every
#     worker), 40 ms later a SIGTERM, to the master, then to the whole
#     group, three times each: the new generation's workers take the log
#     reopen and the stop though they come before they handle signals (they
#     block them from the fork on; SIGUSR1 killed them, and the master's
#     SIGUSR2 was lost, 2 of 3 times, and the worker ran until
#     shutdown_timeout killed it), and every worker exits 0.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/load.sh"
test_init
need_binaries
stack_up

CONF=$T_DIR/outbox.conf
OB_HTTP_WORKERS=2 OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=2 \
	outbox_conf_write "$T_DIR/good.conf"
cp "$T_DIR/good.conf" "$CONF"
outboxd_start "$CONF"
M=$(proc_pid "$OUTBOXD_PIDFILE")
wait_counts "$M" 10 2 2 1 || die "workers did not all start: $(counts_now "$M")"

load_start fresh --threads 4 --rate 60
load_start keep --threads 2 --rate 30 --keepalive
load_wait_created fresh 20 20 || die "no orders flowing"

# put_conf FILE -- make FILE the running configuration file (by rename)
put_conf() { cp "$1" "$CONF.tmp" && mv "$CONF.tmp" "$CONF"; }

# log_count REGEX -- matching lines in the outboxd log so far
log_count() { grep -c -E "$1" "$OUTBOXD_LOG" || true; }

# ---- (a) invalid files --------------------------------------------------------
# bad_reload NAME LINE -- $CONF now holds a file with a mistake on LINE
bad_reload() {
	local name=$1 line=$2 out rc=0 esc before pids_before n
	out=$("$T_ROOT/outboxd" -t -c "$CONF" 2>&1) || rc=$?
	check_eq "(a) $name: outboxd -t exit status" 78 "$rc"
	check "(a) $name: outboxd -t says $CONF:$line: (got: $out)" grep -qF "$CONF:$line: " <<<"$out"
	pids_before=$(children "$M" | awk '{ print $1 }' | sort | paste -sd' ' -)
	before=$(log_count 'msg="reload failed')
	kill -HUP "$M"
	_failed_logged() { [ "$(log_count 'msg="reload failed')" -gt "$before" ]; }
	wait_until 5 "the reload failure in the log" _failed_logged || true
	# the log line is logfmt: the message quoted, '"' and '\' escaped
	esc=${out#outboxd: }
	esc=${esc//\\/\\\\}
	esc=${esc//\"/\\\"}
	check "(a) $name: the master logs the same error as -t" \
		grep -qF "level=error role=master pid=$M msg=\"reload failed, keeping the running configuration: $esc\"" "$OUTBOXD_LOG"
	grep -F 'msg="reload failed' "$OUTBOXD_LOG" | tail -1 | sed 's/^/    /'
	sleep 0.5
	check_eq "(a) $name: same workers as before (pids)" "$pids_before" \
		"$(children "$M" | awk '{ print $1 }' | sort | paste -sd' ' -)"
	check_eq "(a) $name: no new generation started" 0 "$(log_count 'generation=[2-9]')"
	n=0
	for i in 1 2 3; do
		post_order "after-bad-$name-$i" 100
		[ "$HTTP_STATUS" = 201 ] && n=$((n + 1))
	done
	check_eq "(a) $name: POST /orders after the failed reload: 201s" 3 "$n"
	check "(a) $name: the master is still running" proc_alive "$OUTBOXD_PIDFILE"
}

line=$(grep -n '^[[:space:]]*region = "us-east-1"' "$T_DIR/good.conf" | cut -d: -f1)
sed "${line}s/\"us-east-1\"/\"us-east-1/" "$T_DIR/good.conf" >"$T_DIR/bad-unterminated.conf"
put_conf "$T_DIR/bad-unterminated.conf"
bad_reload unterminated-string "$line"

{ echo '###'; cat "$T_DIR/good.conf"; } >"$T_DIR/bad-hashes.conf"
line=$(grep -n '^[[:space:]]*poll_interval = ' "$T_DIR/bad-hashes.conf" | cut -d: -f1)
sed -i "${line}s/poll_interval/poll_intervall/" "$T_DIR/bad-hashes.conf"
put_conf "$T_DIR/bad-hashes.conf"
bad_reload hashes-first-line "$line"
put_conf "$T_DIR/good.conf"

# ---- (b) worker counts up and down under load -----------------------------------
# reload_to GEN H R C -- SIGHUP with $CONF as it is now; wait for generation
# GEN to be the only one, with H http, R relay, C consumer children
reload_to() {
	local gen=$1 t0 t_done t_all olds pid
	shift
	olds=$(children "$M" | awk '{ print $1 }')
	t0=$(now_ms)
	kill -HUP "$M"
	_done() { grep -q "msg=\"reload done: generation $1\"" "$OUTBOXD_LOG"; }
	if wait_until 10 "reload done: generation $gen" _done "$gen"; then
		t_done=$(($(now_ms) - t0))
	else
		fail "(b) no 'reload done: generation $gen' in the log"
		return
	fi
	if wait_counts "$M" 15 "$@"; then
		t_all=$(($(now_ms) - t0))
		pass "(b) generation $gen: $(counts_now "$M") ($1 http, $2 relay, $3 consumer configured)"
	else
		fail "(b) generation $gen: children $(counts_now "$M"), configured $1 http, $2 relay, $3 consumer"
		return
	fi
	local notnew=0 notzero=0
	for pid in $(children "$M" | awk '{ print $1 }'); do
		grep -q "msg=\"started [a-z]* [0-9]* pid=$pid generation=$gen\"" "$OUTBOXD_LOG" || notnew=$((notnew + 1))
	done
	check_eq "(b) generation $gen: children not started by this generation" 0 "$notnew"
	for pid in $olds; do
		grep -q "msg=\"[a-z]* [0-9]* pid=$pid exited with status 0\"" "$OUTBOXD_LOG" || notzero=$((notzero + 1))
	done
	check_eq "(b) generation $gen: old workers that did not exit 0 (drained)" 0 "$notzero"
	say "(b) generation $gen: SIGHUP -> 'reload done' seen within $t_done ms, old generation gone after $t_all ms (poll step 200 ms)"
	RELOAD_TIMES+="gen$gen:${t_done}/${t_all}ms "
	load_wait_created fresh 30 20 || fail "(b) orders stopped flowing after generation $gen"
}
RELOAD_TIMES=

conf_set "$CONF" relay workers 4
reload_to 2 2 4 1
conf_set "$CONF" relay workers 1
conf_set "$CONF" http workers 3
reload_to 3 3 1 1
check_eq "(b) http worker titles" "outboxd: http 1,outboxd: http 2,outboxd: http 3" \
	"$(children "$M" | awk '$4 == "http" { print $3, $4, $5 }' | sort | paste -sd, -)"
echo "TIMING master-reload reloads(sighup->done/old_gone)=$RELOAD_TIMES"

load_stop fresh
load_stop keep
check_eq "(a+b) new-connection load: connections refused" 0 "$(load_stat fresh .refused)"
check_eq "(a+b) new-connection load: requests failed" 0 "$(load_stat fresh .failed)"
check_eq "(a+b) keep-alive load: requests failed" 0 "$(load_stat keep .failed)"
say "(a+b) keep-alive requests that found their idle connection closed by a draining worker and were sent again: $(load_stat keep .stale)"
if [ "$(load_stat fresh .failed)$(load_stat keep .failed)" != 00 ]; then
	cat "$T_DIR/fresh.fail" "$T_DIR/keep.fail" | head -5
	say "(a+b) of the failed requests, stored as orders anyway: $(cat <(load_failed_stored fresh) <(load_failed_stored keep) | wc -l)"
	grep -E 'msg="(reloading|stopping: [0-9]+ requests in progress)' "$OUTBOXD_LOG" | sed 's/^/    /'
fi
cat "$T_DIR/fresh.ids" "$T_DIR/keep.ids" >"$T_DIR/ab.ids"
wait_fulfilled "$T_DIR/ab.ids" 60 || true
wait_outbox_sent 40 || true
check_orders_stored "$T_DIR/ab.ids" "(a+b)"
check_fulfilled_once "$T_DIR/ab.ids" "(a+b)"
# A consumer the reload retires lets its long poll end: one it abandoned
# could take a message, which SQS would show again only after the queue's
# visibility timeout (10 s), a delay a reload must not cause.
sent=$(sql "SELECT json_object_agg(payload->>'orderId', extract(epoch FROM sent_at)) FROM outbox WHERE status = 'sent'")
slowest=$(ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" | jq --argjson s "$sent" \
	'[.[] | select($s[.orderId.S] != null) | (.createdAt.S | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601) - $s[.orderId.S]] | max | floor')
say "(a+b) slowest outbox sent_at -> fulfillment item: ${slowest:-?} s (1 s resolution)"
check "(a+b) no order waited for a visibility timeout across the reloads (${slowest:-?} s < 8 s)" \
	[ "${slowest:-99}" -lt 8 ]

# ---- (c) 20 SIGHUPs in a tight loop -------------------------------------------
kill -TERM "$M"
wait_until 15 "outboxd to exit" outboxd_gone || die "outboxd did not stop after SIGTERM"
wait "$M" 2>/dev/null || true

# "Right after start", deterministically: log_file is a FIFO nobody reads
# yet, so the new master stops in start-up at opening it, after main() has
# blocked its signals and long before the master loop exists.  The 20
# SIGHUPs must wait there, pending; then a reader opens the FIFO and the
# start-up goes on.
mkfifo "$T_DIR/storm.fifo"
OB_HTTP_WORKERS=2 OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=1 OB_WAIT_TIME=2 \
OB_EXTRA_TOP="log_file = \"$T_DIR/storm.fifo\"" \
	outbox_conf_write "$T_DIR/storm.conf"
OUTBOXD_PIDFILE=$T_DIR/storm.pid
OUTBOXD_LOG=$T_DIR/storm.log
add_log "$T_DIR/storm.stderr"
add_log "$OUTBOXD_LOG"
on_exit "outboxd_stop '$OUTBOXD_PIDFILE'"
proc_start "$OUTBOXD_PIDFILE" "$T_DIR/storm.stderr" "$T_ROOT/outboxd" -c "$T_DIR/storm.conf" ||
	die "could not start outboxd"
M=$(proc_pid "$OUTBOXD_PIDFILE")
# status_bit FIELD -- bit 0 (SIGHUP) of a signal mask in /proc/$M/status
status_bit() { (( 0x$(awk -v f="$1:" '$1 == f { print $2 }' "/proc/$M/status" 2>/dev/null || echo 0) & 1 )); }
check "(c) the new master has blocked SIGHUP while it starts" \
	wait_until 5 "SigBlk to have SIGHUP" status_bit SigBlk
for i in $(seq 1 20); do kill -HUP "$M" 2>/dev/null || break; done
say "(c) 20 SIGHUPs sent during start-up"
sleep 0.2
check "(c) the SIGHUPs wait, pending, while it starts (ShdPnd has SIGHUP)" status_bit ShdPnd
check "(c) still starting: no worker yet" [ "$(children "$M" | wc -l)" = 0 ]
check "(c) the master is alive after 20 SIGHUPs during start-up" proc_alive "$OUTBOXD_PIDFILE"
on_exit "proc_stop '$T_DIR/storm-reader.pid' 2"
proc_start "$T_DIR/storm-reader.pid" "$OUTBOXD_LOG" cat "$T_DIR/storm.fifo" ||
	die "could not start the log reader"
wait_healthz || die "outboxd did not become healthy after the SIGHUPs"
_gen2() { grep -q 'msg="reload done: generation 2"' "$OUTBOXD_LOG"; }
check "(c) the SIGHUPs of the start-up were not lost: a reload ran once the loop did (generation 2)" \
	wait_until 10 "reload done: generation 2" _gen2
load_start storm --threads 4 --rate 60
load_wait_created storm 20 20 || die "no orders flowing"
for i in $(seq 1 20); do kill -HUP "$M" 2>/dev/null || break; done
say "(c) 20 more SIGHUPs sent while serving"
sleep 1
_settled() {
	local gen
	gen=$(sed -n 's/.*msg="reload done: generation \([0-9]*\)".*/\1/p' "$OUTBOXD_LOG" | tail -1)
	[ -n "$gen" ] && _counts_are "$M" 2 2 1 &&
	[ "$(children "$M" | awk '{ print $1 }' | while read -r p; do
		grep -q "msg=\"started [a-z]* [0-9]* pid=$p generation=$gen\"" "$OUTBOXD_LOG" || echo "$p"
	done | wc -l)" = 0 ]
}
t0=$(now_ms)
check "(c) settles to one generation: 2 http, 2 relay, 1 consumer, all of the last generation" \
	wait_until 30 "one generation of workers" _settled
say "(c) settled $(($(now_ms) - t0)) ms after the last SIGHUP: $(counts_now "$M")"
check "(c) the master survived" proc_alive "$OUTBOXD_PIDFILE"
last=$(sed -n 's/.*msg="reload done: generation \([0-9]*\)".*/\1/p' "$OUTBOXD_LOG" | tail -1)
reloads=$(log_count 'msg="reload done')
say "(c) reloads done: $reloads for 40 SIGHUPs (signals that arrive together coalesce); last generation $last"
echo "TIMING master-reload storm_reloads=$reloads last_generation=$last"
check "(c) at least one reload per burst ($reloads)" [ "$reloads" -ge 2 ]
check_eq "(c) the last generation is the number of reloads + 1" $((reloads + 1)) "$last"
check_eq "(c) no <defunct> child" "" "$(zombies "$M")"
check "(c) SIGHUPs held while the generation was younger than 1 s (log: reload held)" \
	grep -q 'msg="reload held [0-9]* ms: generation' "$OUTBOXD_LOG"
# each generation ran at least a second, until the "reloading" that replaced
# it, from the "reloading" that made it (logged just before the master reads
# the clock it holds SIGHUPs by: forking the first worker took 74 ms in a
# sanitizer build on a busy machine); the first generation from its first
# worker's start (50 ms allowed for that fork)
gaps=$(grep -E 'msg="(started [a-z]+ [0-9]+ pid=[0-9]+ generation=[0-9]+|reloading .*|reload done: generation [0-9]+)"' "$OUTBOXD_LOG" | "$PY" -c '
import re, sys, datetime
start, reloads, last = {}, [], None
for l in sys.stdin:
    t = datetime.datetime.strptime(l.split(" ", 1)[0][5:], "%Y-%m-%dT%H:%M:%S.%fZ")
    m = re.search(r"generation[= ]([0-9]+)", l)
    if "reload done" in l:
        start[int(m.group(1))] = last
    elif m:
        start.setdefault(int(m.group(1)), t)
    else:
        reloads.append(t)
        last = t
print(" ".join(str(round((r - start[g]).total_seconds() * 1000)) if g in start else "?"
               for g, r in enumerate(reloads, 1)))')
say "(c) ms each generation ran before the reload that replaced it: $gaps"
short=$(for g in $gaps; do [ "$g" != "?" ] && [ "$g" -ge 950 ] || echo "$g"; done | wc -l)
check_eq "(c) generations replaced before they ran 1 s" 0 "$short"
check_eq "(c) no worker crashed (warn/error from the master)" 0 \
	"$(grep -E 'level=(warn|error) role=master' "$OUTBOXD_LOG" | grep -vc 'database unreachable at start-up' || true)"
post_order after-storm 4242
check_eq "(c) POST /orders after the storm" 201 "$HTTP_STATUS"
load_stop storm
check_eq "(c) load during the storm: connections refused" 0 "$(load_stat storm .refused)"
check_eq "(c) load during the storm: requests failed" 0 "$(load_stat storm .failed)"
[ "$(load_stat storm .failed)" = 0 ] || head -5 "$T_DIR/storm.fail"
wait_fulfilled "$T_DIR/storm.ids" 60 || true
wait_outbox_sent 40 || true
check_fulfilled_once "$T_DIR/storm.ids" "(c)"

# ---- (d) a draining worker is let finish ------------------------------------
# An HTTP worker holds a POST /orders whose INSERT waits for a lock on the
# orders table; a reload retires it (it drains), a second reload and then
# a graceful stop follow while it still waits.  Neither may send it a
# second SIGTERM ("stop now" to a worker): the request gets its 201 once
# the lock goes, and the master exits 0 after that.
on_exit "proc_stop '$T_DIR/locker.pid' 2"
proc_start "$T_DIR/locker.pid" "$T_DIR/locker.log" psql -X -q -c \
	"BEGIN; LOCK TABLE orders IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(4); COMMIT;" ||
	die "could not lock the orders table"
locked() { [ "$(sql "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'orders' AND l.mode = 'AccessExclusiveLock' AND l.granted")" = 1 ]; }
wait_until 5 "the orders table locked" locked || die "the orders table did not get locked"
t_lock=$(now_ms)
curl -sS -o "$T_DIR/drain.body" -w '%{http_code}' --max-time 20 -H 'Content-Type: application/json' \
	--data-binary '{"customerId":"drain-1","amountCents":1}' "$OUTBOXD_URL/orders" \
	>"$T_DIR/drain.code" 2>"$T_DIR/drain.err" &
CURL=$!
waiting() { [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT%'")" -ge 1 ]; }
check "(d) an HTTP worker holds a POST /orders (its INSERT waits for the lock)" \
	wait_until 5 "an INSERT waiting for the lock" waiting
gen=$(sed -n 's/.*msg="reload done: generation \([0-9]*\)".*/\1/p' "$OUTBOXD_LOG" | tail -1)
kill -HUP "$M"
_gen() { grep -q "msg=\"reload done: generation $1\"" "$OUTBOXD_LOG"; }
wait_until 5 "reload done: generation $((gen + 1))" _gen $((gen + 1)) || fail "(d) first reload did not happen"
sleep 1.05	# past the hold: this reload runs at once too
kill -HUP "$M"
wait_until 5 "reload done: generation $((gen + 2))" _gen $((gen + 2)) || fail "(d) second reload did not happen"
check "(d) the request is still held when SIGTERM comes (the http statement_timeout is 5 s)" waiting
kill -TERM "$M"
t_term=$(now_ms)
wait_until 15 "outboxd to exit" outboxd_gone || true
t_exit=$(now_ms)
rc=0
if outboxd_gone; then wait "$M" 2>/dev/null || rc=$?; else rc=running; fi
wait "$CURL" 2>/dev/null || true
say "(d) lock held from +0 to ~+4000 ms; SIGTERM at +$((t_term - t_lock)) ms, master gone at +$((t_exit - t_lock)) ms; the request got HTTP $(cat "$T_DIR/drain.code") $(head -c 100 "$T_DIR/drain.err")"
check_eq "(d) the request held across two reloads and a graceful stop got" 201 "$(cat "$T_DIR/drain.code")"
check_eq "(d) no worker got a second SIGTERM (log: second stop signal)" 0 \
	"$(grep -c 'second stop signal' "$OUTBOXD_LOG" || true)"
check_eq "(d) exit status after SIGTERM" 0 "$rc"
check "(d) the master waited for that request (gone after the lock went)" [ $((t_exit - t_lock)) -ge 3300 ]
check_eq "(d) its order is stored" 1 "$(sql "SELECT count(*) FROM orders WHERE customer_id = 'drain-1'")"

say "(e) SIGHUP, SIGUSR1, SIGTERM within 50 ms"
n=0
for to in master master master group group group; do
	n=$((n + 1))
	outboxd_start "$T_DIR/good.conf" "e-$n"
	M=$(proc_pid "$OUTBOXD_PIDFILE")
	sleep 1
	kill -HUP "$M"
	sleep 0.01
	kill -USR1 "$M"
	sleep 0.04
	t0=$(now_ms)
	if [ "$to" = group ]; then kill -TERM -- "-$M"; else kill -TERM "$M"; fi
	wait_until 10 "outboxd to exit" outboxd_gone || true
	took=$(($(now_ms) - t0))
	check "(e) SIGTERM to the $to after SIGHUP: gone in $took ms, before shutdown_timeout (5000)" \
		[ "$took" -lt 4000 ]
	check_eq "(e) SIGTERM to the $to after SIGHUP: workers killed" 0 \
		"$(grep -c 'killed by signal\|shutdown_timeout reached' "$OUTBOXD_LOG" || true)"
	outboxd_stop
done
