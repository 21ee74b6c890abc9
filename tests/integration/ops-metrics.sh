#!/usr/bin/env bash
# ops-metrics.sh -- GET /metrics before and after 100 orders: the counters
# moved by exactly the right amounts (HTTP POST /orders 2xx +100, published
# sent +100, publish latency observations +100, consumer processed +100),
# the outbox gauges are back to 0, and the exposition parses and lints
# clean with Prometheus's own promtool.  Then a relay is killed with
# SIGKILL: once the master has respawned it, no counter went backwards and
# outboxd_worker_restarts_total{role="relay"} rose by exactly 1.
# /healthz and /readyz answer through it all.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
command -v promtool >/dev/null || die "promtool missing (Debian package prometheus; tests/lib/deps.sh installs it)"
stack_up
outboxd_start

N=100
M=$T_DIR/metrics

wait_until 10 "GET /readyz 200" eval '[ "$(curl -s -o /dev/null -w "%{http_code}" "$OUTBOXD_URL/readyz")" = 200 ]' || true
http GET /readyz
check_eq "GET /readyz before the orders" 200 "$HTTP_STATUS"
check "/readyz says ready, database and schema ok, every worker up: $HTTP_BODY" \
	jq_true '.status == "ready" and .database == "ok" and .schema == "ok" and .workers_up == .workers_desired and .workers_desired == 5' "$HTTP_BODY"

scrape "$M.0" || die "first scrape failed"
check "the first exposition passes promtool check metrics" promtool_ok "$M.0"
http GET /metrics
check "Content-Type is the 0.0.4 text format ($HTTP_CTYPE)" grep -q '^text/plain; version=0.0.4' <<<"$HTTP_CTYPE"

post_one() {
	curl -sS -o /dev/null -w '%{http_code}\n' --max-time 30 -H 'Content-Type: application/json' \
		--data-binary "{\"customerId\":\"m-$1\",\"amountCents\":$1}" "$OUTBOXD_URL/orders"
}
export -f post_one
export OUTBOXD_URL
seq 1 $N | xargs -P 8 -n 1 bash -c 'post_one "$1"' _ >"$T_DIR/codes"
check_eq "POST /orders answered 201" "$N" "$(grep -c '^201$' "$T_DIR/codes" || true)"

# wait for the whole chain, as the metrics see it
done_all() {
	scrape "$M.1" &&
	[ "$(delta "$M.0" "$M.1" 'outboxd_consumer_messages_total{outcome="processed"}')" -ge $N ] &&
	[ "$(delta "$M.0" "$M.1" 'outboxd_published_messages_total{sink="sqs",outcome="sent"}')" -ge $N ]
}
wait_until 60 "$N messages published and consumed" done_all || true
sleep 1.5	# the outbox figures are cached for 1 s; anything late shows up
scrape "$M.1" || die "scrape after the orders failed"
check_eq "delta http_requests_total{route=/orders,2xx}" $N "$(delta "$M.0" "$M.1" 'outboxd_http_requests_total{route="/orders",code_class="2xx"}')"
check_eq "delta http_requests_total{route=/orders,4xx}" 0 "$(delta "$M.0" "$M.1" 'outboxd_http_requests_total{route="/orders",code_class="4xx"}')"
check_eq "delta http_requests_total{route=/orders,5xx}" 0 "$(delta "$M.0" "$M.1" 'outboxd_http_requests_total{route="/orders",code_class="5xx"}')"
check_eq "delta http_request_duration_seconds_count{route=/orders}" $N "$(delta "$M.0" "$M.1" 'outboxd_http_request_duration_seconds_count{route="/orders"}')"
check_eq "delta published_messages_total{sqs,sent}" $N "$(delta "$M.0" "$M.1" 'outboxd_published_messages_total{sink="sqs",outcome="sent"}')"
check_eq "delta published_messages_total{sqs,retry}" 0 "$(delta "$M.0" "$M.1" 'outboxd_published_messages_total{sink="sqs",outcome="retry"}')"
check_eq "delta publish_latency_seconds_count" $N "$(delta "$M.0" "$M.1" 'outboxd_publish_latency_seconds_count')"
check_eq "delta consumer_messages_total{processed}" $N "$(delta "$M.0" "$M.1" 'outboxd_consumer_messages_total{outcome="processed"}')"
check_eq "delta consumer_messages_total{error}" 0 "$(delta "$M.0" "$M.1" 'outboxd_consumer_messages_total{outcome="error"}')"
check_eq "outbox_rows{pending} after the drain" 0 "$(sample "$M.1" 'outboxd_outbox_rows{status="pending"}')"
check_eq "outbox_rows{failed}" 0 "$(sample "$M.1" 'outboxd_outbox_rows{status="failed"}')"
check_eq "oldest pending age with nothing pending" 0.000 "$(sample_max "$M.1" 'outboxd_outbox_oldest_pending_age_seconds')"
# One destination (the legacy sqs {} section, named "default"): its series
# carry destination and sink; the other's are there, and zero.
check_eq "delta published sent under destination=default" $N \
	"$(delta "$M.0" "$M.1" 'outboxd_published_messages_total{destination="default",sink="sqs",outcome="sent"}')"
