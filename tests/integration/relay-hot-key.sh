#!/usr/bin/env bash
# relay-hot-key.sh -- a hot key: thousands of rows behind one ordering key
# whose head keeps failing.  Its later rows are held (outbox.held) by the
# relay that records the head's failure, so:
#   - rows of other keys keep flowing while the head backs off, and a
#     claim no longer steps over the hot key's rows (counted as probes of
#     outbox_key_idx in one claim, work, not time);
#   - the hot key's rows stay in order: none is sent before its head, and
#     once the head goes through they follow one by one in id order;
#   - a dead-lettered head holds its key's rows until a redrive (then they
#     follow it), and rows whose head was deleted by hand are released by
#     the retention pass (its log line says so);
#   - rows of one key written by one transaction are held from their
#     commit (outbox_stamp()), all but the first, before any relay runs,
#     and follow it one by one in order once it is sent.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

HOT=${HOT_ROWS:-400}
proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events \
	OB_RELAY_WORKERS=2 OB_BATCH_SIZE=50 OB_CONSUMER_WORKERS=0 \
	relay_conf_write "$T_DIR/outbox.conf" \
	"max_attempts = 1000" "backoff_base = 1000" "backoff_max = 2000"
. "$T_STACK/env"

# The hot key's head fails (a per-entry server error: retried with backoff)
# until the rule is lifted; hot2's head is refused for good (dead letter).
fault_ctl -X POST --data-binary '{"mode":"fail-entries","rules":[
	{"match":"hot-head","sender_fault":false,"code":"InternalError","message":"injected server error"},
	{"match":"dead-head","sender_fault":true,"code":"InvalidParameterValue","message":"injected sender fault"}]}' >/dev/null

# The hot key's rows one transaction each, as a service writes its events:
# none is held at its commit, the relay that records the head's failure
# holds them.
sql "DO \$\$ BEGIN FOR g IN 0..$HOT LOOP
	INSERT INTO outbox (event_type, ordering_key, payload)
	VALUES ('test.hot', 'hot', jsonb_build_object('seq', g,
		'tag', CASE WHEN g = 0 THEN 'hot-head' ELSE 'hot-row' END));
	COMMIT; END LOOP; END \$\$"
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.hot', 'hot2', jsonb_build_object('seq', g,
		'tag', CASE WHEN g = 0 THEN 'dead-head' ELSE 'hot2-row' END)
	FROM generate_series(0, 50) g"
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.hot', 'fresh-' || g, jsonb_build_object('seq', g, 'tag', 'fresh')
	FROM generate_series(1, 200) g"
# A backlog of one key in one transaction, behind nothing that fails.
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.hot', 'batch', jsonb_build_object('seq', g, 'tag', 'batch')
	FROM generate_series(1, 100) g"
check_eq "before any relay: the hot key's rows (a transaction each) are not held" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot' AND held")"
check_eq "  ... hot2's 50 rows behind its head in one transaction are" "50 false" \
	"$(sql "SELECT count(*) FILTER (WHERE held) || ' ' || bool_or(held) FILTER (WHERE payload->>'tag' = 'dead-head') FROM outbox WHERE ordering_key = 'hot2'")"
check_eq "  ... and the batch's 99 rows behind its first" "99 false" \
	"$(sql "SELECT count(*) FILTER (WHERE held) || ' ' || bool_or(held) FILTER (WHERE payload->>'seq' = '1') FROM outbox WHERE ordering_key = 'batch'")"
outboxd_start "$T_DIR/outbox.conf"

fresh_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'fresh-%' AND status = 'sent'")" = 200 ]; }
wait_until 20 "the 200 rows of fresh keys sent while the hot head fails" fresh_sent || true
check_eq "rows of fresh keys sent" 200 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'fresh-%' AND status = 'sent'")"
batch_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'batch' AND status = 'sent'")" = 100 ]; }
wait_until 30 "the batch's 100 rows sent" batch_sent || true
check_eq "the batch's rows sent, none left held" "100 0" \
	"$(sql "SELECT count(*) FILTER (WHERE status = 'sent') || ' ' || count(*) FILTER (WHERE held) FROM outbox WHERE ordering_key = 'batch'")"
check_eq "  ... one after the other in id order" 0 \
	"$(sql "SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY sent_at, id) AS prev
		FROM outbox WHERE ordering_key = 'batch') x WHERE prev > id")"
