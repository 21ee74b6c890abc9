#!/usr/bin/env bash
# creds-sts.sh -- the chain's role sources through STS, at the stand-in
# (tests/lib/aws-creds-standin.py --role-arn: AssumeRole and
# AssumeRoleWithWebIdentity as the STS API reference has them; 24-second
# credentials, a new set every 3 s) behind verifiers that accept only the
# credentials valid now:
#   1. web identity from the environment (EKS IRSA): unsigned calls, the
#      token file rotated mid-run; a role STS refuses: not ready, and
#      /readyz gives STS's AccessDenied;
#   2. a profile's role_arn + source_profile (static keys) + external_id:
#      AssumeRole signed with the source keys;
#   3. aws.role_arn + external_id on top of the chain (the environment's
#      static keys): AssumeRole signed with them; a role_session_name STS
#      would refuse is refused by outboxd -t;
#   4. a profile's role_arn + web_identity_token_file: unsigned calls;
#   5. a chain: profile app's role (duration_seconds 900) whose
#      source_profile mid is a role itself with credential_source
#      Ec2InstanceMetadata (the stand-in's IMDSv2), then aws.role_arn on
#      top (aws.duration_seconds 1200): every AssumeRole signed with the
#      credentials the step before handed out, DurationSeconds sent;
#   6. as outboxd -t: credential_source Environment (aws.profile in the
#      file) and EcsContainer; a source_profile cycle, duration_seconds
#      out of STS's range and over an hour on a chained role, refused.
# Every run: every POST /orders 201, every order fulfilled once, no
# request refused by a verifier, the workers renewed; outboxctl reads a
# fulfillment; no secret handed out (keys, tokens, the web identity
# token, the source keys) in any log, metric page, /readyz or outboxctl
# output.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/creds-lib.sh"
test_init
need_binaries
stack_up

CREDS_LIFETIME=24 CREDS_ROTATE=3
ROLE=arn:aws:iam::000000000000:role/outboxd-sts
ROLE_MID=arn:aws:iam::000000000000:role/outboxd-mid
ROLE_APP=arn:aws:iam::000000000000:role/outboxd-app
SRC_KEY=AKIDSTSSOURCE000001
SRC_SECRET=sts-source-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$SRC_SECRET" >>"$T_DIR/extra-secrets"
new_token() {
	printf 'eyJhbGciOiJSUzI1NiJ9.%s.sig\n' "$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$T_DIR/token.new"
	cat "$T_DIR/token.new" >>"$T_DIR/extra-secrets"
	mv "$T_DIR/token.new" "$T_DIR/web-token"
}
new_token
creds_verifiers
creds_standin_start 0 --role-arn "$ROLE" --role-arn "$ROLE_MID" --role-arn "$ROLE_APP" --web-identity-token-file "$T_DIR/web-token" \
	--source-key "$SRC_KEY:$SRC_SECRET" --external-id ext-4711
OB_RELAY_WORKERS=1 OB_EXTRA_RELAY="lease = 5000 timeout = 2000" creds_conf_write "$T_DIR/outbox.conf"
export AWS_ENDPOINT_URL_STS=http://127.0.0.1:$CREDS_PORT AWS_EC2_METADATA_DISABLED=true
unset AWS_PROFILE AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN \
	AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_CONTAINER_CREDENTIALS_FULL_URI

