#!/usr/bin/env bash
# pubsub-adc.sh -- the Application Default Credentials files other than a
# service-account key, end to end against the strict loopback stand-in
# (tests/lib/pubsub-standin.py: OAuth refresh, STS token exchange, IAM
# Credentials generateAccessToken, a subject token URL; no emulator of
# these is installable here).  Tokens of 3 s, so that every part runs
# across several renewals under load.
#   1. authorized_user in the well-known file of the user's home
#      (GOOGLE_APPLICATION_CREDENTIALS unset): outboxd -t names it; 60
#      events to two topics, every publish with a token the refresh grant
#      issued, none refused (401), tokens renewed.  PostgreSQL alone: no AWS.
#   2. external_account, file-sourced text subject token, impersonating a
#      service account: every publish with a generateAccessToken token;
#      the subject token file rotated under load (the old token revoked
#      at the STS): the new one exchanged, nothing refused, all sent; the
#      file gone for a while: rows wait with its name and the reason, and
#      go once it is back.
#   3. external_account, URL-sourced JSON subject token (headers sent),
#      STS client authentication (Basic), no impersonation: publishes
#      with STS tokens, all sent.
#   4. Bad files refused by outboxd -t and at start, each with the file
#      and a clear reason: each kind not supported named, missing fields,
#      not JSON, no file, a bad well-known file.
# No token, refresh token, client secret or subject token in any log, the
# metrics page or a row's last_error.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/pubsub-lib.sh"
test_init
need_binaries
pubsub_pg_up

TTL=3
REC=$T_DIR/pubsub.jsonl
AUD=//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/prov
IMP=relay@outboxd-test.iam.gserviceaccount.com
SECRET=client-secret-$RANDOM$RANDOM
REFRESH=1//refresh-token-$RANDOM$RANDOM
SUB1=subject-one-$RANDOM$RANDOM
SUB2=subject-two-$RANDOM$RANDOM
SUB3=subject-url-$RANDOM$RANDOM
STSSECRET=sts-secret-$RANDOM$RANDOM
printf '%s\n' "$SECRET" "$REFRESH" "$SUB1" "$SUB2" "$SUB3" "$STSSECRET" >"$T_DIR/secrets"
# The key is only the stand-in's --pubkey: no JWT flow here.
pubsub_key
proxy_start pubsub pubsub-standin.py --record "$REC" --pubkey "$T_DIR/sa.pub" \
	--client-email "$IMP" --token-ttl $TTL --topic test-proj/orders --topic test-proj/audit \
	--client-id cid.apps.googleusercontent.com --client-secret "$SECRET" --refresh-token "$REFRESH" \
	--audience "$AUD" --impersonate "$IMP"
PS=http://127.0.0.1:$PROXY_PORT

# conf_for ENDPOINT FILE: two Pub/Sub destinations, nothing of AWS.
conf_for() { OB_HTTP_WORKERS=1 OB_POLL_INTERVAL=100 pubsub_conf "$2" "$1"; }
conf_for "$PS" "$T_DIR/outbox.conf"
unset GOOGLE_APPLICATION_CREDENTIALS PUBSUB_EMULATOR_HOST GCE_METADATA_HOST CLOUDSDK_CONFIG
# Nothing may reach a real metadata server if a part goes wrong.
export GCE_METADATA_HOST=127.0.0.1:9

# load TAG N SECONDS: N rows a destination, over about SECONDS.
load() {
	local i d s
	s=$(awk -v s="$3" -v n="$2" 'BEGIN { printf "%.3f", s / n }')
	for i in $(seq 1 "$2"); do
		printf "INSERT INTO outbox (event_type, ordering_key, payload, destination, headers) VALUES "
		for d in orders audit; do
			printf "('adc.%s', 'k%d', '{\"n\": %d}', '%s', '{\"t\": \"%s\"}')" "$1" $((i % 5)) "$i" "$d" "$1"
			[ $d = audit ] || printf ", "
		done
		printf ";\nSELECT pg_sleep(%s);\n" "$s"
	done >"$T_DIR/load-$1.sql"
	psql -X -v ON_ERROR_STOP=1 -qAt -f "$T_DIR/load-$1.sql" >/dev/null 2>&1 || fail "$1: writer"
}
_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'adc.$1' AND status = 'sent'")" = "$2" ]; }
# delivered TAG N KIND: all 2N rows sent, each message accepted once, no
# 401, every accepted publish with a token of KIND.
delivered() {
	wait_until 20 "$1: $(($2 * 2)) rows sent" _sent "$1" $(($2 * 2)) || true
	check_eq "$1: rows sent" $(($2 * 2)) "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'adc.$1' AND status = 'sent'")"
	check_eq "$1: messages accepted by the stand-in" $(($2 * 2)) \
		"$(jq -s --arg t "$1" '[.[] | .messages[] | select(.attributes.t == $t)] | length' "$REC")"
	check_eq "$1: publishes refused (401)" 0 "$(jq -s '[.[] | select(.status == 401)] | length' "$REC")"
	check_eq "$1: accepted publishes not with a $3 token" 0 \
		"$(jq -s --arg k "$3" '[.[] | select(.status == 200 and .kind != $k)] | length' "$REC")"
}

