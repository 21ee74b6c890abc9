# common.sh -- shared by every tests/integration/*.sh scenario (sourced).
#
# A scenario is a bash script that sources this file, calls test_init,
# brings up what it needs (stack_up, outboxd_start, proxy_start), checks
# outcomes with check/check_eq, and ends; the EXIT trap stops everything it
# started (in reverse order), prints the logs when something failed, and
# prints "SUMMARY <name> passed=N failed=M" (read by tests/run-all.sh).
# The exit status is 0 only when every check passed and nothing died.
#
# Environment:
#   OUTBOXD_TEST_KEEP=1   keep the scenario's directory (logs, stack state)
#   OUTBOXD_TEST_TAG      marker put into the environment of everything
#                         started (tests/run-all.sh looks for leftovers)

set -Eeuo pipefail

T_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T_ROOT=$(cd "$T_LIB/../.." && pwd)
. "$T_LIB/proc.sh"
. "$T_LIB/aws.sh"
. "$T_LIB/conf.sh"

T_NAME=$(basename "$0" .sh)
T_PASS=0
T_FAIL=0
T_DIR=
T_CLEANUP=()
T_LOGS=()
PY=/usr/bin/python3
export OUTBOXD_TEST_TAG=${OUTBOXD_TEST_TAG:-adhoc-$$}

# Tests are hermetic: the daemon must not pick up the caller's AWS setup.
unset AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL AWS_ENDPOINT_URL_SQS \
	AWS_ENDPOINT_URL_DYNAMODB AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY \
	AWS_SESSION_TOKEN AWS_PROFILE AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE

say() { printf '%s [%s] %s\n' "$(date +%H:%M:%S)" "$T_NAME" "$*"; }

pass() { T_PASS=$((T_PASS + 1)); printf 'PASS %s\n' "$*"; }
fail() { T_FAIL=$((T_FAIL + 1)); printf 'FAIL %s\n' "$*"; }

# check DESCRIPTION CMD [ARG...] -- PASS when CMD succeeds
check() {
	local d=$1
	shift
	if "$@"; then pass "$d"; else fail "$d"; fi
}

# check_eq DESCRIPTION EXPECTED GOT
check_eq() {
	if [ "$2" == "$3" ]; then
		pass "$1 (= $3)"
	else
		fail "$1: expected '$2', got '$3'"
	fi
}

# die MESSAGE -- a set-up step failed: counts as a failure, ends the scenario
die() {
	T_FAIL=$((T_FAIL + 1))
	printf 'FAIL %s (fatal, scenario stopped)\n' "$*"
	exit 1
}

on_exit() { T_CLEANUP+=("$*"); }
add_log() { T_LOGS+=("$1"); }

_t_err() {
	local rc=$? line=${BASH_LINENO[0]} cmd=$BASH_COMMAND
	[ "$BASH_SUBSHELL" = 0 ] || return $rc
	printf 'FAIL command failed (exit %s) at %s line %s: %s\n' "$rc" "$0" "$line" "$cmd"
	T_FAIL=$((T_FAIL + 1))
}

