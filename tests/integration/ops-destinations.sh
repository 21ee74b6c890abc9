#!/usr/bin/env bash
# ops-destinations.sh -- operations by destination, with two of them: the
# SQS queue of the sqs {} section (the destination "default", and the
# default) and a webhook, destination "hooks" (the webhook receiver).
# Rows are written by psql naming their destination, orders by POST
# /orders (destination NULL: the default).
#   - metrics by destination agree with the database: published sent per
#     destination, outbox rows pending/failed per destination, a row
#     naming a destination outbox.conf lacks counted under "(other)" (no
#     series of its own), a paused destination's gauge;
#   - outboxctl pause hooks: its rows stay pending, unattempted, while the
#     default's keep flowing; the admin API's resume: they arrive;
#   - the default paused (admin API): POST /orders rows -- the HTTP
#     workers' handoff, which writes a row already claimed -- stay
#     pending and unclaimed, hooks rows still flow; outboxctl resume
#     default: they are published;
#   - /readyz with the webhook down: 200, "hooks" failing and named in
#     the warning, the default ok; back to no warning once it works;
#   - redrive of one destination: outboxctl redrive --destination hooks
#     takes only hooks' failed rows (the default's failed row stays as it
#     was), the API's POST /destinations/default/redrive only the
#     default's;
#   - names in URLs and operands: 400 bad_destination_name, 404
#     unknown_destination, 405, outboxctl exit 1 and 2;
#   - the webhook secret is in no log line, metric or admin answer.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/ops.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
command -v promtool >/dev/null || die "promtool missing (Debian package prometheus; tests/lib/deps.sh installs it)"
stack_up
webhook_receiver_start
hook_ctl() { curl -sS -o /dev/null -X POST "$WH/__control" --data-binary "$1"; }

UNREADY=2000
CONF=$T_DIR/outbox.conf
OB_HTTP_WORKERS=1 OB_CONSUMER_WORKERS=0 OB_POLL_INTERVAL=200 relay_conf_write "$CONF" \
	"unready_after = $UNREADY" "backoff_base = 100" "backoff_max = 400" \
	"max_attempts = 1000" "max_message_size = 4096"
cat >>"$CONF" <<CONF

destination hooks {
	sink = "http"
	url = "$WH/hooks"
	secret = "$SECRET"
	timeout = 1000
}
CONF
admin_conf "$CONF"
outboxd_start "$CONF"
ctl() { "$T_ROOT/outboxctl" -c "$CONF" "$@"; }
M=$T_DIR/metrics

# ins DESTINATION|NULL N [PAYLOAD] -- N rows by psql; prints their ids
ins() {
	local dest=$1 n=$2 payload=${3:-}
	[ "$dest" = NULL ] || dest="'$dest'"
	sql "INSERT INTO outbox (event_type, ordering_key, payload, destination, headers)
	     SELECT 'test.event', 'k-' || g || '-' || clock_timestamp(),
	            ${payload:-jsonb_build_object('n', g)}, $dest, '{\"x-trace\": \"t-1\"}'
	     FROM generate_series(1, $n) g RETURNING id" | paste -sd,
}
# count WHERE -- rows of the outbox
count() { sql "SELECT count(*) FROM outbox WHERE $1"; }
hooks_got() { jq -s '[.[] | select(.path == "/hooks")] | length' "$REC" 2>/dev/null || echo 0; }
in_queue() { sqs_attr "$SQS_ENDPOINT" "$QUEUE_URL" ApproximateNumberOfMessages; }
# db_vs_metrics FILE -- rows by destination, as the database says them
# (NULL is the default's, any other name the other's), as FILE says them
db_rows() {
	sql "SELECT d, s, count(*) FROM (SELECT CASE WHEN coalesce(destination, 'default') IN ('default', 'hooks')
	     THEN coalesce(destination, 'default') ELSE '(other)' END AS d, status AS s FROM outbox
	     WHERE status <> 'sent') x GROUP BY 1, 2 ORDER BY d COLLATE \"C\", s COLLATE \"C\"" | tr '|' ' '
}
metric_rows() {
	awk '/^outboxd_outbox_rows\{/ && $2 != "0" {
		match($1, /destination="[^"]*"/); d = substr($1, RSTART + 13, RLENGTH - 14)
		match($1, /status="[^"]*"/); s = substr($1, RSTART + 8, RLENGTH - 9)
		print d, s, $2 }' "$1" | LC_ALL=C sort
}
fresh_scrape() { sleep 1.1; scrape "$1" || die "GET /metrics failed"; }

