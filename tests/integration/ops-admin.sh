#!/usr/bin/env bash
# ops-admin.sh -- the admin API and outboxctl on a running outboxd.
#   - no token -> 401 (WWW-Authenticate: Bearer), a wrong token -> 403,
#     both {"error","message"}; the token never appears in the log;
#   - rows made to fail for good (SQS answers each entry with a sender
#     fault, through the fault proxy) are listed by GET /outbox/failed
#     (paginated) and `outboxctl failed`, with attempts and last_error;
#   - once SQS works again, redrive (API by ids, API by event type,
#     outboxctl --all) brings them back and they are delivered (sent, and
#     fulfilled in DynamoDB); a second redrive finds nothing (exit 1);
#   - pause stops publishing (rows inserted while paused stay pending, no
#     attempt made), resume restarts it at once;
#   - `outboxctl status --json` parses and matches the database;
#   - outboxctl's exit codes: 3 on a database error, 78 on a bad file;
#   - log_format = json: every line is a JSON object with time, level,
#     role, pid, msg, and relay lines carry outbox_id.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
stack_up

proxy_start fault fault-proxy.py --upstream "$SQS_ENDPOINT"
FP=http://127.0.0.1:$PROXY_PORT
fault() { curl -sS "$FP/__fault" "$@"; }
# one row per SendMessageBatch, so the proxy can fail every entry
SQS_ENDPOINT=$FP QUEUE_URL=$FP/000000000000/order-events OB_BATCH_SIZE=1 \
	OB_POLL_INTERVAL=200 OB_EXTRA_TOP='log_format = "json"' \
	outbox_conf_write "$T_DIR/outbox.conf"
admin_conf "$T_DIR/outbox.conf"
. "$T_STACK/env"
CONF=$T_DIR/outbox.conf
outboxd_start "$CONF"
ctl() { "$T_ROOT/outboxctl" -c "$CONF" "$@"; }

# ---- authentication ------------------------------------------------------
admin_raw GET /outbox
check_eq "no token: 401" 401 "$HTTP_STATUS"
check "401 body is {error, message}: $HTTP_BODY" jq_true '.error == "unauthorized" and (.message | length > 0)' "$HTTP_BODY"
check "401 says WWW-Authenticate: Bearer" grep -qi '^WWW-Authenticate: Bearer' <(curl -s -D - -o /dev/null "$ADMIN_URL/outbox")
admin_raw GET /outbox -H "Authorization: Basic $(printf 'x:%s' "$ADMIN_TOKEN" | base64)"
check_eq "another scheme: 401" 401 "$HTTP_STATUS"
admin_raw GET /outbox -H "Authorization: Bearer ${ADMIN_TOKEN}x"
check_eq "a wrong token: 403" 403 "$HTTP_STATUS"
check "403 body is {error, message}: $HTTP_BODY" jq_true '.error == "forbidden" and (.message | length > 0)' "$HTTP_BODY"
admin_raw POST /outbox/redrive -H 'Authorization: Bearer wrong' --data-binary '{"all":true}'
check_eq "a wrong token on a change: 403" 403 "$HTTP_STATUS"
admin_raw GET /nope
check_eq "an unknown path without a token: 401 (nothing shown)" 401 "$HTTP_STATUS"
admin GET /outbox
check_eq "the right token: 200" 200 "$HTTP_STATUS"
admin GET /nope
check_eq "an unknown path with the token: 404" 404 "$HTTP_STATUS"
admin GET /relay/pause
check_eq "GET /relay/pause: 405" 405 "$HTTP_STATUS"
admin POST /outbox/redrive --data-binary '{"ids":"all"}'
check_eq "a bad redrive body: 400" 400 "$HTTP_STATUS"
check "400 body is {error, message}: $HTTP_BODY" jq_true '.error == "bad_request"' "$HTTP_BODY"
admin GET '/outbox/failed?limit=0'
check_eq "limit=0: 400" 400 "$HTTP_STATUS"
# A query parameter the route does not read is refused, not ignored.
admin GET '/outbox/failed?limit=4&bogus=1'
check_eq "GET /outbox/failed?bogus=1: 400" 400 "$HTTP_STATUS"
check "... says what the route takes, not echoing the name: $HTTP_BODY" \
	jq_true '.error == "bad_request" and (.message | test("limit and after_id")) and (.message | test("bogus") | not)' "$HTTP_BODY"
