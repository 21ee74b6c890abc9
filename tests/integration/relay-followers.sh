#!/usr/bin/env bash
# relay-followers.sh -- the rows behind a key's head go out as soon as the
# head is sent, not at the next poll.  One relay, poll_interval one hour:
# 30 rows of one key, inserted by one statement (one NOTIFY), must all be
# sent within 30 s, in id order.  The first claim can take only the head;
# every later row is claimable only once the row before it is marked sent,
# so only the relay's "this key has more rows" hint from the mark can
# drive the drain (without it the rows wait for the hourly poll).
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

N=30
OB_RELAY_WORKERS=1 OB_CONSUMER_WORKERS=0 OB_POLL_INTERVAL=3600000 \
	relay_conf_write "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"

# The relay's start-up pass has run on an empty outbox by now.
wait_until 10 "the relay's first log line" grep -q 'publishing to' "$OUTBOXD_LOG" || true
sleep 0.5
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.follow', 'follow-key', jsonb_build_object('n', g)
	FROM generate_series(1, $N) g"
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
t0=$(now_ms)
wait_until 30 "all $N rows of one key to be sent" all_sent || true
say "drained in $(($(now_ms) - t0)) ms"
check_eq "rows of the key still unsent 30 s after the insert (poll_interval 1 h)" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
check_eq "rows sent out of id order" 0 "$(sql "SELECT count(*) FROM (
	SELECT sent_at < lag(sent_at) OVER (ORDER BY id) AS back FROM outbox) s WHERE back")"
check_eq "messages in the queue (visible + in flight)" "$N+0" "$(queue_in_queue)"