# 1. authorized_user, the well-known file of the user's home.
HOMEDIR=$T_DIR/home
mkdir -p "$HOMEDIR/.config/gcloud"
WK=$HOMEDIR/.config/gcloud/application_default_credentials.json
jq -n --arg s "$SECRET" --arg r "$REFRESH" --arg u "$PS/token" \
	'{type: "authorized_user", client_id: "cid.apps.googleusercontent.com",
	  client_secret: $s, refresh_token: $r, token_uri: $u,
	  quota_project_id: "test-proj"}' >"$WK"
HOME=$HOMEDIR "$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-user.out" 2>&1
check "user: outboxd -t names the authorized user in the well-known file" \
	grep -qF "Google credentials: authorized user (client_id cid.apps.googleusercontent.com), tokens from $PS/token (the well-known file $WK)" "$T_DIR/t-user.out"
HOME=$HOMEDIR outboxd_start "$T_DIR/outbox.conf" outboxd-user
load user 30 5
delivered user 30 refresh
# Nothing of AWS in this file: no AWS credentials looked for (no request
# to the instance metadata address), and ready.
curl -sS -o "$T_DIR/readyz.json" -w '%{http_code}' --max-time 5 "$OUTBOXD_URL/readyz" >"$T_DIR/readyz.code" || true
check_eq "Pub/Sub only: /readyz answers 200 ($(cat "$T_DIR/readyz.json" 2>/dev/null))" 200 "$(cat "$T_DIR/readyz.code")"
check "Pub/Sub only: no AWS credentials looked for" \
	bash -c '! grep -qE "AWS credentials|instance metadata" "$1"' _ "$OUTBOXD_LOG"
# A token endpoint that echoes the request (secrets and all) in its
# error: the rows wait with the error, cut before the echo; nothing of it
# in a log or a row (the scan at the end).
# (Restarted, so that its first token comes from the echoing endpoint.)
outboxd_stop
curl -fsS -o /dev/null -X POST "$PS/__control" --data-binary '{"echo": true}'
HOME=$HOMEDIR outboxd_start "$T_DIR/outbox.conf" outboxd-echo
load echo 3 1
_echoed() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'adc.echo' AND last_error LIKE '%invalid_grant: you sent: [...]%'")" -ge 1 ]; }
wait_until 30 "echo: a row waits with the token endpoint's error" _echoed || true
check "echo: the row's last_error has the error, cut before the echoed request ($(sql "SELECT last_error FROM outbox WHERE event_type = 'adc.echo' AND last_error IS NOT NULL LIMIT 1"))" _echoed
curl -fsS -o /dev/null -X POST "$PS/__control" --data-binary '{"echo": false}'
delivered echo 3 refresh
check "user: tokens refreshed under load (>= 3)" test "$(stat_of pubsub '.by_kind.refresh')" -ge 3
outboxd_stop
rm -f "$WK"

# 2. external_account: a subject token file, rotated; impersonation.
: >"$REC"
curl -fsS -o /dev/null -X POST "$PS/__control" --data-binary "{\"subjects\": {\"s1\": \"$SUB1\"}}"
printf '%s\n' "$SUB1" >"$T_DIR/subject"
jq -n --arg a "$AUD" --arg u "$PS/v1/token" --arg f "$T_DIR/subject" \
	--arg i "$PS/v1/projects/-/serviceAccounts/$IMP:generateAccessToken" \
	'{type: "external_account", audience: $a,
	  subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
	  token_url: $u, credential_source: {file: $f},
	  service_account_impersonation_url: $i,
	  service_account_impersonation: {token_lifetime_seconds: 600}}' >"$T_DIR/ext-file.json"
export GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/ext-file.json
"$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/t-ext.out" 2>&1
check "ext-file: outboxd -t names the external account, its file and impersonation" \
	grep -qF "Google credentials: external account (audience $AUD), subject token from file $T_DIR/subject, exchanged at $PS/v1/token, impersonating with $PS/v1/projects/-/serviceAccounts/$IMP:generateAccessToken (GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/ext-file.json)" "$T_DIR/t-ext.out"
