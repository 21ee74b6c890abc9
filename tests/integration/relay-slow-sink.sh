#!/usr/bin/env bash
# relay-slow-sink.sh -- a webhook receiver that takes 1 s per request.  A
# relay claims more rows than its sink takes at once (16 requests); the
# rest wait in the relay for a free request.  With lease = 4000 ms and
# webhook.timeout = 2000 ms a row may wait at most 2 s: one that waited
# longer could still be at the receiver when its lease ends and the next
# claim takes it again, and it would be delivered twice.  Such rows are
# left to the end of their lease instead, with a warning.
# Asserts: the warning is logged and says how long the claim and the wait
# took; every row ends 'sent' after one attempt, the receiver got exactly
# one request per row; nothing failed; outboxd_sink_duration_seconds shows
# the sink's second.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
stack_up

webhook_receiver_start
webhook_receiver_slow 1000
webhook_conf_write "$T_DIR/outbox.conf" 2000 "workers = 1" "batch_size = 100" \
	"poll_interval = 200" "lease = 4000" "max_attempts = 10"
outboxd_start "$T_DIR/outbox.conf"
webhook_insert_wait 200 120
scrape "$T_DIR/metrics" || die "scrape failed"
outboxd_stop
webhook_sent_once 200
sink_n=$(sample "$T_DIR/metrics" 'outboxd_sink_duration_seconds_count{sink="http"}')
say "sink duration: count $sink_n, sum $(sample "$T_DIR/metrics" 'outboxd_sink_duration_seconds_sum{sink="http"}') s"
check "batches at the webhook sink counted in outboxd_sink_duration_seconds ($sink_n)" test "$sink_n" -ge 1
check_eq "none under 0.5 s (the receiver takes 1 s)" 0 \
	"$(sample "$T_DIR/metrics" 'outboxd_sink_duration_seconds_bucket{sink="http",le="0.5"}')"
check_eq "none at the SQS sink" 0 "$(sample "$T_DIR/metrics" 'outboxd_sink_duration_seconds_count{sink="sqs"}')"

grep -m1 'too late to publish within the lease' "$OUTBOXD_LOG" | sed 's/^/    /' || true
check "rows that waited too long for the sink were left to their lease (warning logged)" \
	grep -qE 'too late to publish within the lease: [0-9]+ claimed row\(s\) are left to its end \(the claim took [0-9]+ ms, the wait for a free request to the sink [0-9]+ ms\)' "$OUTBOXD_LOG"