ALL_IDS=$T_DIR/all.ids
: >"$ALL_IDS"
# phase NAME N LOGPATTERN -- N orders at 3 a second against a running
# outboxd (40: 13 s, two rotations of the stand-in), with the checks of
# every run
phase() {
	local name=$1 n=$2 pat=$3 id rc=0
	wait_until 20 "$name: /readyz 200" _creds_ready || true
	check_eq "$name: /readyz 200 with credentials from STS" 200 "$(creds_ready_json)"
	orders_post_bg "$T_DIR/orders-$name" "$n" 0.33 "$name"
	[ "$name" != web ] || { sleep 8; new_token; say "web identity token rotated"; }
	wait "$ORDERS_BG_PID"
	check_eq "$name: every POST /orders answered 201" "201x$n" "$(orders_codes "$T_DIR/orders-$name")"
	orders_201_ids "$T_DIR/orders-$name" >>"$ALL_IDS"
	LC_ALL=C sort -o "$ALL_IDS" "$ALL_IDS"
	wait_fulfilled 40 "$ALL_IDS" || true
	check_eq "$name: every order fulfilled" "" "$(LC_ALL=C comm -23 "$ALL_IDS" "$T_DIR/fulfilled.now")"
	check_eq "$name: each fulfilled once" "$(wc -l <"$ALL_IDS")" "$(fulfilled_ids | wc -l)"
	check_eq "$name: every outbox row sent" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
	check_eq "$name: SQS verifier refused no request" 0 "$(stat_of sqs-cur .rejected)"
	check_eq "$name: DynamoDB verifier refused no request" 0 "$(stat_of ddb-cur .rejected)"
	check_eq "$name: no worker was left with expired credentials" 0 \
		"$(grep -c 'expired .* s ago and are not renewed yet' "$OUTBOXD_LOG" || true)"
	creds_wait_fetches 4 "$pat"
	check "$name: renewed through STS (2+ fetches per worker)" \
		[ "$(grep -c "AWS credentials from $pat" "$OUTBOXD_LOG" || true)" -ge 4 ]
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
t_out() {
	"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-$1.out" 2>&1 || true
	add_log "$T_DIR/t-$1.out"
}

# ---- 1. web identity from the environment -------------------------------
export AWS_WEB_IDENTITY_TOKEN_FILE=$T_DIR/web-token AWS_ROLE_ARN=$ROLE AWS_ROLE_SESSION_NAME=outboxd-test
t_out web
check "web: -t names STS AssumeRoleWithWebIdentity, the role, the token file and the endpoint" \
	grep -qxF "credentials: STS AssumeRoleWithWebIdentity, role $ROLE, token file $T_DIR/web-token, http://127.0.0.1:$CREDS_PORT" "$T_DIR/t-web.out"
outboxd_start "$T_DIR/outbox.conf" outboxd-web
phase web 40 "STS AssumeRoleWithWebIdentity"
check_eq "web: STS refused no call (the rotated token file is read at each fetch)" '{}' \
	"$(jq -c .sts_errors "$T_DIR/standin.stats")"
check_eq "web: the web identity calls were unsigned" 0 "$(stat_of standin .sts_signed)"
outboxd_stop

export AWS_ROLE_ARN=arn:aws:iam::000000000000:role/not-this-one
outboxd_start "$T_DIR/outbox.conf" outboxd-denied
wait_until 10 "denied: STS refuses" grep -q 'AccessDenied' "$OUTBOXD_LOG" || true
check_eq "denied: /readyz 503 when STS refuses the role" 503 "$(creds_ready_json)"
check "denied: /readyz gives STS's AccessDenied" \
	jq_file '.credentials | startswith("unavailable: ") and contains("AccessDenied")' "$T_DIR/readyz.json"
cp "$T_DIR/readyz.json" "$T_DIR/readyz-denied.json"
add_log "$T_DIR/readyz-denied.json"
outboxd_stop
unset AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_ROLE_SESSION_NAME

# ---- 2. a profile: role_arn + source_profile + external_id: AssumeRole ---
cat >"$T_DIR/credentials" <<EOF2
[src]
aws_access_key_id = $SRC_KEY
aws_secret_access_key = $SRC_SECRET
EOF2
cat >"$T_DIR/config" <<EOF2
[profile app]
role_arn = $ROLE
source_profile = src
external_id = ext-4711
role_session_name = outboxd-app
[profile web]
role_arn = $ROLE
web_identity_token_file = $T_DIR/web-token
[profile app-chain]
role_arn = $ROLE_APP
source_profile = mid
external_id = ext-4711
duration_seconds = 900
[profile mid]
role_arn = $ROLE_MID
credential_source = Ec2InstanceMetadata
external_id = ext-4711
[profile on-env]
role_arn = $ROLE
credential_source = Environment
external_id = ext-4711
[profile on-ecs]
role_arn = $ROLE
credential_source = EcsContainer
[profile cyc-a]
role_arn = $ROLE
source_profile = cyc-b
[profile cyc-b]
role_arn = $ROLE_MID
source_profile = cyc-c
[profile cyc-c]
role_arn = $ROLE_APP
source_profile = cyc-a
[profile short]
role_arn = $ROLE
source_profile = src
duration_seconds = 600
[profile chain-long]
role_arn = $ROLE_APP
source_profile = mid
duration_seconds = 7200
EOF2
export AWS_SHARED_CREDENTIALS_FILE=$T_DIR/credentials AWS_CONFIG_FILE=$T_DIR/config AWS_PROFILE=app
t_out assume
check "assume: -t names STS AssumeRole, the role and the source profile" \
	grep -qxF "credentials: STS AssumeRole, role $ROLE, source profile src ($T_DIR/credentials), http://127.0.0.1:$CREDS_PORT" "$T_DIR/t-assume.out"
signed0=$(stat_of standin .sts_signed) calls0=$(stat_of standin .sts_calls)
errs0=$(jq -c .sts_errors "$T_DIR/standin.stats")
outboxd_start "$T_DIR/outbox.conf" outboxd-assume
phase assume 40 "STS AssumeRole"
check_eq "assume: STS refused no call (signed with the source keys, ExternalId given)" "$errs0" \
	"$(jq -c .sts_errors "$T_DIR/standin.stats")"
check "assume: AssumeRole was called (4+ times)" [ $(($(stat_of standin .sts_calls) - calls0)) -ge 4 ]
check_eq "assume: every AssumeRole was signed" $(($(stat_of standin .sts_calls) - calls0)) \
	$(($(stat_of standin .sts_signed) - signed0))
outboxd_stop

# ---- 3. aws.role_arn on top of the chain (the environment's keys) -------
unset AWS_PROFILE
export AWS_SHARED_CREDENTIALS_FILE=$T_DIR/no-credentials AWS_CONFIG_FILE=$T_DIR/no-config \
	AWS_ACCESS_KEY_ID=$SRC_KEY AWS_SECRET_ACCESS_KEY=$SRC_SECRET
cp "$T_DIR/outbox.conf" "$T_DIR/outbox.conf.chain"
sed -i 's|^aws {|aws {\n\trole_arn = "'"$ROLE"'"\n\texternal_id = "ext-4711"\n\trole_session_name = "outboxd-top"|' "$T_DIR/outbox.conf"
grep -q '^	role_arn = ' "$T_DIR/outbox.conf" || die "no aws section for role_arn"
t_out top
check "top: -t names the environment's keys, then STS AssumeRole of aws.role_arn" \
	grep -qxF "credentials: static keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then STS AssumeRole, role $ROLE (aws.role_arn) with an external id" "$T_DIR/t-top.out"
signed0=$(stat_of standin .sts_signed) calls0=$(stat_of standin .sts_calls)
errs0=$(jq -c .sts_errors "$T_DIR/standin.stats")
outboxd_start "$T_DIR/outbox.conf" outboxd-top
phase top 40 "static keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then STS AssumeRole"
check_eq "top: STS refused no call" "$errs0" "$(jq -c .sts_errors "$T_DIR/standin.stats")"
check_eq "top: every AssumeRole was signed" $(($(stat_of standin .sts_calls) - calls0)) \
	$(($(stat_of standin .sts_signed) - signed0))
outboxd_stop
sed -i 's|^\trole_session_name = .*|\trole_session_name = "has space"|' "$T_DIR/outbox.conf"
rc=0
"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-badname.out" 2>&1 || rc=$?
add_log "$T_DIR/t-badname.out"
check "top: -t refuses a role_session_name STS would refuse (exit $rc)" \
	grep -q 'aws.role_session_name must be 2 to 64' "$T_DIR/t-badname.out"
cp "$T_DIR/outbox.conf.chain" "$T_DIR/outbox.conf"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
export AWS_SHARED_CREDENTIALS_FILE=$T_DIR/credentials AWS_CONFIG_FILE=$T_DIR/config

# ---- 4. a profile: role_arn + web_identity_token_file -------------------
export AWS_PROFILE=web
t_out profile-web
check "profile web: -t names STS AssumeRoleWithWebIdentity of the profile" \
	grep -qF "credentials: STS AssumeRoleWithWebIdentity, role $ROLE, token file $T_DIR/web-token, profile web" "$T_DIR/t-profile-web.out"
signed0=$(stat_of standin .sts_signed) calls0=$(stat_of standin .sts_calls)
errs0=$(jq -c .sts_errors "$T_DIR/standin.stats")
outboxd_start "$T_DIR/outbox.conf" outboxd-profile-web
phase profile-web 40 "STS AssumeRoleWithWebIdentity, role $ROLE, token file $T_DIR/web-token, profile web"
check_eq "profile web: STS refused no call" "$errs0" "$(jq -c .sts_errors "$T_DIR/standin.stats")"
check "profile web: AssumeRoleWithWebIdentity was called (4+ times)" [ $(($(stat_of standin .sts_calls) - calls0)) -ge 4 ]
check_eq "profile web: the web identity calls were unsigned" "$signed0" "$(stat_of standin .sts_signed)"
outboxd_stop

# ---- 5. a chain: role <- role <- instance metadata, then aws.role_arn ---
export AWS_PROFILE=app-chain AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$CREDS_PORT
unset AWS_EC2_METADATA_DISABLED
sed -i 's|^aws {|aws {\n\trole_arn = "'"$ROLE"'"\n\texternal_id = "ext-4711"\n\tduration_seconds = 1200|' "$T_DIR/outbox.conf"
t_out chain
check "chain: -t names each AssumeRole, its duration, the credential_source and aws.role_arn" \
	grep -qxF "credentials: STS AssumeRole, role $ROLE_APP for 900 s, source profile mid: AssumeRole, role $ROLE_MID, credential_source Ec2InstanceMetadata (http://127.0.0.1:$CREDS_PORT), http://127.0.0.1:$CREDS_PORT, then STS AssumeRole, role $ROLE (aws.role_arn) with an external id for 1200 s" "$T_DIR/t-chain.out"
stats0=$(cat "$T_DIR/standin.stats")
s0() { jq -r "$1" <<<"$stats0"; }
outboxd_start "$T_DIR/outbox.conf" outboxd-chain
phase chain 40 "STS AssumeRole, role $ROLE_APP for 900 s"
calls=$(($(stat_of standin .sts_calls) - $(s0 .sts_calls)))
check_eq "chain: STS refused no call" "$(jq -c .sts_errors <<<"$stats0")" "$(jq -c .sts_errors "$T_DIR/standin.stats")"
check "chain: the three roles were assumed in turn at every renewal (4+ each)" \
	[ $(($(stat_of standin ".sts_roles[\"$ROLE_MID\"] // 0") - $(s0 ".sts_roles[\"$ROLE_MID\"] // 0"))) -ge 4 -a \
	$(($(stat_of standin ".sts_roles[\"$ROLE_APP\"] // 0") - $(s0 ".sts_roles[\"$ROLE_APP\"] // 0"))) -ge 4 -a \
	$(($(stat_of standin ".sts_roles[\"$ROLE\"] // 0") - $(s0 ".sts_roles[\"$ROLE\"] // 0"))) -ge 4 ]
check_eq "chain: every AssumeRole was signed with credentials the stand-in handed out (IMDS's, then each role's)" \
	"$calls" $(($(stat_of standin .sts_chained) - $(s0 .sts_chained)))
check "chain: instance metadata handed out the first credentials" [ "$(stat_of standin .imds_tokens)" -ge 4 ]
check_eq "chain: DurationSeconds 900 on every AssumeRole of profile app-chain's role" \
	$(($(stat_of standin ".sts_roles[\"$ROLE_APP\"] // 0") - $(s0 ".sts_roles[\"$ROLE_APP\"] // 0"))) \
	$(($(stat_of standin '.sts_durations["900"] // 0') - $(s0 '.sts_durations["900"] // 0')))
check_eq "chain: DurationSeconds 1200 (aws.duration_seconds) on every AssumeRole of aws.role_arn" \
	$(($(stat_of standin ".sts_roles[\"$ROLE\"] // 0") - $(s0 ".sts_roles[\"$ROLE\"] // 0"))) \
	$(($(stat_of standin '.sts_durations["1200"] // 0') - $(s0 '.sts_durations["1200"] // 0')))
outboxd_stop
cp "$T_DIR/outbox.conf.chain" "$T_DIR/outbox.conf"

# ---- 6. more profiles, as outboxd -t -----------------------------------
# t_refuse NAME PROFILE TEXT -- outboxd -t with AWS_PROFILE=PROFILE fails
# saying TEXT
t_refuse() {
	local rc=0
	AWS_PROFILE=$2 "$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-$1.out" 2>&1 || rc=$?
	add_log "$T_DIR/t-$1.out"
	check "$1: -t refuses profile $2 (exit $rc), saying: $3" \
		[ "$rc" -ne 0 -a "$(grep -cF -- "$3" "$T_DIR/t-$1.out")" -ge 1 ]
}
sed 's/^aws {/aws {\n\tprofile = "on-env"/' "$T_DIR/outbox.conf" >"$T_DIR/outbox-on-env.conf"
AWS_ACCESS_KEY_ID=$SRC_KEY AWS_SECRET_ACCESS_KEY=$SRC_SECRET \
	"$T_ROOT/outboxd" -t -c "$T_DIR/outbox-on-env.conf" >"$T_DIR/t-on-env.out" 2>&1 || true
add_log "$T_DIR/t-on-env.out"
check "on-env: -t names credential_source Environment (aws.profile in the file: the keys sign the AssumeRole)" \
	grep -qxF "credentials: STS AssumeRole, role $ROLE, credential_source Environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), http://127.0.0.1:$CREDS_PORT" "$T_DIR/t-on-env.out"
AWS_PROFILE=on-ecs AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$CREDS_PORT/v1/credentials \
	"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-on-ecs.out" 2>&1 || true
add_log "$T_DIR/t-on-ecs.out"
check "on-ecs: -t names credential_source EcsContainer" \
	grep -qxF "credentials: STS AssumeRole, role $ROLE, credential_source EcsContainer (http://127.0.0.1:$CREDS_PORT), http://127.0.0.1:$CREDS_PORT" "$T_DIR/t-on-ecs.out"
t_refuse on-ecs-none on-ecs "AWS profile on-ecs sets credential_source EcsContainer, but neither AWS_CONTAINER_CREDENTIALS_RELATIVE_URI nor _FULL_URI is set"
t_refuse cycle cyc-a "the source_profile keys of the AWS profiles make a cycle: cyc-a -> cyc-b -> cyc-c -> cyc-a"
t_refuse short short "duration_seconds of AWS profile short is not a number of seconds from 900 to 43200 (STS)"
t_refuse chain-long chain-long "the duration of role $ROLE_APP is over 3600 s, but it is assumed with role credentials (role chaining)"
sed 's|^aws {|aws {\n\trole_arn = "'"$ROLE"'"\n\tduration_seconds = 43201|' "$T_DIR/outbox.conf" >"$T_DIR/outbox-long.conf"
rc=0
AWS_PROFILE=app "$T_ROOT/outboxd" -t -c "$T_DIR/outbox-long.conf" >"$T_DIR/t-conf-long.out" 2>&1 || rc=$?
add_log "$T_DIR/t-conf-long.out"
check "conf-long: -t refuses aws.duration_seconds over 43200 (exit $rc)" \
	grep -qF "aws.duration_seconds must be 900 to 43200 (STS DurationSeconds)" "$T_DIR/t-conf-long.out"
export AWS_EC2_METADATA_DISABLED=true

creds_secret_scan "$T_DIR"/t-*.out
