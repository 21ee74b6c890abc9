# proc.sh -- start and stop background processes by pid file (sourced).
#
# proc_start PIDFILE LOG CMD [ARG...]
#	Run CMD in the background in a session and process group of its own
#	(setsid), stdin from /dev/null, stdout+stderr to LOG.  PIDFILE gets
#	"PID STARTTIME" (STARTTIME from /proc/PID/stat), so that a stop never
#	signals an unrelated process that later got the same pid.
# proc_alive PIDFILE	true while that very process runs.
# proc_stop PIDFILE [SECONDS]
#	SIGTERM to the process group, wait up to SECONDS (default 10), then
#	SIGKILL to the group; removes PIDFILE.  Missing PIDFILE: nothing to do.
# Every process started here carries OUTBOXD_TEST_TAG in its environment
# (when the caller exported it), which tests/run-all.sh uses to find
# anything left running.

proc_starttime() {
	# field 22 of /proc/PID/stat; the comm field (2) may hold spaces
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	set -- $stat
	echo "${20}"
}

proc_start() {
	local pidfile=$1 log=$2
	shift 2
	rm -f "$pidfile"
	setsid bash -c 'echo $$ >"$0.tmp"; exec "$@"' "$pidfile" "$@" \
		</dev/null >>"$log" 2>&1 &
	local i pid=
	for i in $(seq 1 100); do
		[ -s "$pidfile.tmp" ] && { pid=$(cat "$pidfile.tmp"); break; }
		sleep 0.02
	done
	rm -f "$pidfile.tmp"
	[ -n "$pid" ] || { echo "proc_start: could not start $*" >&2; return 1; }
	# the exec has happened once comm changed, but the starttime is the
	# same before and after exec, so read it right away
	local st
	st=$(proc_starttime "$pid") || { echo "proc_start: $1 exited at once (see $log)" >&2; return 1; }
	echo "$pid $st" >"$pidfile"
}

proc_alive() {
	local pid st cur
	[ -f "$1" ] || return 1
	read -r pid st <"$1" || return 1
	cur=$(proc_starttime "$pid") || return 1
	[ "$cur" = "$st" ] || return 1
	# a zombie (exited, not yet reaped by its parent) is not alive
	! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

proc_pid() {
	local pid st
	read -r pid st <"$1" && echo "$pid"
}

proc_stop() {
	local pidfile=$1 secs=${2:-10} pid st i
	[ -f "$pidfile" ] || return 0
	read -r pid st <"$pidfile" || { rm -f "$pidfile"; return 0; }
	if proc_alive "$pidfile"; then
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 $((secs * 10))); do
			proc_alive "$pidfile" || break
			sleep 0.1
		done
		if proc_alive "$pidfile"; then
			echo "proc_stop: pid $pid still running after ${secs}s, sending SIGKILL" >&2
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
			sleep 0.2
		fi
	fi
	# the leader is gone; anything else left in its process group goes too
	kill -KILL -- "-$pid" 2>/dev/null || true
	rm -f "$pidfile"
}