# ---- both destinations flow; metrics by destination ----------------------
scrape "$M.0" || die "first scrape failed"
ins NULL 5 >/dev/null
ins hooks 5 >/dev/null
typo=$(ins hookz 1)
wait_until 20 "the first rows published" eval '[ "$(count "status = '\''pending'\''")" = 0 ]' || true
check_eq "the default's 5 rows and hooks' 5 are sent" 10 "$(count "status = 'sent'")"
check_eq "5 messages in the SQS queue" 5 "$(in_queue)"
check_eq "5 deliveries at the webhook" 5 "$(hooks_got)"
check "hooks deliveries carry the row's header" jq -e -s '[.[] | select(.path == "/hooks" and .headers["x-trace"] == "t-1" and .sig_ok)] | length == 5' "$REC"
check_eq "the row naming \"hookz\" is failed" failed "$(sql "SELECT status FROM outbox WHERE id = $typo")"
check "  ... saying it is not in outbox.conf" grep -q 'destination "hookz" is not in outbox.conf' <<<"$(sql "SELECT last_error FROM outbox WHERE id = $typo")"
check "  ... and its log line says destination=\"(other)\", as the metrics" \
	grep -qE "publish failed after 1 attempt\\(s\\) \\(permanent error\\): destination \\\\\"hookz\\\\\" is not in outbox.conf.* outbox_id=$typo .*destination=\"?\\(other\\)" "$OUTBOXD_LOG"
admin GET /outbox/failed
check "GET /outbox/failed names the row's destination (hookz)" \
	jq_true "[.rows[] | select(.id == $typo and .destination == \"hookz\")] | length == 1" "$HTTP_BODY"
ctl failed >"$T_DIR/ctl.failed" || true
check "outboxctl failed: hookz in its DESTINATION column" \
	awk -v id="$typo" '$1 == id && / hookz / { f = 1 } END { exit !f }' "$T_DIR/ctl.failed"
fresh_scrape "$M.1"
check_eq "published sent {destination=default,sink=sqs}" 5 \
	"$(delta "$M.0" "$M.1" 'outboxd_published_messages_total{destination="default",sink="sqs",outcome="sent"}')"
check_eq "published sent {destination=hooks,sink=http}" 5 \
	"$(delta "$M.0" "$M.1" 'outboxd_published_messages_total{destination="hooks",sink="http",outcome="sent"}')"
check_eq "published failed {destination=(other)}: the hookz row" 1 \
	"$(delta "$M.0" "$M.1" 'outboxd_published_messages_total{destination="(other)",sink="none",outcome="failed"}')"
check_eq "publish latency observations {destination=hooks}" 5 \
	"$(delta "$M.0" "$M.1" 'outboxd_publish_latency_seconds_count{destination="hooks",sink="http"}')"
check "sink duration observed {destination=hooks} ($(sample "$M.1" 'outboxd_sink_duration_seconds_count{destination="hooks"}'))" \
	[ "$(sample "$M.1" 'outboxd_sink_duration_seconds_count{destination="hooks"}')" -ge 1 ]
check_eq "outbox rows by destination: metrics = database" "$(db_rows)" "$(metric_rows "$M.1")"
check_eq "outbox_rows{(other),failed}" 1 "$(sample "$M.1" 'outboxd_outbox_rows{destination="(other)",status="failed"}')"
check "no series for the name in the row (hookz)" bash -c "! grep -q hookz '$M.1'"
check "the exposition passes promtool" promtool_ok "$M.1"