check_eq "delta publish latency observations under destination=default" $N \
	"$(delta "$M.0" "$M.1" 'outboxd_publish_latency_seconds_count{destination="default",sink="sqs"}')"
check_eq "nothing under destination=\"(other)\"" 0 \
	"$(sample "$M.1" 'outboxd_published_messages_total{destination="(other)",sink="none"}')"
check_eq "destination series: default and (other), 3 outcomes each" 6 \
	"$(series_count "$M.1" 'outboxd_published_messages_total')"
check_eq "outboxd_destination_paused{destination=default}" 0 "$(sample "$M.1" 'outboxd_destination_paused{destination="default"}')"
check_eq "outboxd_database_up" 1 "$(sample "$M.1" 'outboxd_database_up')"
check_eq "rows 'sent' in the database" $N "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "fulfillment items" $N "$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")"
check "the exposition after the orders passes promtool check metrics" promtool_ok "$M.1"
# latency: every observation is at most the slowest created_at -> sent_at
lat_inf=$(sample "$M.1" 'outboxd_publish_latency_seconds_bucket{le="+Inf"}')
lat_60=$(sample "$M.1" 'outboxd_publish_latency_seconds_bucket{le="60"}')
check_eq "publish latencies under 60 s (bucket le=60 = +Inf)" "$lat_inf" "$lat_60"
sink_n=$(delta "$M.0" "$M.1" 'outboxd_sink_duration_seconds_count{sink="sqs"}')
check "batches at SQS in outboxd_sink_duration_seconds: 1..$N ($sink_n)" test "$sink_n" -ge 1 -a "$sink_n" -le $N
check_eq "each under 10 s (bucket le=10 = count)" "$(sample "$M.1" 'outboxd_sink_duration_seconds_count{sink="sqs"}')" \
	"$(sample "$M.1" 'outboxd_sink_duration_seconds_bucket{sink="sqs",le="10"}')"
check_eq "none at the webhook sink" 0 "$(sample "$M.1" 'outboxd_sink_duration_seconds_count{sink="http"}')"
say "publish latency: $(awk '/^outboxd_publish_latency_seconds_(sum|count)/ { printf "%s=%s ", $1, $2 }' "$M.1")"

# kill -9 a relay: the master respawns it; the counters live on
old=$(master_child "relay 1")
[ -n "$old" ] || die "no relay 1 under the master"
kill -KILL "$old"
respawned() { local p; p=$(master_child "relay 1"); [ -n "$p" ] && [ "$p" != "$old" ]; }
wait_until 10 "relay 1 respawned" respawned || true
check "relay 1 respawned with a new pid (was $old, now $(master_child "relay 1"))" respawned
scrape "$M.2" || die "scrape after the respawn failed"
check_eq "delta worker_restarts_total{role=relay}" 1 "$(delta "$M.1" "$M.2" 'outboxd_worker_restarts_total{role="relay"}')"
check_eq "delta worker_restarts_total{role=http}" 0 "$(delta "$M.1" "$M.2" 'outboxd_worker_restarts_total{role="http"}')"
check "no counter went backwards across the respawn" counters_not_backwards "$M.1" "$M.2"
check_eq "published sent unchanged by the respawn" "$(sample "$M.1" 'outboxd_published_messages_total{sink="sqs",outcome="sent"}')" \
	"$(sample "$M.2" 'outboxd_published_messages_total{sink="sqs",outcome="sent"}')"

# and it still publishes
post_order after-kill 4242
check_eq "POST /orders after the respawn" 201 "$HTTP_STATUS"
one_more() { scrape "$M.3" && [ "$(delta "$M.2" "$M.3" 'outboxd_published_messages_total{sink="sqs",outcome="sent"}')" = 1 ]; }
wait_until 20 "one more message published" one_more || true
check_eq "delta published sent after the respawn" 1 "$(delta "$M.2" "$M.3" 'outboxd_published_messages_total{sink="sqs",outcome="sent"}')"
check "no counter went backwards" counters_not_backwards "$M.2" "$M.3"
wait_until 10 "all workers up again" eval '[ "$(sample "$M.3" outboxd_workers_up)" = 5 ] || { scrape "$M.3"; false; }' || true
http GET /readyz
check_eq "GET /readyz after the respawn" 200 "$HTTP_STATUS"
http GET /healthz
check_eq "GET /healthz" 200 "$HTTP_STATUS"
http POST /metrics
check_eq "POST /metrics is 405" 405 "$HTTP_STATUS"

say "sample exposition (first lines):"
grep -v '^#' "$M.3" | grep -Ev '_bucket' >"$T_DIR/sample" || true
sed -n 1,40p "$T_DIR/sample"