outboxd_start "$T_DIR/outbox.conf" outboxd-ext
load ext1 15 3
# Rotate as a platform does (rename over), then revoke the old token.
curl -fsS -o /dev/null -X POST "$PS/__control" --data-binary "{\"subjects\": {\"s1\": \"$SUB1\", \"s2\": \"$SUB2\"}}"
printf '%s\n' "$SUB2" >"$T_DIR/subject.new" && mv "$T_DIR/subject.new" "$T_DIR/subject"
load ext2 15 3
curl -fsS -o /dev/null -X POST "$PS/__control" --data-binary "{\"subjects\": {\"s2\": \"$SUB2\"}}"
load ext3 15 3
delivered ext1 15 iam
delivered ext2 15 iam
delivered ext3 15 iam
check "ext-file: the first subject token exchanged" test "$(stat_of pubsub '.sts_by_subject.s1 // 0')" -ge 1
check "ext-file: the rotated subject token exchanged, after the old one was revoked too (>= 2)" \
	test "$(stat_of pubsub '.sts_by_subject.s2 // 0')" -ge 2
check_eq "ext-file: credential requests the stand-in refused" "{}" "$(stat_of pubsub '.refused | tostring')"
check "ext-file: impersonated tokens renewed under load (>= 4)" test "$(stat_of pubsub '.by_kind.iam')" -ge 4
# The subject token file gone (a platform between two rotations): rows
# wait with the file and the reason, nothing lost; back, they go.
mv "$T_DIR/subject" "$T_DIR/subject.away"
sleep 3.5	# the token in hand expires
sql "INSERT INTO outbox (event_type, ordering_key, payload, destination) VALUES ('adc.gone', 'g', '{}', 'audit')"
_gone() { [ "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'adc.gone' AND status = 'pending' AND last_error LIKE '%Google credentials: subject token file $T_DIR/subject: No such file or directory%'")" = 1 ]; }
wait_until 10 "ext-file: the row waits, its error naming the missing file" _gone || true
check "ext-file: a missing subject token file: the row pending, its error naming the file" _gone
mv "$T_DIR/subject.away" "$T_DIR/subject"
_back() { [ "$(sql "SELECT status FROM outbox WHERE event_type = 'adc.gone'")" = sent ]; }
wait_until 10 "ext-file: sent once the file is back" _back || true
check "ext-file: sent once the file is back" _back
outboxd_stop

# 3. external_account: a URL-sourced JSON subject token, STS client auth.
proxy_start pubsub-url pubsub-standin.py --record "$T_DIR/url.jsonl" --pubkey "$T_DIR/sa.pub" \
	--client-email "$IMP" --token-ttl $TTL --topic test-proj/orders --topic test-proj/audit \
	--audience "$AUD" --sts-client "sts-client:$STSSECRET" --subject-header "Metadata:True"
PU=http://127.0.0.1:$PROXY_PORT
curl -fsS -o /dev/null -X POST "$PU/__control" --data-binary "{\"subjects\": {\"s3\": \"$SUB3\"}}"
conf_for "$PU" "$T_DIR/outbox-url.conf"
jq -n --arg a "$AUD" --arg u "$PU/v1/token" --arg s "$PU/subject?json=1" --arg c "$STSSECRET" \
	'{type: "external_account", audience: $a,
	  subject_token_type: "urn:ietf:params:oauth:token-type:id_token",
	  token_url: $u, client_id: "sts-client", client_secret: $c,
	  credential_source: {url: $s, headers: {Metadata: "True"},
	    format: {type: "json", subject_token_field_name: "id_token"}}}' >"$T_DIR/ext-url.json"
export GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/ext-url.json
REC=$T_DIR/url.jsonl
outboxd_start "$T_DIR/outbox-url.conf" outboxd-url
load url 20 5
delivered url 20 sts
check "ext-url: the URL's subject token exchanged, tokens renewed (>= 3)" \
	test "$(stat_of pubsub-url '.sts_by_subject.s3 // 0')" -ge 3
check_eq "ext-url: credential requests the stand-in refused" "{}" "$(stat_of pubsub-url '.refused | tostring')"
curl -sS --max-time 5 "$OUTBOXD_URL/metrics" >"$T_DIR/metrics.txt" || true
add_log "$T_DIR/metrics.txt"
check "ext-url: the metrics page was read" test -s "$T_DIR/metrics.txt"
outboxd_stop