# ---- pause one destination ---------------------------------------------
rc=0
ctl pause hooks >"$T_DIR/ctl.pause" || rc=$?
check_eq "outboxctl pause hooks: exit 0" 0 "$rc"
check "  ... says so: $(cat "$T_DIR/ctl.pause")" grep -q '^destination hooks paused since' "$T_DIR/ctl.pause"
check_eq "hooks is in outbox_paused_destinations" hooks "$(sql "SELECT destination FROM outbox_paused_destinations")"
got0=$(hooks_got)
held=$(ins hooks 3)
ins NULL 3 >/dev/null
wait_until 10 "the default's rows sent while hooks is paused" eval '[ "$(in_queue)" = 8 ]' || true
check_eq "the default's rows keep flowing (SQS queue: 8)" 8 "$(in_queue)"
sleep 2	# ten poll intervals and a NOTIFY each: nothing of hooks may go
check_eq "hooks rows stay pending, never claimed" 3 "$(count "id IN ($held) AND status = 'pending' AND attempts = 0 AND first_claimed_at IS NULL")"
check_eq "no delivery at the webhook while paused" "$got0" "$(hooks_got)"
fresh_scrape "$M.2"
check_eq "outboxd_destination_paused{hooks}" 1 "$(sample "$M.2" 'outboxd_destination_paused{destination="hooks"}')"
check_eq "outboxd_destination_paused{default}" 0 "$(sample "$M.2" 'outboxd_destination_paused{destination="default"}')"
check_eq "outboxd_relay_paused (the global switch)" 0 "$(sample "$M.2" 'outboxd_relay_paused')"
check_eq "outbox rows by destination while paused: metrics = database" "$(db_rows)" "$(metric_rows "$M.2")"
check "oldest pending age {hooks} > 2 s ($(sample "$M.2" 'outboxd_outbox_oldest_pending_age_seconds{destination="hooks"}'))" \
	awk -v a="$(sample "$M.2" 'outboxd_outbox_oldest_pending_age_seconds{destination="hooks"}')" 'BEGIN { exit !(a > 2) }'
admin GET /destinations/hooks
check_eq "GET /destinations/hooks" 200 "$HTTP_STATUS"
check "  ... paused, 3 pending, its sink: $HTTP_BODY" \
	jq_true '.name == "hooks" and .sink == "http" and .paused and (.paused_at | type == "string") and .pending == 3
		and .oldest_pending_age_seconds > 2 and .configured and (.default | not)' "$HTTP_BODY"
ctl status --json >"$T_DIR/status.json"
# outbox.conf's order: the destination sections, then the one sqs {} makes
check "outboxctl status --json: hooks, default, then hookz (not configured)" \
	jq -e '[.destinations[] | .name] == ["hooks", "default", "hookz"] and .destinations[2].configured == false
		and .destinations[2].failed == 1 and .destinations[1].default and .paused == false' "$T_DIR/status.json"
ctl status >"$T_DIR/status.txt"
check "outboxctl status: hooks PAUSED, hookz not in the configuration" \
	bash -c "grep -qE '^  hooks +http +3 +0 .*PAUSED' '$T_DIR/status.txt' && grep -q 'hookz.*NOT IN THE CONFIGURATION' '$T_DIR/status.txt'"
http GET /readyz
check "/readyz while hooks is paused: 200, hooks paused: $HTTP_BODY" \
	jq_true '.status == "ready" and ([.destinations[] | select(.name == "hooks") | .state] == ["paused"])' "$HTTP_BODY"

admin POST /destinations/hooks/resume
check "POST /destinations/hooks/resume: $HTTP_BODY" jq_true '.destination == "hooks" and .paused == false and .paused_at == null' "$HTTP_BODY"
wait_until 10 "hooks rows delivered after the resume" eval '[ "$(count "id IN ($held) AND status = '\''sent'\''")" = 3 ]' || true
check_eq "hooks rows sent after the resume" 3 "$(count "id IN ($held) AND status = 'sent'")"
check_eq "  ... and delivered" $((got0 + 3)) "$(hooks_got)"
check_eq "no paused destination left" 0 "$(sql "SELECT count(*) FROM outbox_paused_destinations")"

# ---- the default paused: POST /orders and the handoff -----------------
fresh_scrape "$M.3"
sleep 0.5
post_order before-pause 100
check_eq "POST /orders" 201 "$HTTP_STATUS"
wait_until 10 "the order's row sent" eval '[ "$(in_queue)" = 9 ]' || true
fresh_scrape "$M.4"
check "the HTTP worker handed the order's row to relay 1 ($(delta "$M.3" "$M.4" outboxd_handoff_rows_total))" \
	[ "$(delta "$M.3" "$M.4" outboxd_handoff_rows_total)" -ge 1 ]
