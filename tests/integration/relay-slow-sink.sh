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
# one request per row; nothing failed.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

webhook_receiver_start
webhook_receiver_slow 1000
webhook_conf_write "$T_DIR/outbox.conf" 2000 "workers = 1" "batch_size = 100" \
	"poll_interval = 200" "lease = 4000" "max_attempts = 10"
outboxd_start "$T_DIR/outbox.conf"
webhook_drain_once 200 120

grep -m1 'too late to publish within the lease' "$OUTBOXD_LOG" | sed 's/^/    /' || true
check "rows that waited too long for the sink were left to their lease (warning logged)" \
	grep -qE 'too late to publish within the lease: [0-9]+ claimed row\(s\) are left to its end \(the claim took [0-9]+ ms, the wait for a free request to the sink [0-9]+ ms\)' "$OUTBOXD_LOG"
