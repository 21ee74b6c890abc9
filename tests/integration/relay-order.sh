#!/usr/bin/env bash
# relay-order.sh -- events of one ordering key reach the queue in the order
# their transactions committed, with 4 relays.  The relays publish to a
# FIFO queue (order-events.fifo, ContentBasedDeduplication false; no
# consumers), and the test reads it back (receive, record, delete).
#  a) two psql sessions insert a row for the same key; the first one to
#     insert commits 2 s after the second: both are published, the second
#     session's row first (commit order, not id order).
#  b) 4 concurrent writers, 50 keys x 20 events, one small transaction per
#     event.  Each transaction takes a per-key lock (UPDATE of a counter
#     row) and stamps its event with the counter, so per key the counter
#     order is the commit order.  In half of the transactions the outbox
#     row is inserted BEFORE the lock is taken ("insert-first"), so row ids
#     within a key are often not in commit order; in the other half after
#     it ("lock-first", the usual application pattern).  Every key's events
#     must arrive exactly once each, in counter order.
#  c) as a), but both sessions commit while the relays are paused
#     (outbox_control.paused): both are published, in commit order once the
#     relays resume.
# RELAY_ORDER_STRICT=0 leaves out what needs commit order among rows that
# committed between two scans of the relays: b) is then all lock-first
# (ids follow commits) and c) is skipped.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

KEYS=50
PER_KEY=20
WRITERS=4
STRICT=${RELAY_ORDER_STRICT:-1}
INSERT_FIRST=$STRICT

FIFO_URL=$(aws_call sqs "$SQS_ENDPOINT" CreateQueue '{"QueueName":"order-events.fifo",
	"Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"false","VisibilityTimeout":"30"}}' |
	jq -er .QueueUrl) || die "CreateQueue order-events.fifo failed"
say "FIFO queue $FIFO_URL"
QUEUE_URL=$FIFO_URL OB_RELAY_WORKERS=4 OB_BATCH_SIZE=10 OB_CONSUMER_WORKERS=0 \
	relay_conf_write "$T_DIR/outbox.conf" "backoff_base = 200" "backoff_max = 2000"
outboxd_start "$T_DIR/outbox.conf"
check_eq "relays running" 4 "$(relay_pids | wc -l)"

# drain_fifo EXPECTED OUT -- receive + delete until EXPECTED messages were
# read (or the queue stays empty for 5 s); OUT gets
# "group<TAB>sequence<TAB>dedup id<TAB>body" lines in the order received
drain_fifo() {
	"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$FIFO_URL" \
		--count "$1" --idle 5 >"$2"
}

all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }

# pair KEY COMMIT_GAP -- session 1 inserts, then session 2 inserts and
# commits, then session 1 commits COMMIT_GAP seconds later
pair() {
	local key=$1 gap=$2
	rm -f "$T_DIR/s1.inserted"
	psql -X -v ON_ERROR_STOP=1 -qAt >"$T_DIR/s1.out" 2>&1 <<SQL &
BEGIN;
INSERT INTO outbox (event_type, ordering_key, payload)
	VALUES ('test.pair', '$key', '{"key": "$key", "session": 1}') RETURNING id;
\! touch $T_DIR/s1.inserted
SELECT pg_sleep(0.5 + $gap);
COMMIT;
SQL
	local s1=$!
	wait_until 10 "session 1 to insert" test -e "$T_DIR/s1.inserted" || true
	sleep 0.5
	sql "INSERT INTO outbox (event_type, ordering_key, payload)
		VALUES ('test.pair', '$key', '{\"key\": \"$key\", \"session\": 2}') RETURNING id" >"$T_DIR/s2.out"
	say "$key: session 2 committed (row $(head -1 "$T_DIR/s2.out")); session 1 (row $(head -1 "$T_DIR/s1.out")) commits ${gap}s later"
	wait "$s1" || fail "$key: session 1 failed: $(cat "$T_DIR/s1.out")"
	check "$key: session 1 inserted first (row id $(head -1 "$T_DIR/s1.out") < $(head -1 "$T_DIR/s2.out"))" \
		[ "$(head -1 "$T_DIR/s1.out")" -lt "$(head -1 "$T_DIR/s2.out")" ]
}