admin POST /destinations/default/pause
check "POST /destinations/default/pause: $HTTP_BODY" jq_true '.destination == "default" and .paused and (.paused_at | type == "string")' "$HTTP_BODY"
for i in 1 2 3; do
	sleep 0.3	# each one after a quiet spell: written claimed, if it could
	post_order "while-paused-$i" "$i"
	[ "$HTTP_STATUS" = 201 ] || fail "POST /orders while the default is paused: $HTTP_STATUS"
done
flow=$(ins hooks 2)
wait_until 10 "hooks rows sent while the default is paused" eval '[ "$(count "id IN ($flow) AND status = '\''sent'\''")" = 2 ]' || true
check_eq "hooks rows keep flowing while the default is paused" 2 "$(count "id IN ($flow) AND status = 'sent'")"
sleep 1.5
check_eq "the orders' rows stay pending, unclaimed" 3 \
	"$(count "event_type = 'order.created' AND status = 'pending' AND claim IS NULL AND first_claimed_at IS NULL")"
check_eq "no SQS message for them" 9 "$(in_queue)"
fresh_scrape "$M.p"
check_eq "outbox rows by destination, the default paused: metrics = database" "$(db_rows)" "$(metric_rows "$M.p")"
check_eq "  ... the orders' rows (destination NULL) are the default's" 3 \
	"$(sample "$M.p" 'outboxd_outbox_rows{destination="default",status="pending"}')"
check_eq "outboxd_destination_paused{default}" 1 "$(sample "$M.p" 'outboxd_destination_paused{destination="default"}')"
rc=0
ctl resume default >"$T_DIR/ctl.resume" || rc=$?
check_eq "outboxctl resume default: exit 0" 0 "$rc"
wait_until 10 "the orders published after the resume" eval '[ "$(in_queue)" = 12 ]' || true
check_eq "the orders' rows published after the resume (SQS: 12)" 12 "$(in_queue)"
check_eq "every order row sent" 4 "$(count "event_type = 'order.created' AND status = 'sent'")"

# ---- /readyz with one destination down --------------------------------
hook_ctl '{"script": [], "default": {"status": 500, "body": "down (injected)"}}'
down=$(ins hooks 1)
t0=$(now_ms)
hooks_failing() { http GET /readyz; jq_true '[.destinations[] | select(.name == "hooks") | .state] == ["failing"]' "$HTTP_BODY"; }
wait_until $((UNREADY / 1000 + 6)) "/readyz to show hooks failing" hooks_failing || true
say "/readyz $(($(now_ms) - t0)) ms after the webhook went down: $HTTP_STATUS $HTTP_BODY"
check_eq "/readyz with the webhook down: still 200 (it is not the default)" 200 "$HTTP_STATUS"
check "  ... hooks failing, named in the warning, the default ok" \
	jq_true '.status == "ready" and .sink == "ok" and (.warning | test("destination \"hooks\" \\(http\\) is failing: .* a server error"))
		and ([.destinations[] | select(.name == "default") | .state] == ["ok"])' "$HTTP_BODY"
check "  ... and the warning names no URL or secret" \
	eval '! grep -qiE "https?:|127\.0\.0\.1|whsec|/hooks" <<<"$(jq -r .warning <<<"$HTTP_BODY")"'
ins NULL 1 >/dev/null
wait_until 10 "the default's row sent with hooks down" eval '[ "$(in_queue)" = 13 ]' || true
check_eq "the default keeps publishing with hooks down" 13 "$(in_queue)"
fresh_scrape "$M.5"
check "failures counted {destination=hooks,reason=server} ($(delta "$M.4" "$M.5" 'outboxd_publish_failures_total{destination="hooks",reason="server"}'))" \
	[ "$(delta "$M.4" "$M.5" 'outboxd_publish_failures_total{destination="hooks",reason="server"}')" -ge 1 ]
