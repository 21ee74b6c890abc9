#!/usr/bin/env bash
# webhook.sh -- relay.sink = "http": outbox events are POSTed to a webhook
# receiver (tests/lib/webhook-receiver.py) that checks every Standard
# Webhooks signature with its own code and answers scripted statuses.
#   1. 200: an order's event arrives once, signed with the configured
#      secret, with webhook-id = the outbox id, a fresh webhook-timestamp,
#      Content-Type, User-Agent and X-Outbox-Event-Type, the body = the
#      outbox payload byte for byte; the row is 'sent', attempts = 1.
#   2. 500 then 200: delivered twice in all, with the same webhook-id and
#      a byte-identical body; the row is 'sent' with attempts = 2.
#   3. always 400: the row is 'failed' after exactly one attempt, and
#      last_error names the 400 and the (sanitised) answer.
#   4. 429 with Retry-After: 1, then 200: the second attempt comes >= ~1 s
#      after the first (the backoff alone would be ~100 ms).
#   5. an answer slower than webhook.timeout, then 200: the timeout is
#      retried, the row ends 'sent' with attempts = 2.
#   6. every delivery answered 503 until six rows are dead-lettered: one
#      warning line for the outage, then "works again" with the count of
#      the lines held back.
#   7. SIGTERM while the receiver has answered two of three deliveries of
#      one chunk (204 and 500) and holds the third longer than half of
#      shutdown_timeout: the relay gives the third up then, says so,
#      records the two answers (one row sent, one attempt failed), exits 0
#      before the master's SIGKILL; after a restart the failed row is
#      retried and, once its lease has ended, the third delivered again.
# The secret never appears in outboxd's log.  Consumers are off (no AWS).
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

# a fresh whsec_ secret per run (24 random bytes, base64) and the receiver
webhook_receiver_start
HOOK_TIMEOUT=1000

cat >"$T_DIR/outbox.conf" <<CONF
# written by tests/integration/webhook.sh
database = "$DATABASE_URL"
log_level = "info"
shutdown_timeout = 5000

http {
	listen = "127.0.0.1:$HTTP_PORT"
	workers = 1
}

relay {
	workers = 1
	batch_size = 10
	poll_interval = 200
	sink = "http"
	max_attempts = 5
	backoff_base = 100
	backoff_max = 400
}

webhook {
	url = "$WH/hooks/outbox?src=test"
	secret = "$SECRET"
	timeout = $HOOK_TIMEOUT
}

consumer {
	workers = 0
}
CONF
outboxd_start "$T_DIR/outbox.conf"

# script ANSWERS_JSON [DEFAULT_JSON] -- what the receiver answers next
script() {
	curl -fsS -o /dev/null -X POST "$WH/__control" \
		--data-binary "{\"script\": $1, \"default\": ${2:-200}}" ||
		die "cannot script the webhook receiver"
}

# new_order NAME -- POST /orders; sets OID (order id) and XID (outbox id)
new_order() {
	post_order "$1" 1234
	[ "$HTTP_STATUS" = 201 ] || die "POST /orders answered $HTTP_STATUS: $HTTP_BODY"
	OID=$(jq -r .id <<<"$HTTP_BODY")
	XID=$(sql "SELECT id FROM outbox WHERE ordering_key = '$OID'")
	[ -n "$XID" ] || die "no outbox row for order $OID"
	say "$1: order $OID, outbox id $XID"
}

row() { sql "SELECT $2 FROM outbox WHERE id = $1"; }
row_is() { [ "$(row "$1" status)" = "$2" ]; }
# reqs ID -- the recorded requests of one webhook-id, as a JSON array
reqs() { jq -sc --arg id "$1" '[.[] | select(.headers["webhook-id"] == $id)]' "$REC"; }
nreqs() { jq length <<<"$(reqs "$1")"; }
payload_sha() { sql "SELECT encode(sha256(convert_to(payload::text, 'UTF8')), 'hex') FROM outbox WHERE id = $1"; }