# check_pair KEY -- both rows published once, session 2 (committed first) first
check_pair() {
	local key=$1 order
	order=$(awk -F'\t' -v k="$key" '$1 == k { print $4 }' "$T_DIR/fifo.tsv" | jq -r .session | paste -sd' ')
	check_eq "$key: sessions in the order the FIFO queue delivered them (commit order: 2 then 1)" "2 1" "$order"
	check_eq "$key: MessageDeduplicationId = outbox row id" \
		"$(sql "SELECT string_agg(id::text || ' ' || (payload->>'session'), ' ' ORDER BY id) FROM outbox WHERE ordering_key = '$key'")" \
		"$(awk -F'\t' -v k="$key" '$1 == k { print $3, $4 }' "$T_DIR/fifo.tsv" | sort -n | while read -r d b; do echo "$d $(jq -r .session <<<"$b")"; done | paste -sd' ')"
}

# ---- a) ---------------------------------------------------------------------
pair pair-a 2
wait_until 15 "both pair-a rows sent" all_sent || true
drain_fifo 2 "$T_DIR/fifo.tsv" || die "reading the FIFO queue failed"
check_pair pair-a

# ---- b) ---------------------------------------------------------------------
sql "CREATE TABLE seq_ctr (k text PRIMARY KEY, seq integer NOT NULL DEFAULT 0);
INSERT INTO seq_ctr SELECT 'key-' || lpad(g::text, 2, '0'), 0 FROM generate_series(1, $KEYS) g;
CREATE FUNCTION ins_event(p_k text, p_w integer, p_insert_first boolean) RETURNS void
LANGUAGE plpgsql AS \$\$
DECLARE
	v_id bigint;
	v_seq integer;
BEGIN
	IF p_insert_first THEN
		-- the row's id before the lock: ids need not follow commits.
		-- (The row is written whole after it: relay.mode = "wal", see
		-- wal-order.sh, publishes a row as inserted.)
		v_id := nextval(pg_get_serial_sequence('outbox', 'id'));
		PERFORM pg_sleep(random() * 0.004);
		UPDATE seq_ctr SET seq = seq + 1 WHERE k = p_k RETURNING seq INTO v_seq;
		INSERT INTO outbox (id, event_type, ordering_key, payload)
			OVERRIDING SYSTEM VALUE
			VALUES (v_id, 'test.seq', p_k, jsonb_build_object('key', p_k,
				'seq', v_seq, 'writer', p_w, 'mode', 'insert-first'));
	ELSE
		UPDATE seq_ctr SET seq = seq + 1 WHERE k = p_k RETURNING seq INTO v_seq;
		PERFORM pg_sleep(random() * 0.004);
		INSERT INTO outbox (event_type, ordering_key, payload)
			VALUES ('test.seq', p_k, jsonb_build_object('key', p_k, 'seq', v_seq,
				'writer', p_w, 'mode', 'lock-first'));
	END IF;
	PERFORM pg_sleep(random() * 0.004);	-- commit a little later
END
\$\$" >/dev/null

t0=$(now_ms)
order_writers_run "$WRITERS" "$PER_KEY" "$KEYS" "$INSERT_FIRST"
TOTAL=$((KEYS * PER_KEY))
say "$TOTAL events written by $WRITERS writers in $(($(now_ms) - t0)) ms"
check_eq "events written" "$TOTAL" "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.seq'")"
check_eq "every key's counter reached $PER_KEY" "$KEYS" "$(sql "SELECT count(*) FROM seq_ctr WHERE seq = $PER_KEY")"
inv=$(order_inversions)
say "pairs of events of one key whose row ids are in the opposite of commit order: $inv"
[ "$INSERT_FIRST" != 1 ] || check "the writers produced id/commit-order inversions to get right ($inv)" [ "$inv" -gt 0 ]

wait_until 60 "all $TOTAL events sent" all_sent || true
say "all sent $(($(now_ms) - t0)) ms after the writers started"
drain_fifo "$TOTAL" "$T_DIR/fifo.tsv" || die "reading the FIFO queue failed"
check_eq "messages read from the FIFO queue" "$TOTAL" "$(wc -l <"$T_DIR/fifo.tsv")"
check_eq "outbox rows not 'sent'" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"

# per key: the counters in the order received
awk -F'\t' '{ print $4 }' "$T_DIR/fifo.tsv" | jq -r '"\(.key)\t\(.seq)"' >"$T_DIR/recv.tsv"
check_eq "messages whose MessageGroupId is not their key" 0 \
	"$(jq -Rr 'split("\t") | select(.[0] != (.[3] | fromjson | .key)) | .[0]' "$T_DIR/fifo.tsv" | wc -l)"
