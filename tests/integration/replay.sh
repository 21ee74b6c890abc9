#!/usr/bin/env bash
# replay.sh -- publishing sent rows again (outboxctl replay, POST
# /outbox/replay), to the webhook receiver (tests/lib/webhook-receiver.py).
#   1. 500 rows delivered (10 keys, two event types, created_at one second
#      apart from a fixed instant).
#   2. A replay without a filter is refused (admin API 400 {error,
#      message}, outboxctl exit 2), as are a time that is not RFC 3339,
#      an unknown filter, a range that ends before it starts, an
#      unknown destination (404), one that cannot be a name (400
#      bad_destination_name) and a query string (?dry_run=true); nothing
#      is recorded.
#   3. A dry run by event type and created_at range (outboxctl and the
#      admin API) counts what the database says and changes nothing.
#   4. The replay (outboxctl) delivers exactly the selected rows again:
#      the same webhook-ids, byte-identical bodies, every one marked
#      Outbox-Replay: 1, signed; per key in id order; nothing else sent
#      again; its record says total = done = the dry run's count;
#      outboxd_replayed_messages_total counts them and the sent outcome
#      does not.
#   5. A replay by ordering key through the admin API: 202, its progress
#      on GET /outbox/replays/ID, cancelling it once over is 409.
#   6. Live orders (POST /orders) while a replay of 20,000 rows runs at
#      relay.replay_rate: commit -> ack p50/p99 beside the same orders
#      with no replay; every live order is sent within 2 s.  Then the
#      replay is cancelled, and what it had put back still goes out.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/ops.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up
webhook_receiver_start

RATE=500
CONF=$T_DIR/outbox.conf
webhook_conf_write "$CONF" 2000 "workers = 2" "batch_size = 50" \
	"poll_interval = 200" "replay_rate = $RATE"
admin_conf "$CONF"
sed -i 's/^http { listen = \(.*\) workers = 1 }/http { listen = \1 workers = 2 }/' "$CONF"
outboxd_start "$CONF"
ctl() { "$T_ROOT/outboxctl" -c "$CONF" "$@"; }
jq_ok() { jq -e "$@" >/dev/null 2>&1; }
nrec() { wc -l <"$REC" | tr -d ' '; }
none_pending() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }

# ---- 1: 500 delivered rows ---------------------------------------------------
sql "INSERT INTO outbox (event_type, ordering_key, payload, created_at)
	SELECT CASE WHEN i % 2 = 1 THEN 'a.evt' ELSE 'b.evt' END, 'key-' || i % 10,
		jsonb_build_object('n', i, 'note', 'caf\u00e9'),
		timestamptz '2026-01-01T00:00:00Z' + i * interval '1 second'
	FROM generate_series(1, 500) i"
wait_until 40 "500 rows sent" none_pending || true
check_eq "1: rows sent" 500 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
wait_until 10 "500 deliveries recorded" eval '[ "$(nrec)" -ge 500 ]' || true
check_eq "1: deliveries" 500 "$(nrec)"
cp "$REC" "$T_DIR/first.jsonl"
scrape "$T_DIR/m0.txt"

# ---- 2: refused ------------------------------------------------------------------
admin POST /outbox/replay --data-binary '{}'
check_eq "2: admin API, no filter: 400" 400 "$HTTP_STATUS"
check "2: ... {error, message} saying a filter is needed: $HTTP_BODY" \
	jq_true '.error == "bad_request" and (.message | test("needs a filter"))' "$HTTP_BODY"
admin POST /outbox/replay --data-binary '{"dry_run": true}'
check_eq "2: admin API, a dry run alone: 400" 400 "$HTTP_STATUS"
admin POST /outbox/replay --data-binary '{"created_from": "2026-01-01 00:00:00"}'
check "2: a time that is not RFC 3339: 400 naming the rule: $HTTP_BODY" \
	jq_true '.error == "bad_request" and (.message | test("created_from must be an RFC 3339"))' "$HTTP_BODY"
