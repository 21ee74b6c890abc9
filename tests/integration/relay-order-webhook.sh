#!/usr/bin/env bash
# relay-order-webhook.sh -- with relay.sink = "http" and 4 relays, events
# of one ordering key reach the webhook receiver in the order their
# transactions committed.  4 concurrent writers, 50 keys x 20 events; each
# transaction takes a per-key lock (a counter row) and stamps its event with
# the counter, so per key counter order = commit order; half of them insert
# the outbox row BEFORE taking the lock, so row ids within a key are often
# not in commit order.  The receiver (tests/lib/webhook-receiver.py) records
# deliveries in arrival order and checks every signature.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

KEYS=50
PER_KEY=20
WRITERS=4
TOTAL=$((KEYS * PER_KEY))

webhook_receiver_start
webhook_conf_write "$T_DIR/outbox.conf" 2000 "workers = 4" "batch_size = 10" \
	"poll_interval = 200" "backoff_base = 100" "backoff_max = 400"
outboxd_start "$T_DIR/outbox.conf"

sql "CREATE TABLE seq_ctr (k text PRIMARY KEY, seq integer NOT NULL DEFAULT 0);
INSERT INTO seq_ctr SELECT 'key-' || lpad(g::text, 2, '0'), 0 FROM generate_series(1, $KEYS) g;
CREATE FUNCTION ins_event(p_k text, p_w integer, p_insert_first boolean) RETURNS void
LANGUAGE plpgsql AS \$\$
DECLARE
	v_id bigint;
	v_seq integer;
BEGIN
	IF p_insert_first THEN
		INSERT INTO outbox (event_type, ordering_key, payload)
			VALUES ('test.seq', p_k, '{}') RETURNING id INTO v_id;
		PERFORM pg_sleep(random() * 0.004);
		UPDATE seq_ctr SET seq = seq + 1 WHERE k = p_k RETURNING seq INTO v_seq;
		UPDATE outbox SET payload = jsonb_build_object('key', p_k, 'seq', v_seq)
			WHERE id = v_id;
	ELSE
		UPDATE seq_ctr SET seq = seq + 1 WHERE k = p_k RETURNING seq INTO v_seq;
		INSERT INTO outbox (event_type, ordering_key, payload)
			VALUES ('test.seq', p_k, jsonb_build_object('key', p_k, 'seq', v_seq));
	END IF;
	PERFORM pg_sleep(random() * 0.004);
END
\$\$" >/dev/null

order_writers_run "$WRITERS" "$PER_KEY" "$KEYS" 1
check_eq "events written" "$TOTAL" "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.seq'")"
inv=$(order_inversions)
check "the writers produced id/commit-order inversions to get right ($inv)" [ "$inv" -gt 0 ]

all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }
wait_until 90 "all $TOTAL events sent" all_sent || true
check_eq "outbox rows not 'sent'" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"

jq -r 'select(.path | startswith("/hooks")) | .body | fromjson | "\(.key)\t\(.seq)"' "$REC" >"$T_DIR/recv.tsv"
check_eq "deliveries with a bad signature" 0 "$(jq -r 'select(.sig_ok != true) | 1' "$REC" | wc -l)"
# per key: the counters in arrival order must never go down, and must be
# 1..20 once duplicates are dropped.  Delivery is at least once: a
# delivery whose answer timed out is sent again, right after itself and
# before the key's next event, so a duplicate repeats the previous counter.
read -r nkeys nmiss nout ndup <<<"$(awk -F'\t' -v n="$PER_KEY" '
	{ if ($2 == last[$1]) { dup++; next }
	  cnt[$1]++; if ($2 != cnt[$1]) bad[$1]++; last[$1] = $2 }
	END { keys = 0; miss = 0; out = 0
		for (k in cnt) { keys++; if (cnt[k] != n) miss++; if (bad[k]) out++ }
		print keys, miss, out, dup + 0 }' "$T_DIR/recv.tsv")"
say "duplicate deliveries (retries after a timeout): $ndup"
check_eq "keys seen by the receiver" "$KEYS" "$nkeys"
check_eq "keys without exactly $PER_KEY distinct events" 0 "$nmiss"
check_eq "keys whose events arrived out of commit order" 0 "$nout"