admin POST '/outbox/redrive?limit=abc' --data-binary '{"all":true}'
check_eq "POST /outbox/redrive?limit=abc: 400" 400 "$HTTP_STATUS"
admin GET '/outbox?'
check_eq "GET /outbox? (an empty query): 200" 200 "$HTTP_STATUS"
http GET /outbox
check_eq "the orders listener does not serve the admin API" 404 "$HTTP_STATUS"

# ---- rows made to fail -----------------------------------------------------
fault -X POST --data-binary '{"mode":"partial-batch","min_entries":1,"times":null,"sender_fault":true,"code":"InvalidParameterValue","message":"permanent (injected)"}' >/dev/null
NF=6
for i in $(seq 1 $NF); do
	post_order "fail-$i" "$i"
	[ "$HTTP_STATUS" = 201 ] || fail "POST /orders $i: $HTTP_STATUS"
done
all_failed() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")" = $NF ]; }
wait_until 20 "$NF rows failed" all_failed || true
check_eq "rows failed by the sender fault" $NF "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"
sql "SELECT id FROM outbox WHERE status = 'failed' ORDER BY id" >"$T_DIR/failed.db"

admin GET /outbox/failed
check_eq "GET /outbox/failed" 200 "$HTTP_STATUS"
jq -r '.rows[].id' <<<"$HTTP_BODY" >"$T_DIR/failed.api"
check "GET /outbox/failed lists exactly the failed rows" cmp -s "$T_DIR/failed.db" "$T_DIR/failed.api"
check "each row has event_type, ordering_key, attempts 1, last_error, created_at" \
	jq_true '[.rows[] | select(.event_type == "order.created" and (.ordering_key | length == 36) and .attempts == 1
		and (.last_error | test("InvalidParameterValue")) and (.created_at | type == "string"))] | length == 6' "$HTTP_BODY"
check "  ... and destination null (relay.default_destination's rows)" \
	jq_true '[.rows[] | select(has("destination") and .destination == null)] | length == 6' "$HTTP_BODY"
check "one page: next_after_id is null" jq_true '.next_after_id == null' "$HTTP_BODY"
admin GET '/outbox/failed?limit=4'
p1=$HTTP_BODY
check "page 1 of 4 rows, next_after_id = its last id" jq_true '(.rows | length) == 4 and .next_after_id == .rows[3].id' "$p1"
admin GET "/outbox/failed?limit=4&after_id=$(jq -r .next_after_id <<<"$p1")"
check "page 2: the other 2 rows, no next page" jq_true '(.rows | length) == 2 and .next_after_id == null' "$HTTP_BODY"
check_eq "pages 1 + 2 = every failed row" "$(tr '\n' ' ' <"$T_DIR/failed.db")" \
	"$( (jq -r '.rows[].id' <<<"$p1"; jq -r '.rows[].id' <<<"$HTTP_BODY") | tr '\n' ' ')"

rc=0
ctl failed >"$T_DIR/ctl.failed" || rc=$?
check_eq "outboxctl failed: exit 0 when rows are listed" 0 "$rc"
check_eq "outboxctl failed: a header and one line per row" $((NF + 1)) "$(wc -l <"$T_DIR/ctl.failed")"
check "outboxctl failed: a DESTINATION column, (default) on each row" \
	awk 'NR == 1 { ok = ($4 == "DESTINATION") } NR > 1 && $4 != "(default)" { ok = 0 } END { exit !ok }' "$T_DIR/ctl.failed"
check "outboxctl failed shows last_error" grep -q 'InvalidParameterValue' "$T_DIR/ctl.failed"
ctl failed --json >"$T_DIR/ctl.failed.json"
check "outboxctl failed --json: the same rows as the API" cmp -s "$T_DIR/failed.db" <(jq -r '.rows[].id' "$T_DIR/ctl.failed.json")