# ---- 1. delivered, signed, with the headers ------------------------------
script '[]' 200
new_order wh-ok
wait_until 15 "row $XID sent" row_is "$XID" sent || true
check_eq "1: row status" sent "$(row "$XID" status)"
check_eq "1: attempts" 1 "$(row "$XID" attempts)"
R=$(reqs "$XID")
check_eq "1: requests for webhook-id $XID" 1 "$(jq length <<<"$R")"
check_eq "1: signature verifies with the configured secret" true "$(jq -r '.[0].sig_ok' <<<"$R")"
check_eq "1: method and path" "POST /hooks/outbox?src=test" "$(jq -r '.[0] | "\(.method) \(.path)"' <<<"$R")"
check_eq "1: Content-Type" application/json "$(jq -r '.[0].headers["content-type"]' <<<"$R")"
check_eq "1: User-Agent" "outboxd/$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$T_ROOT/config.h")" \
	"$(jq -r '.[0].headers["user-agent"]' <<<"$R")"
check_eq "1: X-Outbox-Event-Type" order.created "$(jq -r '.[0].headers["x-outbox-event-type"]' <<<"$R")"
check "1: webhook-timestamp is unix seconds within 30 s of arrival (skew $(jq -r '.[0].ts_skew' <<<"$R") s)" \
	jq_true '.[0] | (.headers["webhook-timestamp"] | test("^[0-9]+$")) and .ts_skew < 30 and .ts_skew > -30' "$R"
check_eq "1: webhook-signature form" ok \
	"$(jq -r '.[0].headers["webhook-signature"] | if test("^v1,[A-Za-z0-9+/]{43}=$") then "ok" else . end' <<<"$R")"
check_eq "1: body = the outbox payload byte for byte (sha256)" "$(payload_sha "$XID")" \
	"$(jq -r '.[0].body_sha256' <<<"$R")"
check_eq "1: body carries the order id" "$OID" "$(jq -r '.[0].body | fromjson | .orderId' <<<"$R")"

# ---- 2. 500 then 200 ------------------------------------------------------
script '[{"status": 500, "body": "upstream broke"}]' 200
new_order wh-500
wait_until 20 "row $XID sent after a 500" row_is "$XID" sent || true
check_eq "2: row status" sent "$(row "$XID" status)"
check_eq "2: attempts" 2 "$(row "$XID" attempts)"
R=$(reqs "$XID")
check_eq "2: deliveries in all (500, 200)" "500 200" "$(jq -r 'map(.status | tostring) | join(" ")' <<<"$R")"
check_eq "2: distinct bodies over the attempts" 1 "$(jq '[.[].body_b64] | unique | length' <<<"$R")"
check_eq "2: body = the outbox payload" "$(payload_sha "$XID")" "$(jq -r '.[-1].body_sha256' <<<"$R")"
check_eq "2: every attempt's signature verifies" true "$(jq 'all(.sig_ok)' <<<"$R")"
gap500=$(jq '((.[1].t - .[0].t) * 1000 | round)' <<<"$R")
say "2: retry after a 500 came $gap500 ms after the first attempt (backoff_base 100, poll 200)"

# ---- 3. 400: failed at once ----------------------------------------------
# the answer holds a newline, a tab, a control byte and UTF-8: last_error
# keeps it as printable ASCII, and only the first 200 bytes
long=$(printf 'x%.0s' $(seq 1 300))
script '[]' "{\"status\": 400, \"body\": \"bad event\\nline two\\t\\u0001 caf\\u00e9 $long\"}"
new_order wh-400
wait_until 15 "row $XID failed" row_is "$XID" failed || true
sleep 1	# ten times backoff_base: time enough for a retry that must not come
check_eq "3: row status" failed "$(row "$XID" status)"
check_eq "3: attempts" 1 "$(row "$XID" attempts)"
check_eq "3: requests for webhook-id $XID" 1 "$(nreqs "$XID")"
err=$(row "$XID" last_error)
say "3: last_error: $err"
check "3: last_error names the 400" grep -q 'HTTP 400' <<<"$err"
check "3: last_error carries the receiver's answer, sanitised" grep -q 'bad event line two ? caf?? xxx' <<<"$err"
check "3: last_error is printable ASCII and at most the first 200 bytes of the answer" \
	jq_true '(test("^[ -~]*$")) and (length <= 220)' "$(jq -Rn --arg e "$err" '$e')"