admin POST /outbox/replay --data-binary '{"created_from": "2026-02-30T00:00:00Z"}'
check_eq "2: February 30th: 400" 400 "$HTTP_STATUS"
# RFC 3339 allows these; PostgreSQL's timestamptz does not: still the
# client's 400, never the database's 503.
admin POST /outbox/replay --data-binary '{"event_type": "x", "sent_to": "0000-01-01T00:00:00Z"}'
check_eq "2: the year 0000: 400" 400 "$HTTP_STATUS"
admin POST /outbox/replay --data-binary '{"event_type": "x", "sent_to": "1969-12-31T23:59:59-23:59"}'
check_eq "2: an offset of 23:59: 400" 400 "$HTTP_STATUS"
rc=0
ctl replay --event-type x --created-from 2026-01-01T00:00:00+20:00 --dry-run >/dev/null 2>"$T_DIR/ctl.err" || rc=$?
check_eq "2: outboxctl replay with an offset of 20:00: exit 2" 2 "$rc"
admin POST /outbox/replay --data-binary '{"type": "a.evt"}'
check "2: an unknown filter: 400: $HTTP_BODY" jq_true '.message | test("unknown filter")' "$HTTP_BODY"
admin POST /outbox/replay --data-binary '{"sent_from": "2026-01-02T00:00:00Z", "sent_to": "2026-01-01T00:00:00+01:00"}'
check "2: a range that ends before it starts: 400: $HTTP_BODY" jq_true '.message | test("sent_from must be before sent_to")' "$HTTP_BODY"
# A destination filter answers as a destination in a path does: 404 for
# one the configuration lacks, 400 bad_destination_name for one that
# cannot be a name (not echoed).
admin POST /outbox/replay --data-binary '{"destination": "nowhere"}'
check_eq "2: an unknown destination: 404" 404 "$HTTP_STATUS"
check "2: ... unknown_destination: $HTTP_BODY" jq_true '.error == "unknown_destination"' "$HTTP_BODY"
admin POST /outbox/replay --data-binary '{"destination": "bad name\u009b"}'
check_eq "2: a destination that cannot be a name: 400" 400 "$HTTP_STATUS"
check "2: ... bad_destination_name, the name not echoed: $HTTP_BODY" \
	jq_true '.error == "bad_destination_name" and (.message | test("bad name") | not)' "$HTTP_BODY"
# dry_run is a member of the body: as a query parameter it would be
# ignored and the replay run for real, so any query is refused.
admin POST '/outbox/replay?dry_run=true' --data-binary '{"event_type": "a.evt"}'
check_eq "2: POST /outbox/replay?dry_run=true: 400" 400 "$HTTP_STATUS"
check "2: ... says dry_run goes in the body: $HTTP_BODY" \
	jq_true '.error == "bad_request" and (.message | test("dry_run goes in the JSON body"))' "$HTTP_BODY"
rc=0
ctl replay >"$T_DIR/ctl.out" 2>"$T_DIR/ctl.err" || rc=$?
check_eq "2: outboxctl replay without a filter: exit 2" 2 "$rc"
check "2: ... and says a filter is needed" grep -q "a replay needs a filter" "$T_DIR/ctl.err"
rc=0
ctl replay --created-to yesterday >/dev/null 2>"$T_DIR/ctl.err" || rc=$?
check_eq "2: outboxctl replay --created-to yesterday: exit 2" 2 "$rc"
check_eq "2: nothing recorded" 0 "$(sql "SELECT count(*) FROM outbox_replays")"