check "MessageDeduplicationIds are exactly the outbox row ids" cmp -s \
	<(awk -F'\t' '{ print $3 }' "$T_DIR/fifo.tsv" | sort -n) \
	<(sql "SELECT id FROM outbox WHERE event_type = 'test.seq' ORDER BY id")
awk -F'\t' -v n="$PER_KEY" '
	{ cnt[$1]++; if ($2 != cnt[$1]) { bad[$1]++; if (!first[$1]) first[$1] = "position " cnt[$1] " got seq " $2 } }
	END {
		keys = 0; out = 0; miss = 0
		for (k in cnt) { keys++; if (cnt[k] != n) miss++; if (bad[k]) { out++; if (out <= 5) ex = ex " " k ":" first[k] } }
		printf "%d %d %d%s\n", keys, miss, out, ex
	}' "$T_DIR/recv.tsv" >"$T_DIR/order.result"
read -r nkeys nmiss nout ex <"$T_DIR/order.result"
check_eq "keys seen on the FIFO queue" "$KEYS" "$nkeys"
check_eq "keys without exactly $PER_KEY messages" 0 "$nmiss"
check_eq "keys whose events arrived out of commit order" 0 "$nout"
[ "$nout" = 0 ] || say "first disorders: $ex"
if [ "$nout" != 0 ]; then
	say "out-of-order keys by the mode of the event that came too early:"
	sql "SELECT a.payload->>'mode' AS early_mode, count(*) FROM outbox a JOIN outbox b
		ON a.ordering_key = b.ordering_key AND a.sent_at < b.sent_at
		WHERE a.event_type = 'test.seq' AND (a.payload->>'seq')::int > (b.payload->>'seq')::int GROUP BY 1"
fi

# ---- d) ---------------------------------------------------------------------
# One transaction's backlog of two keys, 30 rows each: held at its
# commit behind each key's first row (outbox_stamp()), released one by
# one as each is sent, so every key's rows arrive in insert order and
# none is left held.
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.batch', 'batch-' || (g % 2), jsonb_build_object('key', 'batch-' || (g % 2), 'n', g)
	FROM generate_series(1, 60) g ORDER BY g % 2, g"
batch_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'test.batch' AND status = 'sent'")" = 60 ]; }
wait_until 30 "the batch's 60 rows sent" batch_sent || true
check_eq "d) the batch's rows sent, none left held" "60 0" \
	"$(sql "SELECT count(*) FILTER (WHERE status = 'sent') || ' ' || count(*) FILTER (WHERE held) FROM outbox WHERE event_type = 'test.batch'")"
drain_fifo 60 "$T_DIR/batch.tsv" || die "reading the FIFO queue failed"
for k in batch-0 batch-1; do
	check_eq "d) $k: its 30 rows in insert order on the FIFO queue" \
		"$(seq $((${k#batch-} == 0 ? 2 : 1)) 2 60 | paste -sd' ')" \
		"$(awk -F'\t' -v k="$k" '$1 == k { print $4 }' "$T_DIR/batch.tsv" | jq -r .n | paste -sd' ')"
done

# ---- c) ---------------------------------------------------------------------
if [ "$STRICT" != 1 ]; then
	say "SKIP c) (RELAY_ORDER_STRICT=0)"
	exit 0
fi
sql "UPDATE outbox_control SET paused = true, paused_at = now()" >/dev/null
sleep 1.2	# a claim that started before the pause has finished
pair pair-c 0.3
sleep 1.2
check_eq "pair-c: nothing published while the relays are paused" "pending pending" \
	"$(sql "SELECT string_agg(status, ' ') FROM outbox WHERE ordering_key = 'pair-c'")"
sql "UPDATE outbox_control SET paused = false, paused_at = NULL" >/dev/null
wait_until 15 "both pair-c rows sent" all_sent || true
drain_fifo 2 "$T_DIR/fifo.tsv" || die "reading the FIFO queue failed"
check_pair pair-c

check_eq "FIFO queue empty at the end" "0+0" \
	"$(sqs_attr "$SQS_ENDPOINT" "$FIFO_URL" ApproximateNumberOfMessages)+$(sqs_attr "$SQS_ENDPOINT" "$FIFO_URL" ApproximateNumberOfMessagesNotVisible)"
