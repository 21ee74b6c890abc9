#!/usr/bin/env bash
# config-destinations.sh -- named destinations in outbox.conf (issue 26,
# item 2):
#   1. `outboxd -t` accepts the legacy configuration alone, named
#      destinations alone (SQS, SNS, webhook), both together, the complete
#      example of outbox.conf(5) and the shipped etc/outbox.conf with its
#      commented-out destinations switched on;
#   2. it refuses each mistake in a destination with exit status 78 and
#      exactly "outboxd: FILE:LINE: reason" (or "FILE: reason" for a rule
#      across sections), and no output shows the value of a secret (a
#      destination's secret, webhook.secret, the AWS secret key), however
#      close to it the bad line is;
#   3. SIGHUP with a webhook destination added: a row inserted with psql
#      naming it after the reload arrives at its receiver, signed with
#      that destination's secret, and not at the default's; a row that
#      named it before the reload was dead-lettered, and arrives once
#      redriven;
#   4. SIGHUP with a bad destination: the master logs "reload failed" with
#      the message -t prints, keeps its workers, and the running
#      generation keeps publishing to both destinations.
# Needs PostgreSQL and two webhook receivers; no AWS emulator (the relays
# publish only to webhooks).
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
OUTBOXD=$T_ROOT/outboxd
AWS_SECRET='dest-aws-SECRET-0042'
HOOK_SECRET="whsec_$(head -c 24 /dev/urandom | base64)"
HOOK_KEY=${HOOK_SECRET#whsec_}

# run_t FILE -- outboxd -t -c FILE; sets RC and OUT (stdout+stderr)
run_t() {
	RC=0
	OUT=$(timeout 20 "$OUTBOXD" -t -c "$1" 2>&1) || RC=$?
}

# no_secret NAME -- OUT shows none of the secrets the files hold
no_secret() {
	local s
	for s in "$HOOK_KEY" "$AWS_SECRET" SECRETMARK; do
		if grep -qF -e "$s" <<<"$OUT"; then
			fail "$1: a secret value is in the output (got: ${OUT:0:300})"
			return
		fi
	done
	pass "$1: no secret value in the output"
}

# ---- 1. good files --------------------------------------------------------
# base: named destinations only; line numbers below matter
base() {
	cat <<EOF
# config-destinations base configuration
database = "postgresql://postgres@127.0.0.1:9/none"
http { listen = "127.0.0.1:9" workers = 1 }
relay { workers = 1 default_destination = "orders" }
consumer { workers = 0 }
aws { region = "us-east-1" access_key_id = "AKIDDEST" secret_access_key = "$AWS_SECRET" }
destination orders {
	sink = "sqs"
	queue_url = "http://127.0.0.1:9/000000000000/orders"
}
destination fanout {
	sink = "sns"
	topic_arn = "arn:aws:sns:us-east-1:000000000000:events.fifo"
}
destination partner {
	sink = "http"
	url = "http://127.0.0.1:9/hooks"
	secret = "$HOOK_SECRET"
	timeout = 2000
}
EOF
}
BASE=$T_DIR/named.conf
base >"$BASE"
chmod 0600 "$BASE"

# good NAME FILE [TAIL] -- -t says exactly "configuration OK", then
# the lines that name the credential source and the region it will use
# (TAIL their first words; none when no worker talks to AWS)
good() {
	chmod 0600 "$2"
	run_t "$2"
	check_eq "$1: exit status" 0 "$RC"
	check_t_ok "$1" "$2" "${3-credentials: region:}"
}
check_t_ok() {
	check_eq "$1: output" "outboxd: $2: configuration OK" "$(sed -n 1p <<<"$OUT")"
	check_eq "$1: then credentials and region" "${3-credentials: region:}" \
	    "$(sed -n '2,$p' <<<"$OUT" | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//')"
}

good "named only" "$BASE"
cat >"$T_DIR/legacy.conf" <<EOF
database = "postgresql://postgres@127.0.0.1:9/none"
consumer { workers = 0 }
aws { region = "us-east-1" access_key_id = "AKIDDEST" secret_access_key = "$AWS_SECRET" }
sqs { queue_url = "http://127.0.0.1:9/000000000000/order-events" }
EOF
good "legacy only (relay.sink = sqs)" "$T_DIR/legacy.conf"
cat >"$T_DIR/legacy-http.conf" <<EOF
database = "postgresql://postgres@127.0.0.1:9/none"
consumer { workers = 0 }
relay { sink = "http" }
webhook { url = "http://127.0.0.1:9/h" secret = "$HOOK_SECRET" }
EOF
good "legacy only (relay.sink = http, no AWS)" "$T_DIR/legacy-http.conf" ""
# both: the legacy queue is "default", the default destination
sed -e 's/ default_destination = "orders"//' "$BASE" >"$T_DIR/both.conf"
echo 'sqs { queue_url = "http://127.0.0.1:9/000000000000/order-events" }' >>"$T_DIR/both.conf"
good "legacy and named together" "$T_DIR/both.conf"
sed -e 's/^destination fanout {/destination default {/' "$BASE" >"$T_DIR/named-default.conf"
sed -i 's/ default_destination = "orders"//' "$T_DIR/named-default.conf"
good "a section named \"default\" as the default" "$T_DIR/named-default.conf"
awk '/^\.Sh EXAMPLES/ { ex = 1; next } ex && /^\.Bd -literal/ { on = 1; next }
	on && /^\.Ed/ { exit } on { print }' "$T_ROOT/man/outbox.conf.5" |
	sed 's/\\e/\\/g' >"$T_DIR/man-example.conf"
check "the manual's complete example has destinations" grep -q '^destination ' "$T_DIR/man-example.conf"
# (its pubsub destination adds -t's "Google credentials:" line)
good "outbox.conf(5) complete example" "$T_DIR/man-example.conf" "credentials: region: Google"
# etc/outbox.conf's commented-out destinations, switched on as they stand
# (a secret given to the webhook, whose "" the file leaves to fill in)
sed -e 's/^#\(destination \|	\|}\)/\1/' -e 's|^\(	secret = \)""$|\1"'"$HOOK_SECRET"'"|' \
	"$T_ROOT/etc/outbox.conf" >"$T_DIR/etc-on.conf"
check_eq "etc/outbox.conf: commented-out destinations switched on" 4 "$(grep -c '^destination ' "$T_DIR/etc-on.conf")"
chmod 0600 "$T_DIR/etc-on.conf"
RC=0
OUT=$(AWS_REGION=eu-west-1 AWS_ACCESS_KEY_ID=AKIDENV AWS_SECRET_ACCESS_KEY="$AWS_SECRET" \
	timeout 20 "$OUTBOXD" -t -c "$T_DIR/etc-on.conf" 2>&1) || RC=$?
check_eq "etc/outbox.conf with its destinations on: exit status" 0 "$RC"
check_t_ok "etc/outbox.conf with its destinations on" "$T_DIR/etc-on.conf" "credentials: region: Google"

# ---- 2. each mistake, with its line ----------------------------------------
# bad NAME LINE MESSAGE SED... -- BASE with the sed expressions applied is
# refused: exit 78, the whole output "outboxd: FILE:LINE: MESSAGE" (LINE
# empty: "outboxd: FILE: MESSAGE"), and no secret in it
bad() {
	local name=$1 line=$2 msg=$3 f=$T_DIR/bad-$1.conf want
	shift 3
	sed "$@" "$BASE" >"$f"
	chmod 0600 "$f"
	run_t "$f"
	check_eq "$name: exit status (EX_CONFIG)" 78 "$RC"
	if [ -n "$line" ]; then want="outboxd: $f:$line: $msg"; else want="outboxd: $f: $msg"; fi
	check_eq "$name: message" "$want" "$OUT"
	no_secret "$name"
}
RULE="a destination's name is 1 to 64 characters of A-Z, a-z, 0-9, '_', '.' and '-'"
bad name-space 11 "destination \"fan out\": $RULE" -e '11s/.*/destination "fan out" {/'
bad name-slash 15 "destination \"partner/1\": $RULE" -e '15s/.*/destination "partner\/1" {/'
bad name-long 7 "destination \"$(printf 'o%.0s' $(seq 1 64))...\": $RULE" \
	-e "7s/orders/$(printf 'o%.0s' $(seq 1 65))/"
bad name-missing 7 "a destination section needs a name: destination NAME { ... }" -e '7s/orders //'
bad duplicate 11 "destination orders is defined twice (first on line 7): each destination needs a name of its own" \
	-e '11s/fanout/orders/'
bad default-name 4 "relay.default_destination = \"or ders\": $RULE" -e '4s/"orders"/"or ders"/'
bad sink-unknown 8 'destination orders: sink = "kafka": expected "sqs", "sns", "http" or "pubsub"' -e '8s/sqs/kafka/'
bad sink-missing 7 'destination orders: sink is not set ("sqs", "sns", "http" or "pubsub")' -e '8d'
bad sqs-needs-queue_url 7 'destination orders: sink = "sqs" needs queue_url' -e '9d'
bad sns-needs-topic_arn 11 'destination fanout: sink = "sns" needs topic_arn' -e '13d'
bad http-needs-url 15 'destination partner: sink = "http" needs url' -e '17d'
bad http-needs-secret 15 'destination partner: sink = "http" needs secret' -e '18d'
bad topic_arn-on-sqs 10 'destination orders: topic_arn is a key of sink = "sns", not of sink = "sqs"' \
	-e '9a\	topic_arn = "arn:aws:sns:us-east-1:000000000000:events"'
bad secret-on-sns 14 'destination fanout: secret is a key of sink = "http", not of sink = "sns"' \
	-e "13a\\	secret = \"$HOOK_SECRET\""
# before sink =, a key of another sink is found at the sink's line
bad secret-before-sink 13 'destination fanout: secret is a key of sink = "http", not of sink = "sns"' \
	-e "11a\\	secret = \"$HOOK_SECRET\""
bad queue_url-on-http 18 'destination partner: queue_url is a key of sink = "sqs", not of sink = "http"' \
	-e '17a\	queue_url = "http://127.0.0.1:9/0/q"'
bad queue_url-scheme 9 'destination orders: queue_url: expected an http:// or https:// URL, not one that starts "ftp:"' \
	-e '9s|http://|ftp://user:SECRETMARK@|'
bad url-scheme 17 'destination partner: url: expected an http:// or https:// URL, not one that starts "hooks"' \
	-e '17s|http://127.0.0.1:9/hooks|hooks/x|'
# the scheme is right, but libcurl could not send to it: refused at -t,
# the URL itself (which may hold credentials) never shown
bad url-no-host 17 'destination partner: url: not a URL libcurl can use: No host part in the URL' \
	-e '17s|http://127.0.0.1:9/hooks|http://|'
bad url-bad-port 17 'destination partner: url: not a URL libcurl can use: Port number was not a decimal number between 0 and 65535' \
	-e '17s|http://127.0.0.1:9/hooks|http://SECRETMARK:pw@127.0.0.1:99999/x|'
bad url-bad-ipv6 17 'destination partner: url: not a URL libcurl can use: Bad IPv6 address' \
	-e '17s|http://127.0.0.1:9/hooks|https://[::1|'
bad topic_arn-service 13 'destination fanout: topic_arn = "arn:aws:sqs:us-east-1:000000000000:events.fifo": expected arn:PARTITION:sns:REGION:ACCOUNT:NAME (ACCOUNT 12 digits; NAME 1 to 256 letters, digits, '"'-' or '_'"', ending in .fifo for a FIFO topic)' \
	-e '13s/:sns:/:sqs:/'
bad topic_arn-account 13 'destination fanout: topic_arn = "arn:aws:sns:us-east-1:0000:events.fifo": expected arn:PARTITION:sns:REGION:ACCOUNT:NAME (ACCOUNT 12 digits; NAME 1 to 256 letters, digits, '"'-' or '_'"', ending in .fifo for a FIFO topic)' \
	-e '13s/:000000000000:/:0000:/'
bad batch_size-http 20 'destination partner: batch_size = 5 is out of range (1..4 for sink = "http")' \
	-e '19a\	batch_size = 5'
bad batch_size-zero 10 'destination orders: batch_size = 0 is out of range (1..10, or less as its sink allows)' \
	-e '9a\	batch_size = 0'
bad concurrency-sqs 10 'destination orders: concurrency = 17 is out of range (1..16, or less as its sink allows)' \
	-e '9a\	concurrency = 17'
bad concurrency-http 20 'destination partner: concurrency = 5 is out of range (1..4 for sink = "http")' \
	-e '19a\	concurrency = 5'
# a bad line right after the secret, and one right before it
bad timeout-after-secret 19 'destination partner: timeout = 50 is out of range (100..600000)' \
	-e '19s/2000/50/'
bad url-before-secret 17 'destination partner: url: expected an http:// or https:// URL, not one that starts "ftp:"' \
	-e '17s|http://|ftp://|'
bad unknown-key-after-secret 19 "no such option 'timeuot'" -e '19s/timeout/timeuot/'
bad secret-not-base64 18 'destination partner: secret: one that starts whsec_ must be followed by base64 (at most 256 bytes once decoded)' \
	-e '18s/.*/	secret = "whsec_%%%SECRETMARK"/'
bad secret-unquoted 18 'the value of secret in destination partner is malformed (quote it)' \
	-e '18s/.*/	secret = whsec_abc SECRETMARK/'
bad lease 4 "relay.lease (3000 ms) must be at least twice the timeout of destination orders (10000 ms, relay.timeout's): a publish must end within the lease of its claim, with time left for the claim and the wait for the sink" \
	-e '4s/}/lease = 3000 }/'
bad no-default "" 'relay.default_destination is not set and no destination is named "default": the rows POST /orders writes (destination NULL) would have none (set relay.default_destination, or the relay.sink with sqs {} or webhook {} that makes "default")' \
	-e '4s/ default_destination = "orders"//'
bad default-unknown 4 'relay.default_destination = "nope": no destination of that name (a destination nope {} section, or "default" when relay.sink with sqs {} or webhook {} makes it)' \
	-e '4s/"orders"/"nope"/'
bad webhook-half "" 'webhook.url is set but webhook.secret is not (with relay.sink = "http", webhook {} is the destination "default")' \
	-e '4s/}/sink = "http" }/' -e '$a\webhook { url = "http://127.0.0.1:9/h" }'
# (With no region anywhere, instance metadata is the last source: off here.)
AWS_EC2_METADATA_DISABLED=true bad aws-for-sns "" 'aws.region is not set, neither AWS_REGION nor AWS_DEFAULT_REGION is in the environment, the profile sets none and instance metadata is off (AWS_EC2_METADATA_DISABLED)' \
	-e '6d' -e '7,10d' -e '15,20d' -e '4s/"orders"/"fanout"/'
# the mode warning names a destination's secret, never its value
chmod 0644 "$BASE"
RC=0
OUT=$(timeout 20 "$OUTBOXD" -t -c "$BASE" 2>&1 >/dev/null) || RC=$?
check_eq "0644: still valid" 0 "$RC"
check_eq "0644: the warning names the destination's secret" \
	"outboxd: warning: $BASE: mode 0644 lets every user read this file, and it holds secrets (aws.secret_access_key, secret in destination partner): chmod o-r it" "$OUT"
no_secret "0644 warning"
chmod 0600 "$BASE"

# ---- 3. a reload adds a webhook destination --------------------------------
PGP=$("$T_LIB/free-port")
on_exit "'$T_LIB/pg-down.sh' '$T_DIR/pg' >/dev/null"
add_log "$T_DIR/pg/pg.log"
"$T_LIB/pg-up.sh" "$T_DIR/pg" "$PGP" >/dev/null || die "pg-up.sh failed"
export PGHOST=127.0.0.1 PGPORT=$PGP PGUSER=postgres PGDATABASE=postgres
sql 'CREATE DATABASE outboxd' >/dev/null
export PGDATABASE=outboxd
psql -X -q -v ON_ERROR_STOP=1 -f "$T_ROOT/sql/schema.sql" >/dev/null || die "schema"

# receiver NAME -- a webhook receiver with a secret of its own: SEC_NAME,
# URL_NAME, REC_NAME (its record)
receiver() {
	local s
	s="whsec_$(head -c 24 /dev/urandom | base64)"
	printf '%s\n' "$s" >"$T_DIR/$1.secret"
	proxy_start "$1" webhook-receiver.py --secret-file "$T_DIR/$1.secret" --record "$T_DIR/$1.jsonl"
	printf -v "SEC_$1" %s "$s"
	printf -v "URL_$1" %s "http://127.0.0.1:$PROXY_PORT"
	printf -v "REC_$1" %s "$T_DIR/$1.jsonl"
	touch "$T_DIR/$1.jsonl"
}
receiver main
receiver partner
HTTP_PORT=$("$T_LIB/free-port")
OUTBOXD_URL=http://127.0.0.1:$HTTP_PORT
CONF=$T_DIR/outbox.conf

# gen1: the legacy webhook is the only destination, the default
cat >"$T_DIR/gen1.conf" <<EOF
database = "postgresql://postgres@127.0.0.1:$PGP/outboxd"
log_level = "info"
shutdown_timeout = 5000
http { listen = "127.0.0.1:$HTTP_PORT" workers = 1 }
relay {
	workers = 1
	sink = "http"
	poll_interval = 200
	max_attempts = 3
	backoff_base = 100
	backoff_max = 400
}
consumer { workers = 0 }
webhook { url = "$URL_main/hooks/main" secret = "$SEC_main" timeout = 2000 }
EOF
# gen2: the same and a webhook destination of its own
{ cat "$T_DIR/gen1.conf"; cat <<EOF
destination partner {
	sink = "http"
	url = "$URL_partner/hooks/partner"
	secret = "$SEC_partner"
	timeout = 2000
	concurrency = 2
}
EOF
} >"$T_DIR/gen2.conf"
# bad: gen2 and a destination with a key of another sink
cp "$T_DIR/gen2.conf" "$T_DIR/bad.conf"
cat >>"$T_DIR/bad.conf" <<EOF
destination partner2 {
	sink = "http"
	url = "$URL_partner/hooks/partner2"
	secret = "$SEC_partner"
	topic_arn = "arn:aws:sns:us-east-1:000000000000:events"
}
EOF
BADLINE=$(grep -n 'topic_arn' "$T_DIR/bad.conf" | cut -d: -f1)
chmod 0600 "$T_DIR"/gen1.conf "$T_DIR"/gen2.conf "$T_DIR"/bad.conf
put_conf() { cp "$1" "$CONF.tmp" && chmod 0600 "$CONF.tmp" && mv "$CONF.tmp" "$CONF"; }
put_conf "$T_DIR/gen1.conf"
outboxd_start "$CONF"
M=$(proc_pid "$OUTBOXD_PIDFILE")

# reqs REC ID -- the requests REC recorded for webhook-id ID
reqs() { jq -sc --arg id "$2" '[.[] | select(.headers["webhook-id"] == $id)]' "$1"; }
nreqs() { jq length <<<"$(reqs "$1" "$2")"; }
row() { sql "SELECT $2 FROM outbox WHERE id = $1"; }
row_is() { [ "$(row "$1" status)" = "$2" ]; }
# insert DESTINATION KEY -- a row written by psql as any application
# would (DESTINATION NULL: none); prints its id
insert() {
	local d=NULL
	[ "$1" = NULL ] || d="'$1'"
	sql "INSERT INTO outbox (event_type, ordering_key, payload, destination)
		VALUES ('invoice.paid', '$2', jsonb_build_object('key', '$2'), $d) RETURNING id"
}
# arrives LABEL ID REC OTHER -- row ID is sent, delivered once to REC with a
# signature its receiver verifies, never to OTHER
arrives() {
	local label=$1 id=$2 rec=$3 other=$4
	wait_until 15 "row $id sent" row_is "$id" sent || true
	check_eq "$label: row $id status" sent "$(row "$id" status)"
	check_eq "$label: deliveries to its receiver" 1 "$(nreqs "$rec" "$id")"
	check_eq "$label: signed with its destination's secret (the receiver verifies)" true \
		"$(jq -r '.[0].sig_ok' <<<"$(reqs "$rec" "$id")")"
	check_eq "$label: deliveries to the other receiver" 0 "$(nreqs "$other" "$id")"
}

post_order gen1-order 1200
check_eq "gen1: POST /orders" 201 "$HTTP_STATUS"
X=$(sql "SELECT id FROM outbox WHERE ordering_key = '$(jq -r .id <<<"$HTTP_BODY")'")
arrives "gen1: an order (destination NULL) at the default" "$X" "$REC_main" "$REC_partner"
EARLY=$(insert partner early-1)
wait_until 15 "row $EARLY failed" row_is "$EARLY" failed || true
check_eq "gen1: a row naming a destination not in the file: failed at once" failed "$(row "$EARLY" status)"
check_eq "gen1: ... after one attempt" 1 "$(row "$EARLY" attempts)"
check_eq "gen1: ... with last_error" 'destination "partner" is not in outbox.conf (redrive the row once it is)' \
	"$(row "$EARLY" last_error)"

put_conf "$T_DIR/gen2.conf"
kill -HUP "$M"
_gen() { grep -q "msg=\"reload done: generation $1\"" "$OUTBOXD_LOG"; }
check "reload with a webhook destination added: generation 2" wait_until 15 "reload done: generation 2" _gen 2
X=$(insert partner after-reload-1)
arrives "gen2: a row naming the new destination" "$X" "$REC_partner" "$REC_main"
check_eq "gen2: its webhook-id is the row id, its path the destination's" "/hooks/partner" \
	"$(jq -r '.[0].path' <<<"$(reqs "$REC_partner" "$X")")"
X=$(insert NULL after-reload-2)
arrives "gen2: a row without destination still at the default" "$X" "$REC_main" "$REC_partner"
RC=0
"$T_ROOT/outboxctl" -c "$CONF" redrive "$EARLY" >"$T_DIR/redrive.out" 2>&1 || RC=$?
check_eq "gen2: outboxctl redrive of the early row" 0 "$RC"
arrives "gen2: the early row, redriven" "$EARLY" "$REC_partner" "$REC_main"

# ---- 4. a reload with a bad destination is refused -------------------------
put_conf "$T_DIR/bad.conf"
RC=0
TOUT=$("$OUTBOXD" -t -c "$CONF" 2>&1) || RC=$?
check_eq "bad reload file: -t exit status" 78 "$RC"
check_eq "bad reload file: -t message" \
	"outboxd: $CONF:$BADLINE: destination partner2: topic_arn is a key of sink = \"sns\", not of sink = \"http\"" "$TOUT"
pids_before=$(ps --ppid "$M" -o pid= | sort | paste -sd' ' -)
before=$(grep -c 'msg="reload failed' "$OUTBOXD_LOG" || true)
kill -HUP "$M"
_failed() { [ "$(grep -c 'msg="reload failed' "$OUTBOXD_LOG" || true)" -gt "$before" ]; }
wait_until 10 "the reload failure in the log" _failed || true
esc=${TOUT#outboxd: }
esc=${esc//\\/\\\\}
esc=${esc//\"/\\\"}
check "bad reload: the master logs the error -t prints" \
	grep -qF "level=error role=master pid=$M msg=\"reload failed, keeping the running configuration: $esc\"" "$OUTBOXD_LOG"
sleep 0.5
check_eq "bad reload: same workers (pids)" "$pids_before" "$(ps --ppid "$M" -o pid= | sort | paste -sd' ' -)"
check_eq "bad reload: no generation 3" 0 "$(grep -cE 'generation[= ]3' "$OUTBOXD_LOG" || true)"
X=$(insert partner after-bad-1)
arrives "after the bad reload: the running generation publishes to the added destination" "$X" "$REC_partner" "$REC_main"
post_order after-bad-order 1300
check_eq "after the bad reload: POST /orders" 201 "$HTTP_STATUS"
X=$(sql "SELECT id FROM outbox WHERE ordering_key = '$(jq -r .id <<<"$HTTP_BODY")'")
arrives "after the bad reload: an order at the default" "$X" "$REC_main" "$REC_partner"

OUT=$(cat "$OUTBOXD_LOG")
HOOK_KEY=${SEC_partner#whsec_}
no_secret "outboxd's log (the partner's secret)"
HOOK_KEY=${SEC_main#whsec_}
no_secret "outboxd's log (webhook.secret)"