_t_exit() {
	local rc=$? i f
	trap - ERR
	set +e
	if [ $rc != 0 ] && [ $T_FAIL = 0 ]; then
		printf 'FAIL scenario exited with status %s\n' "$rc"
		T_FAIL=1
	fi
	for ((i = ${#T_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${T_CLEANUP[$i]}" || printf 'WARN cleanup step failed: %s\n' "${T_CLEANUP[$i]}"
	done
	# Under tests/run-all.sh's sanitizer pass (which exports both
	# variables): a report in any log of the scenario (outboxd's workers
	# write theirs to its log) fails it, even when the checks passed (a
	# worker the master restarted, say).
	if [ "${OUTBOXD_SANITIZERS:-0}" = 1 ] && [ -n "$T_DIR" ] && [ -d "$T_DIR" ]; then
		local hits
		hits=$(grep -rlE "${SAN_REPORT_RE:?set by tests/run-all.sh}" "$T_DIR" 2>/dev/null | head -5)
		if [ -n "$hits" ]; then
			printf 'FAIL sanitizer report in %s\n' $hits
			grep -hE -A 12 "$SAN_REPORT_RE" $hits | head -n 60
			T_FAIL=$((T_FAIL + 1))
		else
			printf 'PASS no sanitizer report in the logs\n'
			T_PASS=$((T_PASS + 1))
		fi
	fi
	if [ $T_FAIL != 0 ]; then
		for f in ${T_LOGS[@]+"${T_LOGS[@]}"}; do
			[ -s "$f" ] || continue
			printf -- '---- last lines of %s ----\n' "$f"
			tail -n "${OUTBOXD_TEST_LOG_LINES:-60}" "$f"
		done
		printf -- '---- end of logs ----\n'
	fi
	if [ -n "$T_DIR" ] && [ -d "$T_DIR" ]; then
		if [ "${OUTBOXD_TEST_KEEP:-0}" = 1 ]; then
			say "kept $T_DIR"
		else
			rm -rf "$T_DIR"
		fi
	fi
	printf 'SUMMARY %s passed=%d failed=%d\n' "$T_NAME" "$T_PASS" "$T_FAIL"
	[ $T_FAIL = 0 ] && exit 0 || exit 1
}

# test_init -- scratch directory T_DIR (under /tmp: the postgres OS user
# must reach it), traps, dependency check.
test_init() {
	T_DIR=$(mktemp -d "/tmp/outboxd-$T_NAME.XXXXXX")
	chmod 0755 "$T_DIR"
	export AWS_STATUS_FILE=$T_DIR/aws.status
	trap _t_err ERR
	trap _t_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	local c
	for c in curl jq psql node setsid timeout "$PY"; do
		command -v "$c" >/dev/null || die "missing dependency: $c (tests/lib/deps.sh installs it)"
	done
	say "scratch directory $T_DIR"
}

# need_binaries -- ./outboxd and ./outboxctl must have been built
need_binaries() {
	local b
	for b in outboxd outboxctl; do
		[ -x "$T_ROOT/$b" ] || die "$T_ROOT/$b not built (run tests/run-all.sh, or: autoreconf -fi && ./configure && make)"
	done
}

# ---- waiting ---------------------------------------------------------------

# wait_until SECONDS DESCRIPTION CMD [ARG...] -- poll CMD every 0.2 s until
# it succeeds (return 0) or SECONDS pass (say so, return 1).
wait_until() {
	local secs=$1 desc=$2 deadline
	shift 2
	deadline=$(($(date +%s%N) + secs * 1000000000))
	while :; do
		if "$@"; then return 0; fi
		if [ "$(date +%s%N)" -ge $deadline ]; then
			say "timed out after ${secs}s waiting for: $desc"
			return 1
		fi
		sleep 0.2
	done
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# check_queue_drained SECONDS DESCRIPTION -- wait up to SECONDS (naming
# DESCRIPTION on a timeout) until the stack's queue holds no message,
# visible or in flight; then check that, and that the dead-letter queue is
# empty.
queue_in_queue() {
	echo "$(sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessages)+$(sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessagesNotVisible)"
}
queue_empty() { [ "$(queue_in_queue)" = "0+0" ]; }
check_queue_drained() {
	wait_until "$1" "$2" queue_empty || true
	check_eq "queue drained (visible + in flight)" "0+0" "$(queue_in_queue)"
	check_eq "dead-letter queue empty" 0 "$(sqs_attr "$SQS_ENDPOINT" "$DLQ_URL" ApproximateNumberOfMessages)"
}

# ---- the stack ---------------------------------------------------------------

# stack_up -- PostgreSQL + fauxqs + dynalite in $T_DIR/stack; sources its env
stack_up() {
	T_STACK=$T_DIR/stack
	on_exit stack_down
	"$T_LIB/stack.sh" up "$T_STACK" || die "stack.sh up failed"
	. "$T_STACK/env"
	add_log "$T_STACK/pg/pg.log"
	add_log "$T_STACK/sqs/fauxqs.log"
	add_log "$T_STACK/ddb/dynalite.log"
}

stack_down() {
	[ -n "${T_STACK:-}" ] && [ -d "$T_STACK" ] || return 0
	STACK_KEEP=1 "$T_LIB/stack.sh" down "$T_STACK" >/dev/null
}

# ---- SQL ---------------------------------------------------------------------

# sql "STATEMENT" -- run against the stack's database, unaligned, no header
sql() { psql -X -v ON_ERROR_STOP=1 -qAt -c "$1"; }

# ---- outboxd -------------------------------------------------------------

OUTBOXD_PIDFILE=
OUTBOXD_LOG=

# outboxd_start [CONF] [NAME] -- start outboxd in the background (own
# process group), wait for GET /healthz; logs to $T_DIR/NAME.log.
outboxd_start() {
	local conf=${1:-$OUTBOXD_CONF} name=${2:-outboxd}
	need_binaries
	OUTBOXD_PIDFILE=$T_DIR/$name.pid
	OUTBOXD_LOG=$T_DIR/$name.log
	add_log "$OUTBOXD_LOG"
	on_exit "outboxd_stop '$OUTBOXD_PIDFILE'"
	# OUTBOXD_WRAP: a command outboxd runs under (valgrind.sh)
	# shellcheck disable=SC2086
	proc_start "$OUTBOXD_PIDFILE" "$OUTBOXD_LOG" ${OUTBOXD_WRAP:-} "$T_ROOT/outboxd" -c "$conf" ||
		die "could not start outboxd"
	say "outboxd started (pid $(proc_pid "$OUTBOXD_PIDFILE")), log $OUTBOXD_LOG"
	wait_healthz || die "outboxd did not become healthy"
}

# outboxd_gone -- the master of OUTBOXD_PIDFILE has exited
outboxd_gone() { ! proc_alive "$OUTBOXD_PIDFILE"; }

healthz_ok() {
	curl -fsS -o /dev/null --max-time 2 "$OUTBOXD_URL/healthz" 2>/dev/null
}

# healthy, or dead (no point in waiting for a dead process)
_healthz_or_dead() {
	healthz_ok || outboxd_gone
}

wait_healthz() {
	local t0
	t0=$(now_ms)
	wait_until 20 "GET /healthz answering 200" _healthz_or_dead || return 1
	proc_alive "$OUTBOXD_PIDFILE" || { say "outboxd exited during start-up"; return 1; }
	say "GET /healthz 200 after $(($(now_ms) - t0)) ms"
}

# outboxd_stop [PIDFILE] -- SIGTERM, wait up to 20 s, then SIGKILL the group
outboxd_stop() {
	local pf=${1:-$OUTBOXD_PIDFILE}
	[ -n "$pf" ] && [ -f "$pf" ] || return 0
	proc_stop "$pf" 20
}

# stop_before_kill LABEL SHUTDOWN_MS WORKER N WHAT -- SIGTERM to the master
# ($M) while WORKER ("relay 1") waits for WHAT, a broker that does not
# answer: the master is gone with exit 0 before SHUTDOWN_MS, when it would
# kill, no worker was killed, and N processes of WORKER exited 0 (a reload
# leaves two).  LABEL prefixes each check's name.
stop_before_kill() {
	local label=$1 ms=$2 worker=$3 n=$4 what=$5 t0 t_exit rc=0
	t0=$(now_ms)
	kill -TERM "$M"
	wait_until $((ms / 1000 + 5)) "outboxd to exit after SIGTERM" outboxd_gone || true
	t_exit=$(($(now_ms) - t0))
	if outboxd_gone; then wait "$M" 2>/dev/null || rc=$?; else rc=running; fi
	say "$label SIGTERM with $what hanging: master gone after $t_exit ms, exit status $rc"
	check_eq "$label exit status after SIGTERM" 0 "$rc"
	check "$label exited before shutdown_timeout, when the master would kill ($t_exit ms < $ms ms)" \
		[ "$t_exit" -lt "$ms" ]
	check_eq "$label workers killed by the shutdown timeout" 0 "$(grep -c 'shutdown_timeout reached' "$OUTBOXD_LOG" || true)"
	check_eq "$label workers killed" 0 "$(grep -c 'killed by signal' "$OUTBOXD_LOG" || true)"
	check_eq "$label the $worker exited 0" "$n" \
		"$(grep -cE "role=master .*msg=\"$worker pid=[0-9]+ exited with status 0\"" "$OUTBOXD_LOG" || true)"
}

# outboxd_pgid_procs PIDFILE -- pids still in outboxd's process group
outboxd_group_pids() {
	local pgid=$1
	ps -e -o pid=,pgid= | awk -v g="$pgid" '$2 == g { print $1 }'
}

# ---- HTTP ------------------------------------------------------------------

# http METHOD PATH [CURL ARGS...] -- request to outboxd; sets HTTP_STATUS,
# HTTP_BODY (text) and HTTP_CTYPE.
http() {
	local m=$1 p=$2 out hdr
	shift 2
	out=$T_DIR/http.body
	hdr=$T_DIR/http.hdr
	HTTP_STATUS=$(curl -sS -o "$out" -D "$hdr" -w '%{http_code}' --max-time 30 \
		-X "$m" "$OUTBOXD_URL$p" "$@") || HTTP_STATUS=000
	HTTP_BODY=$(cat "$out" 2>/dev/null || true)
	HTTP_CTYPE=$(grep -i '^content-type:' "$hdr" 2>/dev/null | tail -1 | sed 's/^[^:]*: *//; s/\r$//' || true)
}

# post_order CUSTOMER_ID AMOUNT_CENTS -- POST /orders with a JSON body built
# by jq (any UTF-8 is passed through); sets HTTP_* like http.
post_order() {
	local body
	body=$(jq -nc --arg c "$1" --argjson a "$2" '{customerId:$c, amountCents:$a}')
	http POST /orders -H 'Content-Type: application/json' --data-binary "$body"
}

# ---- proxies ---------------------------------------------------------------

# proxy_start NAME SCRIPT [ARGS...] -- start tests/lib/SCRIPT (python) on a
# free port; sets PROXY_PORT; stats in $T_DIR/NAME.stats, log $T_DIR/NAME.log.
proxy_start() {
	local name=$1 script=$2 pf i
	shift 2
	pf=$T_DIR/$name.port
	rm -f "$pf"
	add_log "$T_DIR/$name.log"
	on_exit "proc_stop '$T_DIR/$name.pid' 5"
	proc_start "$T_DIR/$name.pid" "$T_DIR/$name.log" "$PY" "$T_LIB/$script" \
		--port 0 --port-file "$pf" --stats "$T_DIR/$name.stats" "$@" ||
		die "could not start $script"
	for i in $(seq 1 100); do
		[ -s "$pf" ] && break
		proc_alive "$T_DIR/$name.pid" || { cat "$T_DIR/$name.log"; die "$script exited at start"; }
		sleep 0.05
	done
	[ -s "$pf" ] || die "$script did not report its port"
	PROXY_PORT=$(cat "$pf")
	say "$name listening on 127.0.0.1:$PROXY_PORT"
}

# jq_true FILTER JSON -- true when FILTER yields true on the JSON text
jq_true() { jq -e "$1" <<<"$2" >/dev/null 2>&1; }
# jq_file FILTER FILE -- the same on a file
jq_file() { jq -e "$1" "$2" >/dev/null 2>&1; }

# stat_of NAME KEY -- a counter from $T_DIR/NAME.stats (jq path)
stat_of() { jq -r "$2" "$T_DIR/$1.stats"; }
