#!/usr/bin/env bash
# ops-broker-down.sh -- SQS answers every SendMessageBatch with HTTP 500
# (the fault proxy in front of the emulator): orders are still taken, the
# outbox backs up, and the metrics show it -- outboxd_outbox_rows{pending}
# reaches the orders posted, the oldest-pending-age gauge rises between two
# scrapes, failed attempts are counted as reason="server" and outcome
# "retry" -- while /readyz still answers 200 (the broker is not the
# daemon's readiness).  The log does not flood: the broker-failure line is
# written about once per 10 s with "(N more like it were not logged)", and a
# relay that exits (a reload) says how many it still held back.  Once SQS
# works again the backlog drains and the gauges go back to 0.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
command -v promtool >/dev/null || die "promtool missing (Debian package prometheus; tests/lib/deps.sh installs it)"
stack_up

proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
fault() { curl -sS "$FP/__fault" "$@"; }
# relays retry quickly so the failure count grows within the test
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events OB_RELAY_WORKERS=2 \
	outbox_conf_write "$T_DIR/outbox.conf"
sed -i "s/^relay {/relay {\n\tbackoff_base = 100\n\tbackoff_max = 400\n\tmax_attempts = 1000/" "$T_DIR/outbox.conf"
. "$T_STACK/env"
outboxd_start "$T_DIR/outbox.conf"
M=$T_DIR/metrics

fault -X POST --data-binary '{"mode":"status","status":500,"code":"InternalError","message":"broker down (injected)","actions":["SendMessageBatch"]}' >/dev/null
scrape "$M.0" || die "first scrape failed"

N=20
for i in $(seq 1 $N); do
	post_order "down-$i" "$i"
	[ "$HTTP_STATUS" = 201 ] || fail "POST /orders $i answered $HTTP_STATUS with SQS down"
done
pass "$N orders taken with SQS down"

backed_up() {
	scrape "$M.1" && [ "$(sample "$M.1" 'outboxd_outbox_rows{status="pending"}')" -ge $N ] &&
	[ "$(delta "$M.0" "$M.1" 'outboxd_publish_failures_total{reason="server"}')" -ge $N ]
}
wait_until 20 "the metrics to show the backlog" backed_up || true
check "outbox_rows{pending} >= $N ($(sample "$M.1" 'outboxd_outbox_rows{status="pending"}'))" \
	[ "$(sample "$M.1" 'outboxd_outbox_rows{status="pending"}')" -ge $N ]
check_eq "outbox_rows{pending} matches the database" \
	"$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")" "$(sample "$M.1" 'outboxd_outbox_rows{status="pending"}')"
check_eq "  ... all of them the default destination's (destination NULL)" \
	"$(sample "$M.1" 'outboxd_outbox_rows{status="pending"}')" "$(sample "$M.1" 'outboxd_outbox_rows{destination="default",status="pending"}')"
check "failed attempts counted as reason=server ($(delta "$M.0" "$M.1" 'outboxd_publish_failures_total{reason="server"}'))" \
	[ "$(delta "$M.0" "$M.1" 'outboxd_publish_failures_total{reason="server"}')" -ge $N ]
check "... and as outcome=retry ($(delta "$M.0" "$M.1" 'outboxd_published_messages_total{sink="sqs",outcome="retry"}'))" \
	[ "$(delta "$M.0" "$M.1" 'outboxd_published_messages_total{sink="sqs",outcome="retry"}')" -ge $N ]
check_eq "nothing counted as sent" 0 "$(delta "$M.0" "$M.1" 'outboxd_published_messages_total{sink="sqs",outcome="sent"}')"
age1=$(sample_max "$M.1" 'outboxd_outbox_oldest_pending_age_seconds')
sleep 2.5
scrape "$M.2" || die "scrape failed"
age2=$(sample_max "$M.2" 'outboxd_outbox_oldest_pending_age_seconds')
check "oldest pending age rises while SQS is down ($age1 s -> $age2 s)" \
	awk -v a="$age1" -v b="$age2" 'BEGIN { exit !(a > 0 && b >= a + 2) }'
dbage=$(sql "SELECT extract(epoch FROM now() - min(created_at)) FROM outbox WHERE status = 'pending'")
check "the age gauge agrees with the database within 2 s ($age2 vs $dbage)" \
	awk -v a="$age2" -v b="$dbage" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 2) }'
http GET /readyz
check_eq "GET /readyz with SQS down" 200 "$HTTP_STATUS"
check "/readyz body says ready: $HTTP_BODY" jq_true '.status == "ready"' "$HTTP_BODY"
check "the exposition with SQS down passes promtool" promtool_ok "$M.2"

# The log: the batch failure is rate-limited, with a count
sleep 9	# past one 10 s window, with failures going on
scrape "$M.3" || true
n_att=$(delta "$M.0" "$M.3" 'outboxd_publish_failures_total{reason="server"}')
n_lines=$(grep -c 'SendMessageBatch of' "$OUTBOXD_LOG" || true)
say "failed attempts: $n_att; 'SendMessageBatch ... failed' log lines: $n_lines"
check "failure lines are rate-limited ($n_lines lines for $n_att failed attempts, 2 relays)" \
	[ "$n_lines" -ge 2 -a "$n_lines" -le 8 -a "$n_att" -gt $((n_lines * 3)) ]
check "a later failure line counts the ones held back" grep -q 'SendMessageBatch of .*([0-9]* more like it were not logged)' "$OUTBOXD_LOG"

