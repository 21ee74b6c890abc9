#!/usr/bin/env bash
# creds-sources.sh -- the credential chain's other sources, one outboxd
# run each behind verifiers that accept only the credentials valid now
# (tests/lib/aws-creds-standin.py: 24-second credentials, a new set every
# 3 s, renewed with 7 s or more left, so a run of ~16 s sees two
# rotations and more; the renewals are waited for, not timed):
#   1. precedence, as outboxd -t names the source: one case per adjacent
#      pair of the chain, and aws.profile in the file over the
#      environment's keys;
#   2. a profile with static keys (a hand-written valid set, never
#      rotated), with instance metadata present and down: the profile wins;
#   3. credential_process (curl from the stand-in's /__standin/process),
#      with a dead container endpoint present: the profile wins;
#   4. container credentials, relative URI (OUTBOXD_ECS_ENDPOINT), then
#      the stand-in down across a rotation until every set it handed out
#      has expired (read from its --valid file, no fixed sleep): publishes
#      wait, nothing lost, all delivered once it is back;
#   5. container credentials, full URI with a token file rotated mid-run.
# Every run: every POST /orders 201, every order fulfilled once, no
# request refused by a verifier; outboxctl reads a fulfillment; no secret
# handed out in any log, metric page, /readyz body or outboxctl output.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/creds-lib.sh"
test_init
need_binaries
stack_up

CREDS_LIFETIME=24 CREDS_ROTATE=3
creds_verifiers
OB_RELAY_WORKERS=1 OB_EXTRA_RELAY="lease = 5000 timeout = 2000" creds_conf_write "$T_DIR/outbox.conf"
dead=$("$PY" "$T_LIB/free-port")	# nothing listens there
export AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$dead
unset AWS_PROFILE AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN \
	AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_CONTAINER_CREDENTIALS_RELATIVE_URI \
	AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN \
	AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE OUTBOXD_ECS_ENDPOINT

# ---- 1. precedence ------------------------------------------------------
cat >"$T_DIR/creds-static" <<EOF2
[default]
aws_access_key_id = AKIDPROFILESTATIC01
aws_secret_access_key = profile-static-secret-0123456789abcdef
EOF2
echo "profile-static-secret-0123456789abcdef" >>"$T_DIR/extra-secrets"
echo "web-identity-token-for-precedence" >"$T_DIR/web-token"
echo "web-identity-token-for-precedence" >>"$T_DIR/extra-secrets"
echo "env-secret-for-precedence-0123456789" >>"$T_DIR/extra-secrets"
echo "conf-secret-for-precedence-0123456789" >>"$T_DIR/extra-secrets"
sed 's/^aws {/aws {\n\taccess_key_id = "AKIDCONFPRECEDENCE1"\n\tsecret_access_key = "conf-secret-for-precedence-0123456789"/' \
	"$T_DIR/outbox.conf" >"$T_DIR/conf-keys.conf"
chmod 0600 "$T_DIR/conf-keys.conf"
grep -q AKIDCONFPRECEDENCE1 "$T_DIR/conf-keys.conf" || die "no aws section to put keys in"

