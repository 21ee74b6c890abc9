#!/usr/bin/env bash
# master-crashloop.sh -- a worker that can never start is restarted at
# growing intervals, and the master gives up and exits non-zero instead of
# crash-looping hot:
# (a) one relay (no HTTP worker, no consumer) whose database does not exist
#     (trust authentication: a wrong password would not fail, a missing
#     database does): the waits from each death to the next "started
#     relay 1" grow, each is the announced "respawning relay 1 in N ms"
#     (100 ms doubling, +-25% jitter), the master stays up until the 8th
#     failure in a row, then logs why and exits 1 leaving no worker behind.
# (b) five such relays: the window rule trips first (more than 30 crashes
#     within 60 s), with its own log line, exit 1.
# (c) two masters started one after the other do not draw the same jitter.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries

PGP=$("$T_LIB/free-port")
on_exit "'$T_LIB/pg-down.sh' '$T_DIR/pg' >/dev/null"
add_log "$T_DIR/pg/pg.log"
"$T_LIB/pg-up.sh" "$T_DIR/pg" "$PGP" >/dev/null || die "pg-up.sh failed"
export PGHOST=127.0.0.1 PGPORT=$PGP PGUSER=postgres PGDATABASE=postgres
check_eq "database nosuchdb does not exist" 0 \
	"$(sql "SELECT count(*) FROM pg_database WHERE datname = 'nosuchdb'")"

# conf FILE RELAYS -- relays only, on a database that does not exist; AWS
# points nowhere (the relay dies before it would talk to SQS)
conf() {
	DATABASE_URL=postgresql://postgres@127.0.0.1:$PGP/nosuchdb \
	HTTP_PORT=$("$T_LIB/free-port") SQS_ENDPOINT=http://127.0.0.1:9 \
	QUEUE_URL=http://127.0.0.1:9/000000000000/order-events \
	DDB_ENDPOINT=http://127.0.0.1:9 \
	OB_HTTP_WORKERS=0 OB_RELAY_WORKERS=$2 OB_CONSUMER_WORKERS=0 \
		outbox_conf_write "$1"
}

# run_master NAME CONF SECONDS -- run outboxd until it exits by itself;
# sets RC (124: still running after SECONDS, then killed), ELAPSED (ms),
# LOG, PGID
run_master() {
	local name=$1 conf=$2 secs=$3 pf=$T_DIR/$1.pid pid t0
	LOG=$T_DIR/$name.log
	add_log "$LOG"
	on_exit "proc_stop '$pf' 5"
	t0=$(now_ms)
	proc_start "$pf" "$LOG" "$T_ROOT/outboxd" -c "$conf" || die "could not start outboxd"
	pid=$(proc_pid "$pf")
	PGID=$pid
	gone() { ! proc_alive "$1"; }
	if wait_until "$secs" "outboxd ($name) to give up and exit" gone "$pf"; then
		RC=0
		wait "$pid" 2>/dev/null || RC=$?
	else
		proc_stop "$pf" 2
		RC=124
	fi
	ELAPSED=$(($(now_ms) - t0))
	say "$name: outboxd exited with status $RC after $ELAPSED ms"
}

