# shellcheck shell=bash disable=SC2034
# creds-lib.sh -- helpers of tests/integration/creds-*.sh (sourced after
# common.sh and relay-lib.sh): the credential stand-in, verifiers that
# accept only the credentials valid now, a configuration without keys,
# the secret scan.
#
# creds_verifiers
#	sigv4-verify-current.py in front of SQS and DynamoDB, accepting the
#	sets of $T_DIR/valid.json; CREDS_SQS, CREDS_DDB and CREDS_QUEUE_URL
#	name them for creds_conf_write (names sqs-cur and ddb-cur for
#	stat_of); the test's own reads keep the emulators' endpoints.  They
#	check signatures in region $CREDS_REGION (default us-east-1).
# creds_standin_start [PORT] [ARGS...]
#	aws-creds-standin.py (lifetime 60 s, rotation 20 s) on PORT (0: any;
#	sets CREDS_PORT), writing $T_DIR/valid.json and $T_DIR/issued.
# creds_conf_write FILE
#	outbox_conf_write FILE without the aws keys: the chain decides.
# creds_ready_json -- GET /readyz into $T_DIR/readyz.json, prints the code
# creds_wait_fetches N PATTERN [LOG] -- wait (at most 20 s) until LOG
#	(default $OUTBOXD_LOG) has N lines "AWS credentials from PATTERN":
#	the workers' renewals come when they come, not at a fixed time
# creds_wait_expired -- with the stand-in down, sleep until every set it
#	handed out ($T_DIR/valid.json) is past the point where outboxd stops
#	using it (5 s before its Expiration): then no worker holds a valid
#	one, whenever it last renewed.
# creds_secret_scan FILE...
#	every secret handed out ($T_DIR/issued, $T_DIR/extra-secrets) is
#	searched for in the FILEs and the test's logs; one check.

creds_verifiers() {
	[ -e "$T_DIR/valid.json" ] || echo '{"valid": [], "expired": []}' >"$T_DIR/valid.json"
	proxy_start sqs-cur sigv4-verify-current.py --valid "$T_DIR/valid.json" \
		--upstream "$SQS_ENDPOINT" --service sqs --region "${CREDS_REGION:-us-east-1}"
	CREDS_SQS=http://127.0.0.1:$PROXY_PORT
	CREDS_QUEUE_URL=$CREDS_SQS/000000000000/order-events
	proxy_start ddb-cur sigv4-verify-current.py --valid "$T_DIR/valid.json" \
		--upstream "$DDB_ENDPOINT" --service dynamodb --region "${CREDS_REGION:-us-east-1}"
	CREDS_DDB=http://127.0.0.1:$PROXY_PORT
}

creds_standin_start() {
	local port=${1:-0}
	shift || true
	proxy_start standin aws-creds-standin.py --port "$port" --valid "$T_DIR/valid.json" \
		--issued "$T_DIR/issued" --lifetime "${CREDS_LIFETIME:-60}" \
		--rotate "${CREDS_ROTATE:-20}" --region "${CREDS_REGION:-us-east-1}" "$@"
	CREDS_PORT=$PROXY_PORT
}

creds_conf_write() {
	SQS_ENDPOINT=$CREDS_SQS DDB_ENDPOINT=$CREDS_DDB QUEUE_URL=$CREDS_QUEUE_URL \
		outbox_conf_write "$1"
	sed -i -e '/^\taccess_key_id = /d' -e '/^\tsecret_access_key = /d' "$1"
	! grep -q 'access_key_id = "' "$1" || die "creds_conf_write: keys left in $1"
	# hermetic: no ~/.aws of whoever runs the test
	export AWS_SHARED_CREDENTIALS_FILE=$T_DIR/no-credentials AWS_CONFIG_FILE=$T_DIR/no-config
}

creds_ready_json() {
	curl -sS -o "$T_DIR/readyz.json" -w '%{http_code}' --max-time 5 "$OUTBOXD_URL/readyz" || echo 000
}

_creds_ready() { [ "$(creds_ready_json)" = 200 ]; }

_creds_fetches() { [ "$(grep -c "AWS credentials from $2" "$3" || true)" -ge "$1" ]; }
creds_wait_fetches() {
	wait_until 20 "$1 fetches of AWS credentials from $2" _creds_fetches "$1" "$2" "${3:-$OUTBOXD_LOG}" || true
}

creds_wait_expired() {
	local last secs
	last=$(jq '[.valid[].Expiration] | max // 0' "$T_DIR/valid.json")
	secs=$(jq -n --argjson l "$last" --argjson n "$(date +%s.%N)" '$l - 5 - $n + 0.5 | if . < 0 then 0 else . end')
	say "waiting ${secs} s until every set handed out is unusable"
	sleep "$secs"
}

creds_secret_scan() {
	local found=0 s f
	{ cat "$T_DIR/issued" "$T_DIR/extra-secrets" 2>/dev/null || true; } | sort -u >"$T_DIR/secrets.all"
	[ -s "$T_DIR/secrets.all" ] || { fail "secret scan: no secret was handed out"; return; }
	while IFS= read -r s; do
		[ -n "$s" ] || continue
		for f in "$@" "${T_LOGS[@]}"; do
			[ -e "$f" ] || continue
			# the stand-ins' own logs never print secrets either
			if grep -qF -- "$s" "$f"; then
				say "secret ${s:0:6}... found in $f"
				found=$((found + 1))
			fi
		done
	done <"$T_DIR/secrets.all"
	check_eq "no secret of the $(wc -l <"$T_DIR/secrets.all") handed out appears in any log, metric page or answer" 0 "$found"
}