# t_src NAME CONF EXPECTED [VAR=VALUE...] -- outboxd -t with those
# variables names EXPECTED (a line's start) as the source
t_src() {
	local name=$1 conf=$2 want=$3
	shift 3
	env "$@" "$T_ROOT/outboxd" -t -c "$conf" >"$T_DIR/t-$name.out" 2>&1 || true
	add_log "$T_DIR/t-$name.out"
	check "precedence $name: -t says \"$want\" (got: $(grep -m1 -E '^credentials:|AWS credentials' "$T_DIR/t-$name.out" || head -c 200 "$T_DIR/t-$name.out"))" \
		grep -qF -- "$want" "$T_DIR/t-$name.out"
}
ENVK=(AWS_ACCESS_KEY_ID=AKIDENVPRECEDENCE01 AWS_SECRET_ACCESS_KEY=env-secret-for-precedence-0123456789)
PROF=(AWS_SHARED_CREDENTIALS_FILE=$T_DIR/creds-static)
WEB=(AWS_WEB_IDENTITY_TOKEN_FILE=$T_DIR/web-token AWS_ROLE_ARN=arn:aws:iam::000000000000:role/web AWS_ROLE_SESSION_NAME=t)
CONT=(AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$dead/v1/credentials AWS_CONTAINER_AUTHORIZATION_TOKEN=tok-precedence)
t_src conf-over-env "$T_DIR/conf-keys.conf" "credentials: static keys from the aws section" "${ENVK[@]}"
t_src env-over-profile "$T_DIR/outbox.conf" "credentials: static keys from AWS_ACCESS_KEY_ID" "${ENVK[@]}" "${PROF[@]}"
t_src profile-over-web-identity "$T_DIR/outbox.conf" "credentials: static keys of profile default ($T_DIR/creds-static)" "${PROF[@]}" "${WEB[@]}"
t_src web-identity-over-container "$T_DIR/outbox.conf" "AssumeRoleWithWebIdentity" "${WEB[@]}" "${CONT[@]}"
t_src container-over-imds "$T_DIR/outbox.conf" "credentials: container credentials (token, http://127.0.0.1:$dead, full URI)" "${CONT[@]}"
t_src imds-last "$T_DIR/outbox.conf" "credentials: instance metadata (IMDSv2, http://127.0.0.1:$dead)"
# aws.profile named in the file is the operator's choice, as a profile in
# code is to the SDKs: the environment's keys do not win over it
sed 's/^aws {/aws {\n\tprofile = "default"/' "$T_DIR/outbox.conf" >"$T_DIR/conf-profile.conf"
t_src file-profile-over-env "$T_DIR/conf-profile.conf" "credentials: static keys of profile default ($T_DIR/creds-static)" "${ENVK[@]}" "${PROF[@]}"

# run_phase NAME N -- N orders at 3 a second against a running outboxd;
# every one 201, fulfilled once, nothing refused by the verifiers since
# the last phase; outboxctl reads one
ALL_IDS=$T_DIR/all.ids
: >"$ALL_IDS"
run_phase() {
	local name=$1 n=$2 id rc=0
	orders_post_bg "$T_DIR/orders-$name" "$n" 0.33 "$name"
	wait "$ORDERS_BG_PID"
	phase_check "$name" "$n"
}
phase_check() {
	local name=$1 n=$2 id rc=0
	check_eq "$name: every POST /orders answered 201" "201x$n" "$(orders_codes "$T_DIR/orders-$name")"
	orders_201_ids "$T_DIR/orders-$name" >>"$ALL_IDS"
	LC_ALL=C sort -o "$ALL_IDS" "$ALL_IDS"
	wait_fulfilled 40 "$ALL_IDS" || true
	check_eq "$name: every order fulfilled" "" "$(LC_ALL=C comm -23 "$ALL_IDS" "$T_DIR/fulfilled.now")"
	check_eq "$name: each fulfilled once" "$(wc -l <"$ALL_IDS")" "$(fulfilled_ids | wc -l)"
	check_eq "$name: every outbox row sent" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
	check_eq "$name: SQS verifier refused no request" 0 "$(stat_of sqs-cur .rejected)"
	check_eq "$name: DynamoDB verifier refused no request" 0 "$(stat_of ddb-cur .rejected)"
	[ "$name" = outage ] || check_eq "$name: no worker was left with expired credentials" 0 \
		"$(grep -c 'expired .* s ago and are not renewed yet' "$OUTBOXD_LOG" || true)"
	id=$(orders_201_ids "$T_DIR/orders-$name" | head -1)
	"$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" fulfillment "$id" >"$T_DIR/ctl-$name.out" 2>"$T_DIR/ctl-$name.err" || rc=$?
	add_log "$T_DIR/ctl-$name.out"
	add_log "$T_DIR/ctl-$name.err"
	check_eq "$name: outboxctl fulfillment exit status" 0 "$rc"
	check_eq "$name: outboxctl prints the order" "$id" "$(jq -r '.orderId' "$T_DIR/ctl-$name.out" 2>/dev/null || true)"
	curl -sS --max-time 5 "$OUTBOXD_URL/metrics" >"$T_DIR/metrics-$name.txt" || true
	curl -sS --max-time 5 "$OUTBOXD_URL/readyz" >"$T_DIR/readyz-$name.json" || true
	add_log "$T_DIR/metrics-$name.txt"
	add_log "$T_DIR/readyz-$name.json"
}
# start_phase NAME -- outboxd with the current environment, ready
start_phase() {
	outboxd_start "$T_DIR/outbox.conf" "outboxd-$1"
	wait_until 20 "$1: /readyz 200" _creds_ready || true
	check_eq "$1: /readyz 200 with credentials from the source" 200 "$(creds_ready_json)"
}