ctl status --json >"$T_DIR/status.json" || fail "outboxctl status --json exited $?"
check "outboxctl status --json parses" jq -e . "$T_DIR/status.json" >/dev/null
check_eq "status: counts match the database (pending/sent/failed)" \
	"$(sql "SELECT count(*) FILTER (WHERE status = 'pending') || ' ' || count(*) FILTER (WHERE status = 'sent') || ' ' || count(*) FILTER (WHERE status = 'failed') FROM outbox")" \
	"$(jq -r '"\(.counts.pending) \(.counts.sent) \(.counts.failed)"' "$T_DIR/status.json")"
check "status: backlog_by_key lists the failed rows' keys" jq_true '[.backlog_by_key[] | select(.failed == 1)] | length == 6' "$(cat "$T_DIR/status.json")"
check "status: one destination, the default, holding the failed rows" \
	jq_true '.destinations | length == 1 and .[0].name == "default" and .[0].sink == "sqs" and .[0].default and .[0].configured
		and .[0].failed == 6 and .[0].pending == 0 and (.[0].paused | not)' "$(cat "$T_DIR/status.json")"

# ---- redrive once the sink works -------------------------------------------
fault -X POST --data-binary '{"mode":"pass"}' >/dev/null
ids2=$(head -2 "$T_DIR/failed.db" | paste -sd,)
admin POST /outbox/redrive --data-binary "{\"ids\":[$ids2]}"
check_eq "redrive by ids: 200" 200 "$HTTP_STATUS"
check "redrive by ids: 2 rows, those ids: $HTTP_BODY" jq_true ".redriven == 2 and .ids == [$ids2]" "$HTTP_BODY"
two_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND id IN ($ids2)")" = 2 ]; }
wait_until 15 "the 2 redriven rows sent" two_sent || true
check_eq "the 2 redriven rows are sent" 2 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND id IN ($ids2)")"
check_eq "the other failed rows stay failed" $((NF - 2)) "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"
admin POST /outbox/redrive --data-binary '{"event_type":"no.such.event"}'
check "redrive by an unknown event type: 0 rows" jq_true '.redriven == 0' "$HTTP_BODY"
rc=0
ctl redrive --all >"$T_DIR/ctl.redrive" || rc=$?
check_eq "outboxctl redrive --all: exit 0" 0 "$rc"
check "outboxctl redrive --all: $(cat "$T_DIR/ctl.redrive")" grep -q "redriven $((NF - 2)) row" "$T_DIR/ctl.redrive"
all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" = $NF ]; }
wait_until 15 "every redriven row sent" all_sent || true
check_eq "every row is sent after the redrives" $NF "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
items() { [ "$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")" -ge $NF ]; }
wait_until 20 "the redriven orders fulfilled" items || true
check_eq "fulfillment items for the redriven orders" $NF "$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")"
rc=0
ctl redrive --all >/dev/null || rc=$?
check_eq "outboxctl redrive --all with nothing failed: exit 1" 1 "$rc"
rc=0
ctl failed >/dev/null || rc=$?
check_eq "outboxctl failed with nothing failed: exit 1" 1 "$rc"

# ---- pause and resume ------------------------------------------------------
admin POST /relay/pause
check "POST /relay/pause: paused, with a time: $HTTP_BODY" jq_true '.paused == true and (.paused_at | type == "string")' "$HTTP_BODY"
sends() { fault | jq '.stats.by_action.SendMessageBatch // 0'; }
before=$(sends)
NP=5
for i in $(seq 1 $NP); do post_order "paused-$i" "$i"; done
sleep 3	# many poll intervals (200 ms) and NOTIFYs: nothing may be claimed
check_eq "rows inserted while paused stay pending" $NP "$(sql "SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0 AND first_claimed_at IS NULL")"
check_eq "no SendMessageBatch while paused" "$before" "$(sends)"
ctl status --json >"$T_DIR/status2.json"
check "status says paused" jq_true '.paused == true' "$(cat "$T_DIR/status2.json")"
check_eq "status while paused: counts match the database" \
	"$(sql "SELECT count(*) FILTER (WHERE status = 'pending') || ' ' || count(*) FILTER (WHERE status = 'sent') || ' ' || count(*) FILTER (WHERE status = 'failed') || ' ' || count(*) FROM outbox")" \
	"$(jq -r '"\(.counts.pending) \(.counts.sent) \(.counts.failed) \(.total)"' "$T_DIR/status2.json")"
