#!/usr/bin/env bash
# creds-imds.sh -- on "EC2": no keys anywhere, the credentials come from
# instance metadata (IMDSv2, tests/lib/aws-creds-standin.py: one-minute
# credentials, a new set every 20 s) and every request is checked by a
# verifier that accepts only the set valid now.  The stand-in is down
# when outboxd starts: not ready, and /readyz says why; ready once it is
# up.  Then orders flow for ~50 s (two rotations and more): every one
# answered 201, fulfilled once, no request refused; outboxctl reads a
# fulfillment the same way; no secret shows in any log or page.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/creds-lib.sh"
test_init
need_binaries
stack_up

creds_verifiers
port=$("$PY" "$T_LIB/free-port")
export AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$port
OB_RELAY_WORKERS=2 OB_EXTRA_RELAY="lease = 5000 timeout = 2000" creds_conf_write "$T_DIR/outbox.conf"

"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t.out" 2>&1 || true
add_log "$T_DIR/t.out"
check "outboxd -t names instance metadata as the source" \
	grep -q "^credentials: instance metadata (IMDSv2, http://127.0.0.1:$port)" "$T_DIR/t.out"
check "outboxd -t names the region" grep -q '^region: us-east-1$' "$T_DIR/t.out"

# The credential server is down at start: outboxd starts anyway.
outboxd_start "$T_DIR/outbox.conf"
code=$(creds_ready_json)
check_eq "/readyz is 503 without credentials" 503 "$code"
check "/readyz says the credentials are unavailable, from instance metadata" \
	jq_file '.credentials | startswith("unavailable: ") and contains("instance metadata")' "$T_DIR/readyz.json"
cp "$T_DIR/readyz.json" "$T_DIR/readyz-down.json"
post_order c-early 100
check_eq "POST /orders is taken while there are no credentials" 201 "$HTTP_STATUS"
jq -r .id <<<"$HTTP_BODY" >"$T_DIR/early.id"

creds_standin_start "$port"
wait_until 20 "/readyz 200 once the stand-in is up" _creds_ready || true
check_eq "/readyz 200 once credentials come" 200 "$(creds_ready_json)"
check "/readyz credentials ok" jq_file '.credentials == "ok"' "$T_DIR/readyz.json"

# Light load across two rotations and more (20 s each).
orders_post_bg "$T_DIR/orders" 50 1 imds
wait "$ORDERS_BG_PID"
check_eq "every POST /orders answered 201" "201x50" "$(orders_codes "$T_DIR/orders")"
{ orders_201_ids "$T_DIR/orders"; cat "$T_DIR/early.id"; } | LC_ALL=C sort >"$T_DIR/ids"
wait_fulfilled 60 "$T_DIR/ids" || true
check_eq "every order fulfilled" "" "$(LC_ALL=C comm -23 "$T_DIR/ids" "$T_DIR/fulfilled.now")"
check_eq "each fulfilled once (one item per order)" "$(wc -l <"$T_DIR/ids")" "$(fulfilled_ids | uniq | wc -l)"
check_eq "every outbox row sent" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
check_eq "SQS verifier refused no request" 0 "$(stat_of sqs-cur .rejected)"
check_eq "DynamoDB verifier refused no request" 0 "$(stat_of ddb-cur .rejected)"
check "the stand-in minted at least 3 sets (two rotations)" [ "$(wc -l <"$T_DIR/issued")" -ge 6 ]
check_eq "no worker was ever left with expired credentials (renewed in time)" 0 \
	"$(grep -c 'expired .* s ago and are not renewed yet' "$OUTBOXD_LOG" || true)"
renewed=$(grep -c 'AWS credentials from instance metadata' "$OUTBOXD_LOG" || true)
check "the workers renewed their credentials (3 workers x 2+ fetches)" [ "$renewed" -ge 6 ]
check "the standin saw IMDSv2 session tokens only" [ "$(stat_of standin .imds_tokens)" -ge 6 ]

id=$(head -1 "$T_DIR/ids")
rc=0
"$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" fulfillment "$id" >"$T_DIR/ctl.out" 2>"$T_DIR/ctl.err" || rc=$?
add_log "$T_DIR/ctl.err"
check_eq "outboxctl fulfillment with instance metadata credentials" 0 "$rc"
check_eq "outboxctl prints the order" "$id" "$(jq -r '.orderId' "$T_DIR/ctl.out" 2>/dev/null || true)"

curl -sS --max-time 5 "$OUTBOXD_URL/metrics" >"$T_DIR/metrics.txt" || true
creds_secret_scan "$T_DIR/metrics.txt" "$T_DIR/readyz.json" "$T_DIR/readyz-down.json" "$T_DIR/ctl.out"