# ---- 3: dry runs -------------------------------------------------------------
FROM=2026-01-01T00:01:00Z TO=2026-01-01T01:05:00+01:00	# 00:05:00Z
WANT=$(sql "SELECT count(*) FROM outbox WHERE event_type = 'a.evt' AND
	created_at >= '$FROM' AND created_at < '$TO'")
check_eq "3: the selection (odd n of 60..299)" 120 "$WANT"
rc=0
ctl replay --event-type a.evt --created-from "$FROM" --created-to "$TO" --dry-run --json >"$T_DIR/dry.json" || rc=$?
check_eq "3: outboxctl dry run: exit 0" 0 "$rc"
check_eq "3: outboxctl dry run: selected" "$WANT" "$(jq .selected "$T_DIR/dry.json")"
admin POST /outbox/replay --data-binary "{\"event_type\": \"a.evt\", \"created_from\": \"$FROM\", \"created_to\": \"$TO\", \"dry_run\": true}"
check_eq "3: admin API dry run: 200" 200 "$HTTP_STATUS"
check_eq "3: admin API dry run: selected, no replay" "$WANT null" "$(jq -r '"\(.selected) \(.replay)"' <<<"$HTTP_BODY")"
check_eq "3: the dry runs recorded nothing, changed no row" "0 500" \
	"$(sql "SELECT (SELECT count(*) FROM outbox_replays) || ' ' || count(*) FILTER (WHERE status = 'sent' AND replay IS NULL) FROM outbox")"

# ---- 4: the replay -----------------------------------------------------------
rc=0
ctl replay --event-type a.evt --created-from "$FROM" --created-to "$TO" >"$T_DIR/ctl.out" || rc=$?
check_eq "4: outboxctl replay: exit 0" 0 "$rc"
check "4: ... names replay 1: $(cat "$T_DIR/ctl.out")" grep -q "^replay 1: $WANT sent row(s)" "$T_DIR/ctl.out"
wait_until 20 "the replay's $WANT deliveries" eval '[ "$(nrec)" -ge $((500 + WANT)) ]' || true
wait_until 10 "replay 1 done" eval '[ "$(ctl replays 1 --json | jq -r .state)" = done ]' || true
sleep 0.5	# anything sent again by mistake would come now
tail -n +501 "$REC" >"$T_DIR/again.jsonl"
check_eq "4: deliveries after the replay" "$WANT" "$(wc -l <"$T_DIR/again.jsonl" | tr -d ' ')"
check_eq "4: exactly the selected rows, by webhook-id" \
	"$(sql "SELECT string_agg(id::text, ' ' ORDER BY id) FROM outbox WHERE event_type = 'a.evt' AND created_at >= '$FROM' AND created_at < '$TO'")" \
	"$(jq -r '.headers["webhook-id"]' "$T_DIR/again.jsonl" | sort -n | paste -sd' ')"
check "4: every one marked Outbox-Replay: 1 and signed" \
	jq_ok -s 'all(.headers["outbox-replay"] == "1" and .sig_ok)' "$T_DIR/again.jsonl"
check "4: no first delivery was marked" jq_ok -s 'all(.headers["outbox-replay"] == null)' "$T_DIR/first.jsonl"
check "4: each body byte-identical to its first delivery" jq_ok -n --slurpfile a "$T_DIR/first.jsonl" \
	--slurpfile b "$T_DIR/again.jsonl" '($a | map({key: .headers["webhook-id"], value: .body_sha256}) | from_entries) as $m |
	$b | all(.body_sha256 == $m[.headers["webhook-id"]])'
check "4: per key, the replayed rows arrived in id order" jq_ok -s '
	map({k: (.body | fromjson | .n % 10), id: (.headers["webhook-id"] | tonumber)}) | group_by(.k) |
	all(map(.id) as $ids | $ids == ($ids | sort))' "$T_DIR/again.jsonl"
check_eq "4: replay 1's record: total, done, pending, state" "$WANT $WANT 0 done" \
	"$(ctl replays 1 --json | jq -r '"\(.total) \(.done) \(.pending) \(.state)"')"
check_eq "4: the rows: sent again, replay 1, attempts 1" "$WANT" \
	"$(sql "SELECT count(*) FROM outbox WHERE replay = 1 AND status = 'sent' AND attempts = 1")"
check_eq "4: no other row touched" 0 "$(sql "SELECT count(*) FROM outbox WHERE replay IS NOT NULL AND NOT (event_type = 'a.evt' AND created_at >= '$FROM' AND created_at < '$TO')")"
check "4: outboxctl replays lists it" grep -qE "^1 +done +$WANT +$WANT" <(ctl replays)
scrape "$T_DIR/m1.txt"
check_eq "4: outboxd_replayed_messages_total counts them" "$WANT" \
	"$(delta "$T_DIR/m0.txt" "$T_DIR/m1.txt" 'outboxd_replayed_messages_total{destination="default"}')"
check_eq "4: ... and outboxd_published_messages_total sent does not" 0 \
	"$(delta "$T_DIR/m0.txt" "$T_DIR/m1.txt" 'outboxd_published_messages_total{destination="default",outcome="sent"}')"

# ---- 5: by key, through the admin API ----------------------------------------
n0=$(nrec)
admin POST /outbox/replay --data-binary '{"ordering_key": "key-7"}'
check_eq "5: admin API replay: 202" 202 "$HTTP_STATUS"
RID=$(jq -r .replay.id <<<"$HTTP_BODY")
check_eq "5: ... replay 2 of 50 rows, requested by the admin API" "2 50 true" \
	"$(jq -r '"\(.replay.id) \(.selected) \(.replay.requested_by | startswith("admin API 127.0.0.1:"))"' <<<"$HTTP_BODY")"
wait_until 15 "replay $RID done" eval 'admin GET /outbox/replays/$RID; jq_true ".state == \"done\"" "$HTTP_BODY"' || true
check_eq "5: GET /outbox/replays/$RID: state, total, done" "done 50 50" "$(jq -r '"\(.state) \(.total) \(.done)"' <<<"$HTTP_BODY")"
tail -n +$((n0 + 1)) "$REC" >"$T_DIR/key7.jsonl"
check "5: key-7's 50 rows again, in id order, marked 2" jq_ok -s --argjson ids \
	"$(sql "SELECT json_agg(id ORDER BY id) FROM outbox WHERE ordering_key = 'key-7'")" \
	'map(.headers["webhook-id"] | tonumber) == $ids and all(.headers["outbox-replay"] == "2")' "$T_DIR/key7.jsonl"
admin GET /outbox/replays
check_eq "5: GET /outbox/replays: newest first" "2 1" "$(jq -r '[.replays[].id] | join(" ")' <<<"$HTTP_BODY")"
admin POST /outbox/replays/$RID/cancel
check_eq "5: cancelling a replay that is over: 409" 409 "$HTTP_STATUS"
admin GET /outbox/replays/99
check_eq "5: an unknown replay: 404" 404 "$HTTP_STATUS"

# ---- 6: live orders during a replay of 20,000 rows ------------------------------
sql "INSERT INTO outbox (event_type, ordering_key, payload, status, sent_at, attempts)
	SELECT 'bulk.evt', 'bulk-' || i % 200, jsonb_build_object('bulk', i), 'sent', now(), 1
	FROM generate_series(1, 20000) i"
# live ORDERS: N orders 100 ms apart; their commit -> ack (ms) into FILE
live() {
	local n=$1 file=$2 i ids=()
	for i in $(seq 1 "$n"); do
		post_order "live-$i" 100
		[ "$HTTP_STATUS" = 201 ] && ids+=("'$(jq -r .id <<<"$HTTP_BODY")'")
		sleep 0.1
	done
	wait_until 10 "live orders sent" eval "[ \"\$(sql \"SELECT count(*) FROM outbox WHERE ordering_key IN ($(IFS=,; echo "${ids[*]}")) AND status = 'sent'\")\" = ${#ids[@]} ]" || true
	sql "SELECT round(extract(epoch FROM coalesce(sent_at, clock_timestamp()) - created_at) * 1000)
		FROM outbox WHERE ordering_key IN ($(IFS=,; echo "${ids[*]}"))" >"$file"
	[ "$(wc -l <"$file")" = "$n" ] || fail "6: $n live orders written (got $(wc -l <"$file"))"
}
pct() { sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END { i = int((NR * p + 99) / 100); print v[i < 1 ? 1 : i] }'; }
live 40 "$T_DIR/base.ms"
rc=0
ctl replay --event-type bulk.evt --json >"$T_DIR/bulk.json" || rc=$?
check_eq "6: replay of the 20,000 bulk rows recorded" "0 20000" "$rc $(jq .selected "$T_DIR/bulk.json")"
BID=$(jq .replay.id "$T_DIR/bulk.json")
sleep 1
live 40 "$T_DIR/during.ms"
moved=$(sql "SELECT done FROM outbox_replays WHERE id = $BID")
say "commit -> ack of 40 live orders: no replay p50 $(pct "$T_DIR/base.ms" 50) ms p99 $(pct "$T_DIR/base.ms" 99) ms;" \
	"during the replay ($moved rows put back so far at $RATE/s) p50 $(pct "$T_DIR/during.ms" 50) ms p99 $(pct "$T_DIR/during.ms" 99) ms"
between() { [ "$1" -gt "$2" ] && [ "$1" -lt "$3" ]; }
check "6: the replay was under way meanwhile ($moved rows back to pending)" between "$moved" 1000 20000
check "6: every live order sent within 2 s of its commit during the replay (max $(pct "$T_DIR/during.ms" 100) ms)" \
	[ "$(pct "$T_DIR/during.ms" 100)" -lt 2000 ]
rc=0
ctl replays "$BID" --cancel >"$T_DIR/ctl.out" || rc=$?
check_eq "6: outboxctl replays ID --cancel: exit 0" 0 "$rc"
wait_until 20 "the rows put back before the cancel sent" none_pending || true
check_eq "6: after the cancel: nothing left pending, the record cancelled" "0 cancelled" \
	"$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'") $(ctl replays "$BID" --json | jq -r .state)"
done_rows=$(sql "SELECT done FROM outbox_replays WHERE id = $BID")
check_eq "6: every row the cancelled replay put back was sent again" "$done_rows" \
	"$(sql "SELECT count(*) FROM outbox WHERE replay = $BID AND status = 'sent'")"
check_eq "6: no error in the log" 0 "$(grep -c 'level=error' "$OUTBOXD_LOG" || true)"
