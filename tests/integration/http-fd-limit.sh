#!/usr/bin/env bash
# http-fd-limit.sh -- hundreds of idle client connections against HTTP
# workers that run out of file descriptors, or reach http.max_connections:
# accepting pauses instead of failing in a loop.
#
#   1. Under "ulimit -n 64" (a wrapper around outboxd), "outboxd -t" refuses
#      an http.max_connections that does not fit (exit 78, RLIMIT_NOFILE
#      named), and the default (0) takes what the limit leaves: 64 - 32 - 1.
#   2. The HTTP workers' limit is lowered further while they run (prlimit),
#      below what that cap assumes, and 200 idle connections come: accept()
#      fails with EMFILE.  The log stays at a few logfmt lines (no raw
#      libevent "[warn]"), the workers do not spin (CPU), the metric
#      outboxd_http_accept_paused_total{reason="descriptors"} moves, and
#      once the idle connections close an order is answered 201 within
#      about a second.
#   3. http.max_connections = 20 (one HTTP worker): with 20 idle
#      connections open, a request on a 21st is not answered; when one of
#      the 20 closes it is, within about a second; the metric's
#      reason="max_connections" moved.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
command -v prlimit >/dev/null || die "prlimit missing (Debian package util-linux)"
stack_up

NOFILE=64
IDLE=200
# outboxd under a low limit, as a shell with "ulimit -n 64" would start it
cat >"$T_DIR/lowfd.sh" <<EOF
#!/bin/bash
ulimit -n $NOFILE || exit 1
exec "\$@"
EOF
chmod +x "$T_DIR/lowfd.sh"

# conn.py hold PORT N DIR: open N idle connections, write DIR/ready; then
# DIR/close-one closes one of them (DIR/closed-one), DIR/close-all closes
# every one and exits.  At most 60 s.
# conn.py probe PORT WAIT: one GET /healthz on a new connection; prints
# "STATUS EPOCH_MS" when it is answered, "none" after WAIT s.
cat >"$T_DIR/conn.py" <<'EOF'
import os, socket, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
if mode == "hold":
    n, d = int(sys.argv[3]), sys.argv[4]
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        socks.append(s)
    with open(d + "/ready.tmp", "w") as f:
        f.write("%d\n" % len(socks))
    os.rename(d + "/ready.tmp", d + "/ready")
    end = time.time() + 60
    while time.time() < end:
        if os.path.exists(d + "/close-all"):
            break
        if os.path.exists(d + "/close-one"):
            os.unlink(d + "/close-one")
            socks.pop().close()
            open(d + "/closed-one", "w").close()
        time.sleep(0.02)
    for s in socks:
        s.close()
else:
    wait = float(sys.argv[3])
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: outboxd\r\n\r\n")
    s.settimeout(wait)
    try:
        head = s.recv(64).decode("latin-1")
        print("%s %d" % (head.split(" ")[1] if head else "eof",
            int(time.time() * 1000)))
    except socket.timeout:
        print("none")
EOF

# hold_start NAME N -- N idle connections held by conn.py in $T_DIR/NAME
hold_start() {
	local d=$T_DIR/$1
	mkdir -p "$d"
	on_exit "touch '$d/close-all'; proc_stop '$T_DIR/$1.pid' 5"
	proc_start "$T_DIR/$1.pid" "$T_DIR/$1.log" "$PY" "$T_DIR/conn.py" hold "$HTTP_PORT" "$2" "$d" ||
		die "could not start the connection holder"
	wait_until 20 "$2 connections to be open" test -s "$d/ready" || die "the connections did not open"
	say "$(cat "$d/ready") idle connections open"
}
hold_stop() {
	touch "$T_DIR/$1/close-all"
	wait_until 10 "the holder to close its connections" eval "! proc_alive '$T_DIR/$1.pid'" || true
}

# cpu_ticks PID -- utime + stime of PID, in clock ticks
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
accept_lines() { grep -cE 'accept|descriptor|Too many open files|max_connections' "$OUTBOXD_LOG" || true; }

# ---- 1. the limit at start -------------------------------------------------
OB_HTTP_WORKERS=2 OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=0 outbox_conf_write "$T_DIR/outbox.conf"
sed 's/^http {/http {\n\tmax_connections = 1000/' "$T_DIR/outbox.conf" >"$T_DIR/big.conf"
rc=0
"$T_DIR/lowfd.sh" "$T_ROOT/outboxd" -t -c "$T_DIR/big.conf" >"$T_DIR/big.out" 2>&1 || rc=$?
check_eq "outboxd -t under ulimit -n $NOFILE with http.max_connections = 1000: exit status" 78 "$rc"
check "  ... naming the limit: $(head -c 300 "$T_DIR/big.out")" grep -q 'max_connections = 1000 needs .*RLIMIT_NOFILE) is 64' "$T_DIR/big.out"

OUTBOXD_WRAP=$T_DIR/lowfd.sh outboxd_start "$T_DIR/outbox.conf"
auto=$((NOFILE - 32 - 1))
check "the default cap under ulimit -n $NOFILE is $auto per HTTP worker" \
	grep -q "role=http.1 .*at most $auto client connections" "$OUTBOXD_LOG"

