#!/usr/bin/env bash
# master-kill-workers.sh -- under a steady stream of orders, kill -9 an HTTP
# worker, then a relay, then a consumer, a few seconds apart, and then two
# children in the same instant (kill -9 A B, so their SIGCHLDs coalesce):
# each is respawned (a new pid with the same title, "started ROLE N pid=NEW
# generation=1" in the log, the death logged with role, pid and signal),
# no <defunct> child is left, no connection is refused (the master holds
# the listening socket), requests fail only around the HTTP worker's death,
# and every order that got a 201 - every order in the database, in fact -
# has exactly one fulfillment item in DynamoDB, and every outbox row ends
# 'sent'.  A consumer killed in a long poll may leave a message invisible
# for one visibility timeout, and rows a killed relay had claimed wait for
# their lease: the queue's visibility timeout is 5 s here, relay leases 12 s
# (the shortest the configuration accepts with the default timeouts).
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/load.sh"
test_init
need_binaries
export STACK_VISIBILITY_TIMEOUT=5
stack_up

OB_HTTP_WORKERS=2 OB_RELAY_WORKERS=2 OB_CONSUMER_WORKERS=2 OB_WAIT_TIME=2 \
	outbox_conf_write "$T_DIR/outbox.conf"
conf_set "$T_DIR/outbox.conf" relay lease 12000
conf_set "$T_DIR/outbox.conf" relay timeout 2000
outboxd_start "$T_DIR/outbox.conf"
M=$(proc_pid "$OUTBOXD_PIDFILE")
wait_counts "$M" 10 2 2 2 || die "workers did not all start: $(counts_now "$M")"

load_start load --threads 4 --rate 60
load_wait_created load 30 20 || die "no orders flowing"

HTTP_KILLS=()	# ms of each kill of an HTTP worker: requests may fail then

# kill_and_watch TITLE... -- kill -9 these children in one kill(1), then
# check each is back under a new pid with the same title
kill_and_watch() {
	local titles=("$@") olds=() t pid new i t0 role idx
	for t in "${titles[@]}"; do
		pid=$(child_pid "$M" "$t")
		[ -n "$pid" ] || { fail "no child titled '$t' to kill ($(counts_now "$M"))"; return; }
		olds+=("$pid")
		case $t in *http*) HTTP_KILLS+=($(now_ms)) ;; esac
	done
	t0=$(now_ms)
	kill -9 "${olds[@]}"
	say "kill -9 ${olds[*]} (${titles[*]})"
	for i in "${!titles[@]}"; do
		t=${titles[i]}
		_back() { new=$(child_pid "$M" "$1"); [ -n "$new" ] && [ "$new" != "$2" ]; }
		if wait_until 5 "'$t' respawned" _back "$t" "${olds[i]}"; then
			pass "'$t' respawned: pid ${olds[i]} -> $new, seen after $(($(now_ms) - t0)) ms"
		else
			fail "'$t' not respawned within 5 s ($(counts_now "$M"))"
			continue
		fi
		role=${t#outboxd: }
		idx=${role##* }
		role=${role% *}
		check "log: '$role $idx pid=${olds[i]} killed by signal 9'" \
			grep -q "level=warn role=master .*msg=\"$role $idx pid=${olds[i]} killed by signal 9" "$OUTBOXD_LOG"
		_started() { grep -q "msg=\"started $1 pid=$2 generation=1\"" "$OUTBOXD_LOG"; }
		check "log: 'started $role $idx pid=$new generation=1'" \
			wait_until 3 "the start line of $new" _started "$role $idx" "$new"
	done
}

for t in "outboxd: http 1" "outboxd: relay 1" "outboxd: consumer 1"; do
	kill_and_watch "$t"
	load_wait_created load 30 20 || fail "orders stopped flowing after killing '$t'"
	sleep 2
done

# two in the same instant: one SIGCHLD may stand for both
kill_and_watch "outboxd: relay 2" "outboxd: consumer 2"
sleep 1
check_eq "no <defunct> child of the master after the double kill" "" "$(zombies "$M")"
check "children as configured (2 http, 2 relay, 2 consumer, nothing else)" \
	wait_counts "$M" 5 2 2 2
load_wait_created load 30 20 || fail "orders stopped flowing after the double kill"
load_stop load

check_eq "no connection refused" 0 "$(load_stat load .refused)"
# requests in the hands of the killed HTTP worker fail; none other may
outside=$(jq -r '.t' "$T_DIR/load.fail" | while read -r t; do
	ok=0
	for k in ${HTTP_KILLS[@]+"${HTTP_KILLS[@]}"}; do
		[ "$t" -ge $((k - 1000)) ] && [ "$t" -le $((k + 3000)) ] && ok=1
	done
	[ $ok = 1 ] || echo "$t"
done | wc -l)
check_eq "failed requests other than around the HTTP worker's kill" 0 "$outside"
[ "$outside" = 0 ] || head -5 "$T_DIR/load.fail"
stored=$(load_failed_stored load | wc -l)
say "failed requests: $(load_stat load .failed) ($(jq -r .kind "$T_DIR/load.fail" | sort | uniq -c | tr '\n' ' ')); of them committed anyway (answer lost with the killed worker): $stored"
check "orders answered 201 during the test" [ "$(load_created load)" -ge 300 ]

t0=$(now_ms)
wait_fulfilled "$T_DIR/load.ids" 60 || true
wait_outbox_sent 30 || true
echo "TIMING master-kill-workers orders=$(load_created load) failed=$(load_stat load .failed) last_fulfilled_after_load_ms=$(($(now_ms) - t0))"
check_orders_stored "$T_DIR/load.ids" "kill -9 workers"
check_fulfilled_once "$T_DIR/load.ids" "kill -9 workers"
check_eq "no reload happened: one generation" 0 "$(grep -c 'generation=[02-9]' "$OUTBOXD_LOG" || true)"
check_eq "workers that died were all killed by us (deaths logged)" 5 \
	"$(grep -c 'level=warn role=master .*killed by signal 9' "$OUTBOXD_LOG" || true)"

# graceful stop still works after all that
kill -TERM "$M"
check "master exits after SIGTERM" wait_until 15 "outboxd to exit" outboxd_gone
rc=0
wait "$M" 2>/dev/null || rc=$?
check_eq "exit status after SIGTERM" 0 "$rc"
check_eq "no outboxd process left" "" "$(outboxd_group_pids "$M" | tr '\n' ' ')"