# ---- 4. 429 with Retry-After: 1 ------------------------------------------
script '[{"status": 429, "headers": {"Retry-After": "1"}, "body": "slow down"}]' 200
new_order wh-429
wait_until 20 "row $XID sent after a 429" row_is "$XID" sent || true
check_eq "4: row status" sent "$(row "$XID" status)"
check_eq "4: attempts" 2 "$(row "$XID" attempts)"
R=$(reqs "$XID")
check_eq "4: deliveries (429, 200)" "429 200" "$(jq -r 'map(.status | tostring) | join(" ")' <<<"$R")"
gap429=$(jq '((.[1].t - .[0].t) * 1000 | round)' <<<"$R")
say "4: retry after 429 + Retry-After: 1 came $gap429 ms after the first attempt"
check "4: second attempt not earlier than ~1 s after the first ($gap429 ms >= 950)" [ "${gap429:-0}" -ge 950 ]
check "4: and not much later either ($gap429 ms < 3000)" [ "${gap429:-99999}" -lt 3000 ]
check_eq "4: same webhook-id and body on both" 1 "$(jq '[.[] | [.headers["webhook-id"], .body_b64]] | unique | length' <<<"$R")"

# ---- 5. a timeout is retried ----------------------------------------------
script "[{\"status\": 200, \"delay_ms\": $((HOOK_TIMEOUT + 1500))}]" 200
new_order wh-timeout
wait_until 20 "row $XID sent after a timeout" row_is "$XID" sent || true
check_eq "5: row status" sent "$(row "$XID" status)"
check_eq "5: attempts" 2 "$(row "$XID" attempts)"
check_eq "5: requests for webhook-id $XID" 2 "$(nreqs "$XID")"
check "5: the timeout was logged as a retry" \
	grep -Eq 'webhook: 1 of 1 deliveries failed \(1 to retry, 0 rejected\).*(timed out|Timeout)' "$OUTBOXD_LOG"

# ---- over all -------------------------------------------------------------
# one warning per failed publish call that follows a delivery (500, 400,
# timeout); the 429 came after the 400 with none between, within 10 s: held
# back, and counted when the 200 after it came
check_eq "warnings 'webhook: N of M deliveries failed' in the log" 3 \
	"$(grep -c 'webhook: 1 of 1 deliveries failed' "$OUTBOXD_LOG" || true)"
check "the 429's warning counted in 'works again', with the destination" \
	grep -q 'msg="webhook delivery works again; 1 more failure line(s) were not logged".* destination=default' "$OUTBOXD_LOG"
check_eq "no request with a bad signature" 0 "$(jq -s 'map(select(.sig_ok | not)) | length' "$REC")"
check_eq "outbox rows sent / failed / pending" "4/1/0" \
	"$(sql "SELECT count(*) FILTER (WHERE status = 'sent') || '/' || count(*) FILTER (WHERE status = 'failed') || '/' || count(*) FILTER (WHERE status = 'pending') FROM outbox")"
# ---- 6. an outage: a warning, not one per failed call ---------------------
# Every delivery fails for a while (503): the warning is written once, the
# failed calls after it within LOG_LIMIT_MS (10 s) only counted, and the
# first delivery that works says how many were held back.
before=$(grep -c 'deliveries failed' "$OUTBOXD_LOG" || true)
n503=$(jq -s 'map(select(.status == 503)) | length' "$REC")
script '[]' 503
for i in 1 2 3 4 5 6; do
	post_order "wh-outage-$i" 1
	sleep 0.3