held_all() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot' AND held")" = "$HOT" ]; }
wait_until 15 "the hot key's $HOT later rows held" held_all || true
check_eq "the hot key's later rows are held" "$HOT" "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot' AND held")"
check_eq "  ... its head is not (it is retried)" "pending false" \
	"$(sql "SELECT status || ' ' || held FROM outbox WHERE ordering_key = 'hot' AND payload->>'tag' = 'hot-head'")"
check "  ... and has failed more than once" \
	[ "$(sql "SELECT attempts FROM outbox WHERE ordering_key = 'hot' AND payload->>'tag' = 'hot-head'")" -ge 2 ]
check_eq "no row of the hot key sent before its head" 0 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot' AND status = 'sent'")"
dead_held() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot2' AND held")" = 50 ]; }
wait_until 10 "hot2's 50 rows held behind its dead-lettered head" dead_held || true
check_eq "hot2's head is dead-lettered, its 50 rows held" "failed 50" \
	"$(sql "SELECT (SELECT status FROM outbox WHERE payload->>'tag' = 'dead-head') || ' ' ||
		(SELECT count(*) FROM outbox WHERE ordering_key = 'hot2' AND held)")"
# Rows that keep coming behind a dead-lettered head (a transaction each)
# are held from their commit: no claim steps over them either.
sql "DO \$\$ BEGIN FOR g IN 51..55 LOOP
	INSERT INTO outbox (event_type, ordering_key, payload)
	VALUES ('test.hot', 'hot2', jsonb_build_object('seq', g, 'tag', 'hot2-late'));
	COMMIT; END LOOP; END \$\$"
check_eq "  ... and the 5 written after it, a transaction each, held at their commit" 5 \
	"$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot2' AND payload->>'tag' = 'hot2-late' AND held")"

# Work, not time: with the hot key's rows out of the claims' index, one
# claim of 10 probes outbox_key_idx about once per row it takes, not once
# per row of the hot key (the claim-plan scenario's measure).  Fresh rows
# go in after the hot key's, so a claim that stepped over them would
# probe more than $HOT times.
outboxd_stop
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.hot', 'late-' || g, jsonb_build_object('seq', g, 'tag', 'late')
	FROM generate_series(1, 10) g"
# claim_probes SKIP -- one claim of 10 (p_skip SKIP), rolled back: "rows
# probes", the probes of outbox_key_idx counted in its own transaction
claim_probes() {
	psql -X -v ON_ERROR_STOP=1 -qAt -F ' ' <<SQL
BEGIN;
CREATE TEMP TABLE hot_claim_got AS
	SELECT count(*) AS n FROM outbox_claim(77, 1, 10, 'default', '$1');
SELECT n, pg_stat_get_xact_numscans('outbox_key_idx'::regclass) FROM hot_claim_got;
ROLLBACK;
SQL
}
read -r claimed probes <<<"$(claim_probes '{}')"
say "one claim of 10 behind $HOT held rows: $claimed claimed, $probes probes of outbox_key_idx"
check_eq "the claim took the 10 late rows" 10 "$claimed"
check "  ... with 10 to 40 probes of outbox_key_idx, not one per hot row ($probes)" \
	test "${probes:-99999}" -ge 10 -a "${probes:-99999}" -le 40
# The same claim through the path that leaves a destination (p_skip).
read -r claimed probes <<<"$(claim_probes '{nowhere}')"
check "  ... and so does a claim that leaves a destination ($claimed claimed, $probes probes)" \
	test "$claimed" = 10 -a "${probes:-99999}" -le 40