# ---- 2. profile, static keys (instance metadata present, down) ----------
now=$(date +%s)
jq -n --argjson e $((now + 3600)) '{valid: [{AccessKeyId: "AKIDPROFILESTATIC01",
	SecretAccessKey: "profile-static-secret-0123456789abcdef", Expiration: $e}], expired: []}' \
	>"$T_DIR/valid.json"
export AWS_SHARED_CREDENTIALS_FILE=$T_DIR/creds-static
start_phase profile
run_phase profile 9
outboxd_stop
echo '{"valid": [], "expired": []}' >"$T_DIR/valid.json"

# ---- 3. credential_process (a dead container endpoint present) ----------
creds_standin_start 0
cat >"$T_DIR/config-process" <<EOF2
[profile proc]
credential_process = curl -sSf --max-time 5 http://127.0.0.1:$CREDS_PORT/__standin/process
EOF2
export AWS_SHARED_CREDENTIALS_FILE=$T_DIR/no-credentials AWS_CONFIG_FILE=$T_DIR/config-process \
	AWS_PROFILE=proc AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$dead/v1/credentials
"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-process.out" 2>&1 || true
add_log "$T_DIR/t-process.out"
check "process: -t names credential_process of profile proc" \
	grep -qF "credentials: credential_process of profile proc ($T_DIR/config-process)" "$T_DIR/t-process.out"
issued0=$(wc -l <"$T_DIR/issued")
start_phase process
run_phase process 40
creds_wait_fetches 4 'credential_process'
_minted3() { [ $(($(wc -l <"$T_DIR/issued") - issued0)) -ge 6 ]; }
wait_until 10 "process: 3 sets minted" _minted3 || true
outboxd_stop
check "process: two rotations and more during the run (3+ sets minted)" \
	[ $(($(wc -l <"$T_DIR/issued") - issued0)) -ge 6 ]
check "process: renewed (2+ fetches per worker)" \
	[ "$(grep -c 'AWS credentials from credential_process' "$T_DIR/outboxd-process.log" || true)" -ge 4 ]
check "process: a start whose first fetch works warns of nothing (no credentials line, no ReceiveMessage failure)" \
	bash -c '! grep -E "level=warn.*(no AWS credentials|ReceiveMessage failed)" "$1"' _ "$T_DIR/outboxd-process.log"
# A credential_process that hangs, with a child of its own: the stop
# ends the command's whole process group, nothing is left running.
cat >"$T_DIR/config-hang" <<'EOF2'
[profile hang]
credential_process = sh -c 'sleep 297 & sleep 298; wait'
EOF2
AWS_CONFIG_FILE=$T_DIR/config-hang AWS_PROFILE=hang outboxd_start "$T_DIR/outbox.conf" outboxd-hang
_hung() { pgrep -f 'sleep 29[78]' >/dev/null; }
wait_until 10 "hang: the command and its child run" _hung || true
check "hang: the command and its child run" _hung
outboxd_stop
wait_until 5 "hang: nothing of the command left" bash -c '! pgrep -f "sleep 29[78]" >/dev/null' || true
check_eq "hang: processes of the hung command left after the stop" 0 "$(pgrep -fc 'sleep 29[78]' || true)"
pkill -f 'sleep 29[78]' 2>/dev/null || true
unset AWS_PROFILE AWS_CONTAINER_CREDENTIALS_FULL_URI
export AWS_CONFIG_FILE=$T_DIR/no-config

# ---- 4. container, relative URI; the stand-in down until expiry ---------
export OUTBOXD_ECS_ENDPOINT=http://127.0.0.1:$CREDS_PORT AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/credentials/task-1
"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-relative.out" 2>&1 || true
add_log "$T_DIR/t-relative.out"
check "relative: -t names the container endpoint, relative URI" \
	grep -qF "credentials: container credentials (no token, http://127.0.0.1:$CREDS_PORT, relative URI)" "$T_DIR/t-relative.out"