check "status: oldest pending age is a number > 2 s" jq_true '.oldest_pending_age_seconds > 2' "$(cat "$T_DIR/status2.json")"
sleep 1.1
scrape "$T_DIR/m.paused" || true
check_eq "metrics: outboxd_relay_paused" 1 "$(sample "$T_DIR/m.paused" outboxd_relay_paused)"
check_eq "metrics: outbox_rows{pending} while paused" $NP "$(sample "$T_DIR/m.paused" 'outboxd_outbox_rows{status="pending"}')"
t0=$(now_ms)
rc=0
ctl resume >/dev/null || rc=$?
check_eq "outboxctl resume: exit 0" 0 "$rc"
resumed() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")" = 0 ]; }
wait_until 10 "publishing to resume" resumed || true
check_eq "every paused row sent after resume" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'pending'")"
say "resume -> last paused row sent: $(($(now_ms) - t0)) ms"
ctl pause --json >"$T_DIR/pause.json"
check "outboxctl pause --json" jq_true '.paused == true' "$(cat "$T_DIR/pause.json")"
admin POST /relay/resume
check "POST /relay/resume: $HTTP_BODY" jq_true '.paused == false and .paused_at == null' "$HTTP_BODY"
admin GET /outbox
check "GET /outbox: counts match, not paused: $HTTP_BODY" \
	jq_true ".counts.sent == $((NF + NP)) and .counts.failed == 0 and .paused == false" "$HTTP_BODY"

# ---- outboxctl exit codes ---------------------------------------------------
sed "s|^database = .*|database = \"postgresql://postgres@127.0.0.1:$("$T_LIB/free-port" 1)/outboxd?connect_timeout=2\"|" "$CONF" >"$T_DIR/bad-db.conf"
rc=0
"$T_ROOT/outboxctl" -c "$T_DIR/bad-db.conf" status 2>"$T_DIR/ctl.err" || rc=$?
check_eq "outboxctl status with PostgreSQL unreachable: exit 3" 3 "$rc"
echo 'database = ' >"$T_DIR/broken.conf"
rc=0
"$T_ROOT/outboxctl" -c "$T_DIR/broken.conf" status 2>/dev/null || rc=$?
check_eq "outboxctl with a broken file: exit 78" 78 "$rc"
rc=0
ctl redrive 2>/dev/null || rc=$?
check_eq "outboxctl redrive without a selector: exit 2" 2 "$rc"

# ---- logs ------------------------------------------------------------------
check "the admin token never appears in the log" bash -c "! grep -qF '$ADMIN_TOKEN' '$OUTBOXD_LOG'"
bad=$(jq -c 'select((.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$") | not)
	or (.level | type) != "string" or (.role | type) != "string" or (.pid | type) != "number"
	or (.msg | type) != "string")' "$OUTBOXD_LOG" 2>&1 | head -3)
check "every log line is a JSON object with time (RFC 3339 UTC ms), level, role, pid, msg${bad:+: $bad}" [ -z "$bad" ]
check_eq "log lines that are not JSON" 0 "$(jq -R 'fromjson? // "bad" | select(. == "bad")' "$OUTBOXD_LOG" | wc -l)"
check "failed-publish lines carry outbox_id and ordering_key" \
	jq -e -s '[.[] | select(.msg | test("publish failed")) | select(.outbox_id and .ordering_key)] | length >= 6' "$OUTBOXD_LOG"
check "admin changes are logged with the peer" \
	jq -e -s '[.[] | select(.role == "admin" and (.msg | test("redrive|paused|resumed")) and .peer)] | length >= 4' "$OUTBOXD_LOG"
