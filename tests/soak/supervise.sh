#!/usr/bin/env bash
# supervise.sh NETNS CONF DIR -- keep one outboxd master running inside
# network namespace NETNS, as systemd's Restart=always (RestartSec=0.5)
# would: start "outboxd -c CONF" there; whenever the master exits, for
# whatever reason (a kill -9 from the soak, a crash, giving up on a
# crash-looping worker), log it and start it again half a second later.
#   DIR/master.pid   pid of the master running now
#   DIR/outboxd.log  what every master wrote (stdout + stderr), appended
#   DIR/restarts     one line per exit: "EPOCH_MS pid PID exited STATUS"
# Like systemd's default KillMode=control-group, the master runs in a
# process group of its own (its workers inherit it), and when the master
# has exited, whatever is left of the group (workers still finishing, which
# may hold the listening socket) gets SIGTERM, then SIGKILL after 5 s,
# before the next start.  (Without that the next master fails to bind
# while an orphaned HTTP worker drains, and crash-loops until it is gone.)
# SIGTERM (or SIGINT) to the supervisor: one SIGTERM to the master (a
# second would make it stop at once, killing its workers), wait for it
# (outboxd's own shutdown_timeout bounds that), clean its group, exit 0.
set -u
NS=${1:?usage: supervise.sh NETNS CONF DIR}
CONF=${2:?usage: supervise.sh NETNS CONF DIR}
DIR=${3:?usage: supervise.sh NETNS CONF DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
stop=0
m=
on_term() {
	[ $stop = 1 ] && return
	stop=1
	[ -n "$m" ] && kill -TERM "$m" 2>/dev/null
}
group_left() { ps -e -o pgid= | awk -v g="$1" '$1 == g { n++ } END { exit !n }'; }
# clean_group PGID -- SIGTERM what is left of the group, SIGKILL after 5 s
clean_group() {
	local g=$1 i
	group_left "$g" || return 0
	kill -TERM -- "-$g" 2>/dev/null
	for i in $(seq 1 50); do
		group_left "$g" || return 0
		sleep 0.1
	done
	kill -KILL -- "-$g" 2>/dev/null
	sleep 0.1
}
trap on_term TERM INT
: >>"$DIR/restarts"
while [ $stop = 0 ]; do
	# ip netns exec enters the namespace and execs setsid, which execs
	# outboxd (a background job is no group leader: setsid does not fork):
	# $! is the master, and the leader of its own process group
	ip netns exec "$NS" setsid "$ROOT/outboxd" -c "$CONF" >>"$DIR/outboxd.log" 2>&1 &
	m=$!
	echo "$m" >"$DIR/master.pid"
	rc=0
	# wait returns early (>128) when a trapped signal arrives: wait again
	while kill -0 "$m" 2>/dev/null; do
		wait "$m"
		rc=$?
	done
	echo "$(($(date +%s%N) / 1000000)) pid $m exited $rc" >>"$DIR/restarts"
	clean_group "$m"
	m=
	[ $stop = 0 ] && sleep 0.5
done
rm -f "$DIR/master.pid"
exit 0
