#!/usr/bin/env bash
# creds-imds.sh -- on "EC2": no keys and no region anywhere, both come from
# instance metadata (IMDSv2, tests/lib/aws-creds-standin.py: region
# eu-west-3, 24-second credentials, a new set every 3 s: one handed out
# has 21 s or more left, renewed with 7 s to spare) and every request is
# checked by a verifier that accepts only the set valid now, signed for
# eu-west-3.  The stand-in is down when outboxd starts: not ready, and
# /readyz says why (no region yet); ready once it is up, each worker
# having read the region and logged the endpoints it built from it (SNS,
# left to the region) or was given (SQS in the file, DynamoDB in
# AWS_ENDPOINT_URL_DYNAMODB).  Then orders flow for ~13 s (two rotations
# and more): every one answered 201, fulfilled once, no request refused;
# outboxctl reads a fulfillment the same way; no secret shows in any log
# or page.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/creds-lib.sh"
test_init
need_binaries
stack_up

CREDS_LIFETIME=24 CREDS_ROTATE=3 CREDS_REGION=eu-west-3
creds_verifiers
port=$("$PY" "$T_LIB/free-port")
export AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$port
unset AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL AWS_ENDPOINT_URL_SNS AWS_ENDPOINT_URL_SQS
OB_RELAY_WORKERS=2 OB_EXTRA_RELAY="lease = 5000 timeout = 2000" creds_conf_write "$T_DIR/outbox.conf"

"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t.out" 2>&1 || true
add_log "$T_DIR/t.out"
check "outboxd -t names instance metadata as the source" \
	grep -q "^credentials: instance metadata (IMDSv2, http://127.0.0.1:$port)" "$T_DIR/t.out"
check "outboxd -t names the region and where it comes from" grep -q '^region: us-east-1 from aws.region$' "$T_DIR/t.out"

# No region in the file, the environment or a profile: instance metadata.
sed -i -e '/^\tregion = /d' -e '/^dynamodb {/,/^}/{/endpoint_url/d}' "$T_DIR/outbox.conf"
export AWS_ENDPOINT_URL_DYNAMODB=$CREDS_DDB
"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-region.out" 2>&1 || true
add_log "$T_DIR/t-region.out"
check "outboxd -t says the region comes from instance metadata, read at start" \
	grep -qxF "region: from instance metadata (IMDSv2, http://127.0.0.1:$port), read by each worker at start" "$T_DIR/t-region.out"

# The credential server is down at start: outboxd starts anyway.
outboxd_start "$T_DIR/outbox.conf"
code=$(creds_ready_json)
check_eq "/readyz is 503 without credentials" 503 "$code"
check "/readyz says the credentials are unavailable, from instance metadata" \
	jq_file '.credentials | startswith("unavailable: ") and contains("instance metadata")' "$T_DIR/readyz.json"
wait_until 5 "a worker says it has no region yet" \
	grep -q 'no AWS region yet (aws.region, AWS_REGION, AWS_DEFAULT_REGION and the profile set none)' "$OUTBOXD_LOG" || true
creds_ready_json >/dev/null
check "/readyz says there is no region yet" \
	jq_file '.credentials | startswith("unavailable: no AWS region yet")' "$T_DIR/readyz.json"
cp "$T_DIR/readyz.json" "$T_DIR/readyz-down.json"
post_order c-early 100
check_eq "POST /orders is taken while there are no credentials" 201 "$HTTP_STATUS"
jq -r .id <<<"$HTTP_BODY" >"$T_DIR/early.id"

creds_standin_start "$port"
wait_until 20 "/readyz 200 once the stand-in is up" _creds_ready || true
check_eq "/readyz 200 once credentials come" 200 "$(creds_ready_json)"
check "/readyz credentials ok" jq_file '.credentials == "ok"' "$T_DIR/readyz.json"
check_eq "each worker read the region and logged its endpoints (2 relays + 1 consumer)" 3 \
	"$(grep -cF "AWS region eu-west-3 from instance metadata (http://127.0.0.1:$port); endpoints: SQS $CREDS_SQS, SNS https://sns.eu-west-3.amazonaws.com, DynamoDB $CREDS_DDB, STS (not used)" "$OUTBOXD_LOG" || true)"
check "the stand-in answered placement/region once per worker" [ "$(stat_of standin .imds_region)" -ge 3 ]

# Light load across two rotations and more (3 s each; renewals every ~15 s).
orders_post_bg "$T_DIR/orders" 40 0.33 imds
wait "$ORDERS_BG_PID"
check_eq "every POST /orders answered 201" "201x40" "$(orders_codes "$T_DIR/orders")"
{ orders_201_ids "$T_DIR/orders"; cat "$T_DIR/early.id"; } | LC_ALL=C sort >"$T_DIR/ids"
wait_fulfilled 60 "$T_DIR/ids" || true
check_eq "every order fulfilled" "" "$(LC_ALL=C comm -23 "$T_DIR/ids" "$T_DIR/fulfilled.now")"
check_eq "each fulfilled once (one item per order)" "$(wc -l <"$T_DIR/ids")" "$(fulfilled_ids | uniq | wc -l)"
check_eq "every outbox row sent" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
check_eq "SQS verifier refused no request (signed for the region instance metadata gave)" 0 "$(stat_of sqs-cur .rejected)"
check_eq "DynamoDB verifier refused no request" 0 "$(stat_of ddb-cur .rejected)"
check "the stand-in minted at least 3 sets (two rotations)" [ "$(wc -l <"$T_DIR/issued")" -ge 6 ]
check_eq "no worker was ever left with expired credentials (renewed in time)" 0 \
	"$(grep -c 'expired .* s ago and are not renewed yet' "$OUTBOXD_LOG" || true)"
creds_wait_fetches 6 'instance metadata'
renewed=$(grep -c 'AWS credentials from instance metadata' "$OUTBOXD_LOG" || true)
check "the workers renewed their credentials (3 workers x 2+ fetches)" [ "$renewed" -ge 6 ]
check "the standin saw IMDSv2 session tokens only" [ "$(stat_of standin .imds_tokens)" -ge 6 ]

id=$(head -1 "$T_DIR/ids")
rc=0
"$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" fulfillment "$id" >"$T_DIR/ctl.out" 2>"$T_DIR/ctl.err" || rc=$?
add_log "$T_DIR/ctl.err"
check_eq "outboxctl fulfillment with instance metadata credentials and region" 0 "$rc"
check_eq "outboxctl prints the order" "$id" "$(jq -r '.orderId' "$T_DIR/ctl.out" 2>/dev/null || true)"

curl -sS --max-time 5 "$OUTBOXD_URL/metrics" >"$T_DIR/metrics.txt" || true
creds_secret_scan "$T_DIR/metrics.txt" "$T_DIR/readyz.json" "$T_DIR/readyz-down.json" "$T_DIR/ctl.out"