# A worker that exits while lines are held back says how many: a reload
# replaces the relays while SQS is still down.  Then the new relays' first
# failure is written at once, so that they can say when SQS works again.
# Each relay writes one failure line per 10 s window, and the relays'
# windows run nearly in step; a reload just after their lines would find
# nothing held back.  So the reload comes 2.5 to 7 s after the newest line,
# when every failure since (one or more a second) has been held back.
last_line_age() {
	local ts
	ts=$(grep 'SendMessageBatch of' "$OUTBOXD_LOG" | tail -1 | sed -E 's/^time=([^ ]+) .*/\1/')
	[ -n "$ts" ] || { echo -1; return; }
	echo $(( $(now_ms) - $(date -d "$ts" +%s%3N) ))
}
mid_window() { local a; a=$(last_line_age); [ "$a" -ge 2500 ] && [ "$a" -le 7000 ]; }
wait_until 12 "2.5 s past the newest failure line" mid_window || die "no failure line to time the reload by"
kill -HUP "$(proc_pid "$OUTBOXD_PIDFILE")"
flush_re='role=relay\.[12] .*msg="exiting with [0-9]+ rate-limited line\(s\) not logged since the last one of their kind"'
flushed() { grep -qE "$flush_re" "$OUTBOXD_LOG"; }
check "a relay replaced by a reload counts the failure lines it held back" \
	wait_until 10 "an old relay's exit line" flushed
grep -m2 -E "$flush_re" "$OUTBOXD_LOG" | sed 's/^/    /' || true
new_pids=$(grep -oE 'msg="started relay [12] pid=[0-9]+ generation=2"' "$OUTBOXD_LOG" |
	sed -E 's/.*pid=([0-9]+).*/\1/' | paste -sd'|')
[ -n "$new_pids" ] || die "the reload started no relay"
new_failure() { grep -qE "role=relay\.[12] pid=($new_pids) .*SendMessageBatch of" "$OUTBOXD_LOG"; }
wait_until 10 "a failure line of the new relays" new_failure || die "the new relays wrote no failure line"

# SQS back: the backlog drains and the gauges fall to 0
fault -X POST --data-binary '{"mode":"pass"}' >/dev/null
drained() { scrape "$M.4" && [ "$(sample "$M.4" 'outboxd_outbox_rows{status="pending"}')" = 0 ]; }
wait_until 30 "the backlog to drain" drained || true
check_eq "outbox_rows{pending} after SQS is back" 0 "$(sample "$M.4" 'outboxd_outbox_rows{status="pending"}')"
check_eq "oldest pending age after the drain" 0.000 "$(sample_max "$M.4" 'outboxd_outbox_oldest_pending_age_seconds')"
check_eq "delta published sent" $N "$(delta "$M.0" "$M.4" 'outboxd_published_messages_total{sink="sqs",outcome="sent"}')"
check "publish latency observed for the delayed rows (> 10 s)" \
	[ "$(sample "$M.4" 'outboxd_publish_latency_seconds_bucket{le="10"}' | cut -d. -f1)" -lt "$(sample "$M.4" 'outboxd_publish_latency_seconds_count')" ]
# Each relay says so at its first success after a failure it logged: every
# new relay that wrote a failure line must say it works again.  The other
# relay may have drained every row meanwhile, leaving the one that logged
# to succeed with nothing.  Which relay claims a new row is a race, so the
# others are stopped (SIGSTOP; nothing watches a relay's pulse) while a row
# is written for the one that has yet to say so, and resumed after.
logged=$(grep -oE "role=relay\.[12] pid=($new_pids) .*SendMessageBatch of" "$OUTBOXD_LOG" |
	sed -E 's/.*pid=([0-9]+).*/\1/' | sort -u)
[ -n "$logged" ] || die "no new relay's failure line found"
said_again() { grep -qE "role=relay\.[12] pid=$1 .*SendMessageBatch works again" "$OUTBOXD_LOG"; }
works_again() {
	local p
	for p in $logged; do
		said_again "$p" || return 1
	done
}
for p in $logged; do
	said_again "$p" && continue
	others=$(echo "$new_pids" | tr '|' '\n' | grep -vx "$p" | paste -sd' ')
	[ -z "$others" ] || kill -STOP $others
	sql "INSERT INTO outbox (event_type, ordering_key, payload)
		VALUES ('test.again', 'again-$p', '{}')" >/dev/null
	wait_until 10 "relay pid $p to say it works again" said_again "$p" || true
	[ -z "$others" ] || kill -CONT $others
done
check "each new relay that logged a failure ($(echo $logged)) says SendMessageBatch works again" works_again
check "no counter went backwards" counters_not_backwards "$M.0" "$M.4"

# PostgreSQL down, by contrast, IS readiness: /readyz 503 says why, and
# /metrics still answers (outboxd_database_up 0)
"$T_LIB/pg-down.sh" "$T_STACK/pg" --keep >/dev/null
not_ready() { http GET /readyz; [ "$HTTP_STATUS" = 503 ]; }
wait_until 15 "/readyz 503 with PostgreSQL down" not_ready || true
check_eq "GET /readyz with PostgreSQL down" 503 "$HTTP_STATUS"
check "/readyz says what is wrong: $HTTP_BODY" \
	jq_true '.status == "not_ready" and .error == "not_ready" and .database != "ok" and (.message | test("PostgreSQL"))' "$HTTP_BODY"
sleep 1.1
scrape "$M.5" || fail "GET /metrics with PostgreSQL down"
check_eq "outboxd_database_up with PostgreSQL down" 0 "$(sample "$M.5" outboxd_database_up)"
check "the exposition with PostgreSQL down passes promtool" promtool_ok "$M.5"
http GET /healthz
check_eq "GET /healthz (liveness) with PostgreSQL down" 200 "$HTTP_STATUS"
post_order while-pg-down 1
check_eq "POST /orders with PostgreSQL down: 503 (try again), not a refusal" 503 "$HTTP_STATUS"
check "  ... with a JSON error body" jq_true '.error == "database_unavailable"' "$HTTP_BODY"