# The head goes through: the mark that sends it releases the next held
# row, and so on: they follow one by one, in order.  (hot2's head is
# dead-lettered already: its rule is not needed any more.)  Each
# SendMessageBatch through the Python proxy takes ~60 ms, hence only
# HOT_ROWS=400 rows by default: ~25 s.
fault_ctl -X POST --data-binary '{"mode":"pass"}' >/dev/null
outboxd_start "$T_DIR/outbox.conf"
hot_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot' AND status = 'sent'")" = $((HOT + 1)) ]; }
wait_until 60 "the hot key's $((HOT + 1)) rows sent after its head" hot_sent || true
say "hot key drain: $(sql "SELECT round(1000 * extract(epoch FROM max(sent_at) - min(sent_at))) || ' ms for ' || count(*) || ' rows; median gap ' || round((percentile_cont(0.5) WITHIN GROUP (ORDER BY g) * 1000)::numeric, 1) || ' ms' FROM (SELECT sent_at, extract(epoch FROM sent_at - lag(sent_at) OVER (ORDER BY sent_at)) AS g FROM outbox WHERE ordering_key = 'hot' AND status = 'sent') x")"
check_eq "the hot key's rows sent" $((HOT + 1)) "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot' AND status = 'sent'")"
check_eq "none left held" 0 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot' AND held")"
check_eq "sent one after the other in id order (sent_at order = id order)" 0 \
	"$(sql "SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY sent_at, id) AS prev
		FROM outbox WHERE ordering_key = 'hot') x WHERE prev > id")"
check_eq "  ... the head first" "hot-head" \
	"$(sql "SELECT payload->>'tag' FROM outbox WHERE ordering_key = 'hot' ORDER BY sent_at, id LIMIT 1")"
check_eq "the 10 late rows sent too" 10 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'late-%' AND status = 'sent'")"

# A redrive of the dead-lettered head releases its key's rows: they follow it.
dead=$(sql "SELECT id FROM outbox WHERE payload->>'tag' = 'dead-head'")
check "outboxctl redrive $dead" "$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" redrive "$dead"
hot2_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot2' AND status = 'sent'")" = 56 ]; }
wait_until 30 "hot2's head and its 55 rows sent after the redrive" hot2_sent || true
check_eq "hot2: rows sent after the redrive" 56 "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot2' AND status = 'sent'")"
check_eq "  ... the head first, then the rest in id order" 0 \
	"$(sql "SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY sent_at, id) AS prev
		FROM outbox WHERE ordering_key = 'hot2') x WHERE prev > id")"

# A head deleted by hand: the retention pass (5 s after a start) releases
# the rows it held.
outboxd_stop
fault_ctl -X POST --data-binary '{"mode":"fail-entries","rules":[
	{"match":"gone-head","sender_fault":true,"code":"InvalidParameterValue","message":"injected sender fault"}]}' >/dev/null
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'test.hot', 'hot3', jsonb_build_object('seq', g,
		'tag', CASE WHEN g = 0 THEN 'gone-head' ELSE 'hot3-row' END)
	FROM generate_series(0, 20) g"
outboxd_start "$T_DIR/outbox.conf"
hot3_held() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot3' AND held")" = 20 ]; }
wait_until 15 "hot3's 20 rows held behind its dead-lettered head" hot3_held || true
sql "DELETE FROM outbox WHERE payload->>'tag' = 'gone-head'" >/dev/null
outboxd_stop
# ... and an unheld row behind them (written for another key, re-keyed):
# it must not keep them held, nor they it.
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	VALUES ('test.hot', 'hot3-typo', '{\"seq\": 21, \"tag\": \"hot3-rekeyed\"}')" >/dev/null
sql "UPDATE outbox SET ordering_key = 'hot3' WHERE payload->>'tag' = 'hot3-rekeyed'" >/dev/null
check_eq "hot3: 20 rows held behind nothing, one unheld row behind them" "20 pending false" \
	"$(sql "SELECT (SELECT count(*) FROM outbox WHERE ordering_key = 'hot3' AND held) || ' ' ||
		(SELECT status || ' ' || held FROM outbox WHERE payload->>'tag' = 'hot3-rekeyed')")"
fault_ctl -X POST --data-binary '{"mode":"pass"}' >/dev/null
outboxd_start "$T_DIR/outbox.conf"
hot3_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot3' AND status = 'sent'")" = 21 ]; }
wait_until 30 "hot3's 20 rows released and sent, and the re-keyed one" hot3_sent || true
check_eq "hot3: rows sent after their head was deleted by hand (and the unheld one behind them)" 21 \
	"$(sql "SELECT count(*) FROM outbox WHERE ordering_key = 'hot3' AND status = 'sent'")"
check "  ... the retention pass says it released them" \
	grep -q 'retention: released 20 held row(s) whose head is gone' "$OUTBOXD_LOG"
check_eq "no outbox row left unsent" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