check_eq "  ... none {destination=default}" 0 "$(delta "$M.4" "$M.5" 'outboxd_publish_failures_total{destination="default"}')"
hook_ctl '{"script": [], "default": {"status": 200}}'
wait_until 10 "the held hooks row delivered" eval '[ "$(count "id = $down AND status = '\''sent'\''")" = 1 ]' || true
check_eq "the hooks row sent once the webhook works" 1 "$(count "id = $down AND status = 'sent'")"
http GET /readyz
check "/readyz after: no warning, hooks ok: $HTTP_BODY" \
	jq_true '.status == "ready" and (has("warning") | not) and ([.destinations[] | .state] == ["ok", "ok"])' "$HTTP_BODY"

# ---- redrive by destination --------------------------------------------
hook_ctl '{"script": [400, 400], "default": {"status": 200}}'
hfail=$(ins hooks 2)
big=$(ins NULL 1 "jsonb_build_object('pad', repeat('x', 5000))")
wait_until 10 "hooks rows and the large one failed" eval '[ "$(count "id IN ($hfail,$big) AND status = '\''failed'\''")" = 3 ]' || true
check_eq "2 hooks rows failed (HTTP 400) and the default's large one" 3 "$(count "id IN ($hfail,$big) AND status = 'failed'")"
big_attempts=$(sql "SELECT attempts FROM outbox WHERE id = $big")
rc=0
ctl redrive --destination hooks --json >"$T_DIR/redrive.json" || rc=$?
check_eq "outboxctl redrive --destination hooks: exit 0" 0 "$rc"
check "  ... exactly hooks' failed rows: $(jq -c . "$T_DIR/redrive.json")" \
	jq -e ".redriven == 2 and .ids == [$hfail]" "$T_DIR/redrive.json"
wait_until 10 "the redriven hooks rows sent" eval '[ "$(count "id IN ($hfail) AND status = '\''sent'\''")" = 2 ]' || true
check_eq "the redriven hooks rows are sent" 2 "$(count "id IN ($hfail) AND status = 'sent'")"
check_eq "the default's failed row untouched (failed, same attempts)" "failed $big_attempts" \
	"$(sql "SELECT status || ' ' || attempts FROM outbox WHERE id = $big")"
check_eq "  ... and the hookz row too" failed "$(sql "SELECT status FROM outbox WHERE id = $typo")"
rc=0
ctl redrive --destination hooks >/dev/null || rc=$?
check_eq "outboxctl redrive --destination hooks, nothing failed: exit 1" 1 "$rc"
admin POST /destinations/default/redrive
check "POST /destinations/default/redrive: only the default's row: $HTTP_BODY" jq_true ".redriven == 1 and .ids == [$big]" "$HTTP_BODY"
admin POST /destinations/hooks/redrive --data-binary '{"all": true, "destination": "default"}'
check_eq "a body naming another destination than the path: 400" 400 "$HTTP_STATUS"
admin POST /outbox/redrive --data-binary '{"all": true, "destination": "nope"}'
check "/outbox/redrive naming an unknown destination: 404 unknown_destination: $HTTP_BODY" \
	jq_true '.error == "unknown_destination" and (.message | test("no destination \"nope\""))' "$HTTP_BODY"

# ---- names in paths and operands ----------------------------------------
admin GET /destinations
check "GET /destinations: hooks, default, hookz" jq_true '[.destinations[] | .name] == ["hooks", "default", "hookz"]' "$HTTP_BODY"
admin GET /destinations/nope
check_eq "GET /destinations/nope: 404" 404 "$HTTP_STATUS"
check "  ... unknown_destination: $HTTP_BODY" jq_true '.error == "unknown_destination" and (.message | length > 0)' "$HTTP_BODY"
admin POST /destinations/nope/pause
check_eq "POST /destinations/nope/pause: 404" 404 "$HTTP_STATUS"
check_eq "  ... nothing paused" 0 "$(sql "SELECT count(*) FROM outbox_paused_destinations")"
admin POST /destinations/a%0Ab/pause
check "a control character in the name: 400 bad_destination_name: $HTTP_BODY" jq_true '.error == "bad_destination_name"' "$HTTP_BODY"
admin POST /destinations/a%00b/pause
check "a NUL byte in the name: 400 bad_destination_name: $HTTP_BODY" jq_true '.error == "bad_destination_name"' "$HTTP_BODY"
admin POST /destinations/%FF/pause
check_eq "a name that is not UTF-8: 400" 400 "$HTTP_STATUS"
admin POST //destinations//pause
check_eq "an empty name: 404 (no such resource)" 404 "$HTTP_STATUS"
admin POST /destinations//pause
check "an empty name under /destinations/: 400: $HTTP_BODY" jq_true '.error == "bad_destination_name"' "$HTTP_BODY"
admin GET /destinations/bad%20name
check "a space in the name: 400 bad_destination_name, naming the rule: $HTTP_BODY" \
	jq_true '.error == "bad_destination_name" and .message == "a destination name is 1 to 64 characters of A-Z, a-z, 0-9, '"'_', '.' and '-'"'"' "$HTTP_BODY"