start_phase relative
run_phase relative 40
creds_wait_fetches 4 'container credentials'
check "relative: renewed (2+ fetches per worker)" \
	[ "$(grep -c 'AWS credentials from container credentials' "$T_DIR/outboxd-relative.log" || true)" -ge 4 ]
proc_stop "$T_DIR/standin.pid" 5
say "stand-in down"
# Each worker holds the set it fetched last; once every set the stand-in
# handed out is past use, none holds a valid one, whenever it renewed (a
# relay notices only when it next publishes, so the sets' expirations, not
# a log line, say when): at most the 24 s of a set's life.
creds_wait_expired
orders_post_bg "$T_DIR/orders-outage" 20 0.2 outage
wait "$ORDERS_BG_PID"
_creds_503() { [ "$(creds_ready_json)" = 503 ]; }
wait_until 10 "outage: /readyz 503" _creds_503 || true
# (The lines of the outage itself: a start whose first fetch works logs
# none, see the process phase.)
OUTAGE_RE='renewing the AWS credentials from container credentials .* failed|AWS credentials from container credentials .* (expired [0-9]+ s ago|\(retry in)'
check "outage: the workers log that renewing failed, then that they have no credentials" \
	grep -qE "$OUTAGE_RE" "$T_DIR/outboxd-relative.log"
check "outage: orders wait in the outbox while there are none" \
	[ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" -gt 0 ]
check_eq "outage: /readyz 503 without credentials" 503 "$(creds_ready_json)"
check "outage: /readyz says the credentials are unavailable" \
	jq_file '.credentials | startswith("unavailable: ")' "$T_DIR/readyz.json"
cp "$T_DIR/readyz.json" "$T_DIR/readyz-outage.json"
add_log "$T_DIR/readyz-outage.json"
lines=$(grep -cE "$OUTAGE_RE" "$T_DIR/outboxd-relative.log" || true)
check "outage: the log line is rate-limited (at most 10, got $lines)" [ "$lines" -le 10 ]
lines=$(grep -c 'could not start a publish' "$T_DIR/outboxd-relative.log" || true)
check "outage: the relays' publishes not started are rate-limited too (at most 10 lines, got $lines)" [ "$lines" -le 10 ]
creds_standin_start "$CREDS_PORT"
say "stand-in back"
phase_check outage 20
outboxd_stop
unset OUTBOXD_ECS_ENDPOINT AWS_CONTAINER_CREDENTIALS_RELATIVE_URI

# ---- 5. container, full URI, token file rotated mid-run -----------------
printf 'pod-identity-token-%s\n' "$(head -c 18 /dev/urandom | base64 | tr -d '/+=')" >"$T_DIR/token-a"
cp "$T_DIR/token-a" "$T_DIR/pod-token"
cat "$T_DIR/token-a" >>"$T_DIR/extra-secrets"
proc_stop "$T_DIR/standin.pid" 5
creds_standin_start "$CREDS_PORT" --auth-token-file "$T_DIR/pod-token"
export AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$CREDS_PORT/v1/credentials \
	AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=$T_DIR/pod-token
"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-full.out" 2>&1 || true
add_log "$T_DIR/t-full.out"
check "full: -t names the container endpoint, token file, full URI" \
	grep -qF "credentials: container credentials (token file, http://127.0.0.1:$CREDS_PORT, full URI)" "$T_DIR/t-full.out"
start_phase full
orders_post_bg "$T_DIR/orders-full" 40 0.33 full
sleep 7
printf 'pod-identity-token-%s\n' "$(head -c 18 /dev/urandom | base64 | tr -d '/+=')" >"$T_DIR/token-b"
cat "$T_DIR/token-b" >>"$T_DIR/extra-secrets"
cp "$T_DIR/token-b" "$T_DIR/pod-token.new" && mv "$T_DIR/pod-token.new" "$T_DIR/pod-token"
say "token file rotated"
wait "$ORDERS_BG_PID"
phase_check full 40
check_eq "full: the stand-in refused no credential request (token read at each fetch)" 0 "$(stat_of standin .refused)"
outboxd_stop

creds_secret_scan "$T_DIR"/t-*.out