# ---- 2. descriptors run out ------------------------------------------------
H1=$(master_child "http 1")
H2=$(master_child "http 2")
[ -n "$H1" ] && [ -n "$H2" ] || die "no HTTP workers found"
for p in $H1 $H2; do
	used=$(ls "/proc/$p/fd" | wc -l)
	# a soft limit a few descriptors above what the worker holds now,
	# far below what its cap of $auto assumes
	prlimit --pid "$p" --nofile=$((used + 6)):$NOFILE || die "prlimit on $p failed"
	say "http worker $p: $used descriptors open, soft limit now $((used + 6))"
done
scrape "$T_DIR/m0" || die "first scrape failed"
lines0=$(accept_lines)
bytes0=$(wc -c <"$OUTBOXD_LOG")
t1=$(cpu_ticks "$H1")
t2=$(cpu_ticks "$H2")
hold_start idle $IDLE
sleep 3
t1=$(($(cpu_ticks "$H1") - t1))
t2=$(($(cpu_ticks "$H2") - t2))
hz=$(getconf CLK_TCK)
lines=$(($(accept_lines) - lines0))
bytes=$(($(wc -c <"$OUTBOXD_LOG") - bytes0))
say "with $IDLE idle connections and no descriptors left for 3 s: $lines log lines about accepting, $bytes bytes of log; CPU ticks $t1 and $t2 (of $((3 * hz)))"
check "the log stays small while descriptors are out ($lines lines about accepting <= 4, $bytes bytes)" \
	[ "$lines" -ge 1 -a "$lines" -le 4 -a "$bytes" -lt 4096 ]
check "the workers do not spin on accept() (CPU $t1 and $t2 ticks < 20% of $((3 * hz)))" \
	[ $((t1 * 5)) -lt $((3 * hz)) -a $((t2 * 5)) -lt $((3 * hz)) ]
{ grep -E 'cannot accept a connection' "$OUTBOXD_LOG" || true; } | head -2 | sed 's/^/    /'
check "the line is logfmt from the worker" \
	grep -qE '^time=[^ ]+ level=warn role=http\.[12] pid=[0-9]+ msg="cannot accept a connection: Too many open files' "$OUTBOXD_LOG"

hold_stop idle
t0=$(now_ms)
served=000
while [ $(($(now_ms) - t0)) -lt 5000 ]; do
	post_order fd-after 1
	served=$HTTP_STATUS
	[ "$served" = 201 ] && break
	sleep 0.05
done
took=$(($(now_ms) - t0))
say "after the idle connections closed: POST /orders $served after $took ms"
check_eq "POST /orders once the idle connections are gone" 201 "$served"
check "  ... answered within about a second ($took ms <= 1500)" [ "$took" -le 1500 ]
scrape "$T_DIR/m1" || fail "scrape after the recovery"
n=$(delta "$T_DIR/m0" "$T_DIR/m1" 'outboxd_http_accept_paused_total{reason="descriptors"}')
check "outboxd_http_accept_paused_total{reason=\"descriptors\"} moved ($n)" [ "$n" -ge 1 ]
check "the exposition passes promtool" eval 'command -v promtool >/dev/null || exit 0; promtool_ok "$T_DIR/m1"'
check_eq "raw libevent lines ([warn], [err]) in the log" 0 "$(grep -cE '^\[(warn|err|msg)\]' "$OUTBOXD_LOG" || true)"
outboxd_stop

# ---- 3. http.max_connections -----------------------------------------------
CAP=20
OB_HTTP_WORKERS=1 OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=0 outbox_conf_write "$T_DIR/cap.conf"
sed -i "s/^http {/http {\n\tmax_connections = $CAP/" "$T_DIR/cap.conf"
OUTBOXD_WRAP=$T_DIR/lowfd.sh outboxd_start "$T_DIR/cap.conf" cap
scrape "$T_DIR/m2" || die "scrape failed"
lines0=$(accept_lines)
hold_start capped $CAP
sleep 0.5
"$PY" "$T_DIR/conn.py" probe "$HTTP_PORT" 8 >"$T_DIR/probe.out" &
probe=$!
sleep 1.5
check_eq "a request on connection $((CAP + 1)) waits while $CAP are open" "" "$(cat "$T_DIR/probe.out")"
t0=$(now_ms)
touch "$T_DIR/capped/close-one"
wait "$probe" || true
read -r st at <"$T_DIR/probe.out" || true
say "connection $((CAP + 1)): ${st:-?} at $((${at:-0} - t0)) ms after one of the $CAP closed"
check_eq "  ... and is answered once one of them closes" 200 "${st:-none}"
check "  ... within about a second ($((${at:-99999} - t0)) ms, 0 to 1000)" [ $((${at:-99999} - t0)) -ge 0 -a $((${at:-99999} - t0)) -le 1000 ]
hold_stop capped
scrape "$T_DIR/m3" || fail "scrape after the cap"
n=$(delta "$T_DIR/m2" "$T_DIR/m3" 'outboxd_http_accept_paused_total{reason="max_connections"}')
check "outboxd_http_accept_paused_total{reason=\"max_connections\"} moved ($n)" [ "$n" -ge 1 ]
lines=$(($(accept_lines) - lines0))
check "the cap is logged, rate-limited ($lines lines)" [ "$lines" -ge 1 -a "$lines" -le 2 ]
check_eq "raw libevent lines in the log" 0 "$(grep -cE '^\[(warn|err|msg)\]' "$OUTBOXD_LOG" || true)"