admin GET /destinations/$(printf 'd%.0s' $(seq 65))
check "a name of 65 characters: 400 bad_destination_name: $HTTP_BODY" jq_true '.error == "bad_destination_name"' "$HTTP_BODY"
admin POST /destinations/hook%73/pause
check "a percent-encoded name is decoded (hook%73 = hooks): $HTTP_BODY" jq_true '.destination == "hooks" and .paused' "$HTTP_BODY"
admin POST /destinations/hooks/resume
admin GET /destinations/hooks/pause
check_eq "GET .../pause: 405" 405 "$HTTP_STATUS"
admin POST /destinations/hooks/frobnicate
check_eq "an unknown action: 404" 404 "$HTTP_STATUS"
admin_raw POST /destinations/hooks/pause
check_eq "no token: 401" 401 "$HTTP_STATUS"
rc=0
ctl pause nope 2>"$T_DIR/ctl.err" || rc=$?
check_eq "outboxctl pause nope: exit 1" 1 "$rc"
check "  ... names the destinations there are: $(cat "$T_DIR/ctl.err")" grep -q 'no destination "nope".*(destinations: hooks default)' "$T_DIR/ctl.err"
rc=0
ctl pause '' 2>/dev/null || rc=$?
check_eq "outboxctl pause '': exit 2" 2 "$rc"
rc=0
ctl pause hooks default 2>/dev/null || rc=$?
check_eq "outboxctl pause with two names: exit 2" 2 "$rc"
check_eq "nothing left paused" 0 "$(sql "SELECT count(*) FROM outbox_paused_destinations")"

# ---- no secret anywhere --------------------------------------------------
fresh_scrape "$M.6"
admin GET /destinations
check "the webhook secret is in no log line" bash -c "! grep -qF '$SECRET' '$OUTBOXD_LOG'"
check "  ... no metric" bash -c "! grep -qF '$SECRET' '$M.6'"
check "  ... no admin answer" bash -c "! grep -qF '$SECRET' <<<'$HTTP_BODY' && ! grep -qF '$SECRET' '$T_DIR/status.json'"
check "no counter went backwards" counters_not_backwards "$M.0" "$M.6"
check "the last exposition passes promtool" promtool_ok "$M.6"

# ---- control characters reach no terminal raw ------------------------------
# A failed row whose key and destination hold DEL and C1 controls (U+009B
# begins a terminal's control sequence; the name as a row written with the
# schema's triggers off would have it): outboxctl's tables and the log show
# them as spaces.
sql "ALTER TABLE outbox DISABLE TRIGGER outbox_check_row" >/dev/null
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination, status, last_error)
	VALUES ('t.ctl', E'ctl\\x7f\\u009b[2Jkey', '{}', E'd\\u0085\\u009b[31mX\\x7f', 'failed', 'by hand')" >/dev/null
sql "ALTER TABLE outbox ENABLE TRIGGER outbox_check_row" >/dev/null
ctl failed >"$T_DIR/ctl.ctrl" 2>&1 || true
ctl status >>"$T_DIR/ctl.ctrl" 2>&1 || true
check "outboxctl failed and status: the row's key, spaced ('ctl  [2Jkey')" grep -qF 'ctl  [2Jkey' "$T_DIR/ctl.ctrl"
check "  ... no DEL and no C1 control in their output" \
	bash -c '! LC_ALL=C grep -qP "\x7f|\xc2[\x80-\x9f]" "$1"' _ "$T_DIR/ctl.ctrl"