# log_times LOG REGEX -- the time= of each matching line, as ms since the
# first of them
log_times() {
	grep -E "$2" "$1" | "$PY" -c '
import sys, datetime
ts = []
for line in sys.stdin:
    t = line.split(" ", 1)[0][len("time="):]
    ts.append(datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ"))
print(" ".join(str(round((t - ts[0]).total_seconds() * 1000)) for t in ts))'
}

# ---- (a) one relay: 8 failures in a row -------------------------------------
conf "$T_DIR/one.conf" 1
run_master one "$T_DIR/one.conf" 40
check_eq "(a) outboxd exits by itself, status 1 (124 = still running after 40 s)" 1 "$RC"
check "(a) the master says why it gave up" \
	grep -q 'msg="relay 1 crashed 8 times in a row without staying up 10 s: giving up"' "$LOG"
check_eq "(a) relay 1 started" 8 "$(grep -c 'msg="started relay 1 pid=[0-9]* generation=1"' "$LOG" || true)"
check_eq "(a) relay deaths logged with pid and exit status" 8 \
	"$(grep -c 'level=warn role=master .*msg="relay 1 pid=[0-9]* exited with status 1"' "$LOG" || true)"
check "(a) the relay says why it died (database \"nosuchdb\" does not exist)" \
	grep -q 'role=relay.1 .*cannot connect to PostgreSQL.*nosuchdb' "$LOG"

starts=($(log_times "$LOG" 'msg="started relay 1 pid='))
delays=($(sed -n 's/.*msg="respawning relay 1 in \([0-9]*\) ms".*/\1/p' "$LOG"))
gaps=()
for ((i = 1; i < ${#starts[@]}; i++)); do gaps+=($((starts[i] - starts[i - 1]))); done
say "(a) announced respawn delays (ms): ${delays[*]}"
say "(a) gaps between \"started relay 1\" log times (ms): ${gaps[*]}"
echo "TIMING master-crashloop restart_gaps_ms=$(IFS=,; echo "${gaps[*]}") announced_ms=$(IFS=,; echo "${delays[*]}") give_up_after_ms=$ELAPSED"
check_eq "(a) respawns announced" 7 "${#delays[@]}"
bad=
for ((i = 0; i < ${#delays[@]}; i++)); do
	nominal=$((100 << i))
	lo=$((nominal * 3 / 4))
	hi=$((nominal * 5 / 4))
	[ "${delays[i]}" -ge $lo ] && [ "${delays[i]}" -le $hi ] || bad+="#$((i + 1)): ${delays[i]} not in $lo..$hi; "
done
check_eq "(a) each announced delay is 100 ms doubling, within +-25% jitter" "" "$bad"
# The master's own wait: from each death to the next start.  (Start to
# start also counts how long the relay took to fail, which varies by tens of
# ms on a busy machine, more than two jittered delays may differ.)
waits=($(grep -E 'msg="(started relay 1 pid=|relay 1 pid=[0-9]* exited with status)' "$LOG" | "$PY" -c '
import sys, datetime
died, out = None, []
for line in sys.stdin:
    t = datetime.datetime.strptime(line.split(" ", 1)[0][len("time="):], "%Y-%m-%dT%H:%M:%S.%fZ")
    if "exited with status" in line:
        died = t
    elif died is not None:
        out.append(str(round((t - died).total_seconds() * 1000)))
        died = None
print(" ".join(out))'))
say "(a) waits from each death to the respawn (ms): ${waits[*]}"
check_eq "(a) respawns after a death" 7 "${#waits[@]}"
bad=
for ((i = 1; i < ${#waits[@]}; i++)); do
	[ "${waits[i]}" -gt "${waits[i - 1]}" ] || bad+="wait $((i + 1)) (${waits[i]} ms) <= wait $i (${waits[i - 1]} ms); "
done
check_eq "(a) the waits before a respawn grow" "" "$bad"
bad=
for ((i = 0; i < ${#waits[@]} && i < ${#delays[@]}; i++)); do
	# the log has ms resolution: allow 2 ms of rounding
	[ "${waits[i]}" -ge $((delays[i] - 2)) ] || bad+="wait $((i + 1)) ${waits[i]} ms < announced ${delays[i]} ms; "
done
check_eq "(a) no respawn came before its announced delay" "" "$bad"
check "(a) last gap >= 10x the first (${gaps[0]:-?} -> ${gaps[-1]:-?} ms)" \
	[ "${gaps[-1]:-0}" -ge $((${gaps[0]:-1} * 10)) ]
# the master stayed up through every wait: 100+200+...+6400 = 12.7 s, -25%
check "(a) the master stayed up until the 8th failure ($ELAPSED ms >= 9525 ms)" [ "$ELAPSED" -ge 9525 ]
last_exit=$(grep -n 'msg="relay 1 pid=[0-9]* exited' "$LOG" | tail -1 | cut -d: -f1)
give_up=$(grep -n 'giving up' "$LOG" | head -1 | cut -d: -f1)
check "(a) it gave up right after the 8th death, not before (lines $last_exit, $give_up)" \
	[ -n "$give_up" ] && [ -n "$last_exit" ] && [ "$give_up" -gt "$last_exit" ]
check_eq "(a) no respawn scheduled after the 8th death" 7 \
	"$(grep -c 'msg="respawning relay 1 in' "$LOG" || true)"
check_eq "(a) no outboxd process left in its process group" "" "$(outboxd_group_pids "$PGID" | tr '\n' ' ')"

# ---- (b) five relays: more than 30 crashes within 60 s ----------------------
conf "$T_DIR/five.conf" 5
run_master five "$T_DIR/five.conf" 40
check_eq "(b) outboxd exits by itself, status 1" 1 "$RC"
check "(b) the master says why: 31 worker crashes within 60 s" \
	grep -q 'msg="31 worker crashes within 60 s: giving up"' "$LOG"
check "(b) the per-worker rule did not trip first" \
	bash -c "! grep -q 'times in a row' '$LOG'"
deaths=$(grep -c 'level=warn role=master .*msg="relay [1-5] pid=[0-9]* exited with status 1"' "$LOG" || true)
check_eq "(b) worker deaths logged before giving up" 31 "$deaths"
check "(b) given up within the window ($ELAPSED ms < 60000)" [ "$ELAPSED" -lt 60000 ]
say "(b) gave up after $ELAPSED ms and $deaths crashes of 5 relays"
check_eq "(b) no outboxd process left in its process group" "" "$(outboxd_group_pids "$PGID" | tr '\n' ' ')"

# ---- (c) each master draws its own jitter -----------------------------------
# Two runs of (a)'s set-up, stopped after 3 respawns: with random()'s
# default seed both would announce the very same delays.
three_respawns() { [ "$(grep -c 'msg="respawning relay 1 in' "$1" || true)" -ge 3 ]; }
seqs=()
for run in 1 2; do
	pf=$T_DIR/jitter$run.pid
	LOG=$T_DIR/jitter$run.log
	add_log "$LOG"
	on_exit "proc_stop '$pf' 5"
	proc_start "$pf" "$LOG" "$T_ROOT/outboxd" -c "$T_DIR/one.conf" || die "could not start outboxd"
	wait_until 10 "3 respawns (run $run)" three_respawns "$LOG" || true
	proc_stop "$pf" 10
	seqs+=("$(sed -n 's/.*msg="respawning relay 1 in \([0-9]*\) ms".*/\1/p' "$LOG" | head -3 | paste -sd' ' -)")
done
say "(c) first three respawn delays: run 1: ${seqs[0]}; run 2: ${seqs[1]}"
check "(c) both runs announced 3 delays" [ "$(wc -w <<<"${seqs[0]} ${seqs[1]}")" = 6 ]
check "(c) the two masters drew different jitter (${seqs[0]} / ${seqs[1]})" [ "${seqs[0]}" != "${seqs[1]}" ]