done
outage() { sql "SELECT count(*) FROM outbox o JOIN orders r ON r.id::text = o.ordering_key
	WHERE r.customer_id LIKE 'wh-outage-%' AND o.status = '$1'"; }
outage_over() { [ "$(outage failed)" = 6 ]; }
wait_until 20 "the outage's rows dead-lettered (max_attempts 5)" outage_over || true
check_eq "6: the outage's rows failed after max_attempts" 6 "$(outage failed)"
calls=$(($(jq -s 'map(select(.status == 503)) | length' "$REC") - n503))
lines=$(($(grep -c 'deliveries failed' "$OUTBOXD_LOG" || true) - before))
say "6: $calls deliveries answered 503, $lines warning line(s)"
check "6: every row tried 5 times ($calls deliveries answered 503)" [ "$calls" -ge 30 ]
check_eq "6: one warning for the outage" 1 "$lines"
script '[]' 200
new_order wh-after-outage
wait_until 15 "row $XID sent after the outage" row_is "$XID" sent || true
check_eq "6: delivered after the outage" sent "$(row "$XID" status)"
check "6: the end of the outage is logged with the lines held back" \
	grep -Eq 'msg="webhook delivery works again; [0-9]+ more failure line\(s\) were not logged"' "$OUTBOXD_LOG"

key=${SECRET#whsec_}
if grep -qF -e "$key" "$OUTBOXD_LOG"; then
	fail "the webhook secret appears in outboxd's log"
else
	pass "the webhook secret is not in outboxd's log"
fi
echo "TIMING webhook retry_after_500_ms=$gap500 retry_after_429_ra1_ms=$gap429"

# ---- 7. a stop while the receiver does not answer -----------------------------
# A delivery may take webhook.timeout (10 s by default) before it times out,
# as long as the default shutdown_timeout.  Here shutdown_timeout is 2000:
# the relay gives up at 1000 ms, before the deliveries' own timeout (3000);
# the lease must be at least twice that timeout.
outboxd_stop
sed -e 's/^shutdown_timeout = .*/shutdown_timeout = 2000/' \
	-e "s/^\ttimeout = $HOOK_TIMEOUT\$/\ttimeout = 3000/" \
	-e 's/^\tmax_attempts = 5$/\tmax_attempts = 5\n\tlease = 6000/' \
	"$T_DIR/outbox.conf" >"$T_DIR/outbox-stop.conf"
outboxd_start "$T_DIR/outbox-stop.conf" stop
M=$(proc_pid "$OUTBOXD_PIDFILE")
script '[204, 500]' '{"status": 204, "delay_ms": 20000}'
before=$(wc -l <"$REC")
sql "INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'order.created', 'stop' || i, json_build_object('n', i) FROM generate_series(1, 3) i"
arrived() { [ "$(wc -l <"$REC")" -ge $((before + 3)) ]; }
check "7: the 3 rows' deliveries reached the receiver" wait_until 10 "3 deliveries" arrived
stop_before_kill "7:" 2000 "relay 1" 1 "the receiver"
check "7: the relay said what it gave up, and when" \
	grep -qE 'role=relay\.1 .*msg="stopping with 1 webhook deliveries still unanswered 1000 ms after the stop signal: their rows are published again when their lease ends \(relay.lease 6000 ms\); the 2 answered row\(s\) of the same requests are recorded"' "$OUTBOXD_LOG"
check_eq "7: the delivered row marked sent by the stopped relay" 1 \
	"$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'stop%' AND status = 'sent'")"
check_eq "7: the row answered 500 recorded as a failed attempt, to retry" 1 \
	"$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'stop%' AND status = 'pending' AND claim IS NULL AND attempts = 1 AND last_error LIKE 'webhook HTTP 500%'")"
script '[]' 204
outboxd_start "$T_DIR/outbox-stop.conf" stop2
stop_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'stop%' AND status = 'sent'")" = 3 ]; }
wait_until 20 "the 3 given-up rows sent after their lease" stop_sent || true
check_eq "7: given-up rows sent after the restart" 3 \
	"$(sql "SELECT count(*) FROM outbox WHERE ordering_key LIKE 'stop%' AND status = 'sent'")"
check_eq "7: deliveries of them (three, the retry of the 500, the given-up one after its lease)" 5 \
	"$(( $(wc -l <"$REC") - before ))"