# 4. Bad files: outboxd -t and a start refuse each, naming file and why.
# bad NAME WHY JSON
bad() {
	local rc=0
	printf '%s\n' "$3" >"$T_DIR/bad-$1.json"
	GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/bad-$1.json "$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" \
		>"$T_DIR/bad-$1.out" 2>&1 || rc=$?
	check_eq "bad $1: outboxd -t exits with the configuration's status" 78 "$rc"
	check "bad $1: the error names the file and says: $2" \
		grep -qF "GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/bad-$1.json: $2" "$T_DIR/bad-$1.out"
}
SRC='"credential_source": {"file": "/dev/null"}'
EXT='"type": "external_account", "audience": "a", "subject_token_type": "urn:ietf:params:oauth:token-type:jwt"'
bad user-no-refresh "no refresh_token" "{\"type\": \"authorized_user\", \"client_id\": \"c\", \"client_secret\": \"$SECRET\"}"
bad aws "credential_source is AWS-sourced (environment_id): not supported by outboxd" \
	"{$EXT, \"credential_source\": {\"environment_id\": \"aws1\", \"region_url\": \"http://169.254.169.254/x\"}}"
bad executable "credential_source is executable-sourced: not supported by outboxd" \
	"{$EXT, \"credential_source\": {\"executable\": {\"command\": \"/bin/true\"}}}"
bad impersonated 'type "impersonated_service_account" is not supported (outboxd takes service_account, authorized_user and external_account)' \
	'{"type": "impersonated_service_account", "source_credentials": {}}'
bad no-audience "no audience" "{\"type\": \"external_account\", \"subject_token_type\": \"x\", $SRC}"
bad json-no-field "credential_source.format is json without subject_token_field_name" \
	"{$EXT, \"credential_source\": {\"file\": \"/dev/null\", \"format\": {\"type\": \"json\"}}}"
bad file-and-url "credential_source needs exactly one of file and url" \
	"{$EXT, \"credential_source\": {\"file\": \"/dev/null\", \"url\": \"http://127.0.0.1:9/\"}}"
bad bad-lifetime "service_account_impersonation.token_lifetime_seconds is not 600 to 43200" \
	"{$EXT, $SRC, \"service_account_impersonation_url\": \"http://127.0.0.1:9/x\", \"service_account_impersonation\": {\"token_lifetime_seconds\": 5}}"
bad not-json "not a JSON object" "type = authorized_user"
GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/absent.json "$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf" >"$T_DIR/bad-absent.out" 2>&1 || true
check "bad absent: outboxd -t fails, naming the file" \
	grep -qF "GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/absent.json: No such file or directory" "$T_DIR/bad-absent.out"
cp "$T_DIR/bad-aws.json" "$WK"
(unset GOOGLE_APPLICATION_CREDENTIALS; HOME=$HOMEDIR "$T_ROOT/outboxd" -t -c "$T_DIR/outbox.conf") >"$T_DIR/bad-wk.out" 2>&1 || true
check "bad well-known file: outboxd -t fails, naming it" \
	grep -qF "Google credentials: the well-known file $WK: credential_source is AWS-sourced" "$T_DIR/bad-wk.out"
rm -f "$WK"
# A start, not only -t: outboxd exits with the configuration's status.
rc=0
GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/bad-user-no-refresh.json timeout 10 "$T_ROOT/outboxd" \
	-c "$T_DIR/outbox.conf" >"$T_DIR/bad-start.out" 2>&1 || rc=$?
check_eq "bad file at start: outboxd exits at once with the configuration's status" 78 "$rc"
check "bad file at start: the error names the file and the reason" \
	grep -qF "GOOGLE_APPLICATION_CREDENTIALS=$T_DIR/bad-user-no-refresh.json: no refresh_token" "$T_DIR/bad-start.out"

# No secret anywhere outboxd writes.
leaks=0
for f in "$T_DIR"/outboxd-*.log "$T_DIR"/t-*.out "$T_DIR"/bad-*.out "$T_DIR/metrics.txt"; do
	if grep -qF -f "$T_DIR/secrets" "$f" || grep -qE 'ya29\.' "$f"; then
		say "a secret in $f"
		leaks=$((leaks + 1))
	fi
done
check_eq "files outboxd wrote holding a token, refresh token, client secret or subject token" 0 "$leaks"
check_eq "rows whose last_error holds a secret" 0 \
	"$(sql "SELECT count(*) FROM outbox WHERE last_error ~ 'ya29\\.|$SECRET|$REFRESH|$SUB1|$SUB2|$SUB3|$STSSECRET'")"
