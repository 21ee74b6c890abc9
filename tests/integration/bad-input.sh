#!/usr/bin/env bash
# bad-input.sh -- the orders API refuses what it must refuse, each time with
# the right status and a JSON body {"error": ..., "message": ...}, and
# writes nothing for a refused request; a good order reads back the same.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
stack_up
MAX=2048
OB_MAX_BODY_SIZE=$MAX OB_RELAY_WORKERS=1 outbox_conf_write "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"

counts() { sql "SELECT (SELECT count(*) FROM orders) || '/' || (SELECT count(*) FROM outbox)"; }

# expect STATUS DESCRIPTION METHOD PATH [CURL ARGS...]
expect() {
	local want=$1 desc=$2 before after
	shift 2
	before=$(counts)
	http "$@"
	after=$(counts)
	if [ "$HTTP_STATUS" != "$want" ]; then
		fail "$desc: status $HTTP_STATUS, expected $want (body: ${HTTP_BODY:0:200})"
	elif ! jq -e '(.error | type == "string" and length > 0) and (.message | type == "string" and length > 0)' \
		<<<"$HTTP_BODY" >/dev/null 2>&1; then
		fail "$desc: $want but the body is not JSON with \"error\" and \"message\" strings: ${HTTP_BODY:0:200}"
	elif [[ "${HTTP_CTYPE,,}" != application/json* ]]; then
		fail "$desc: $want with Content-Type '$HTTP_CTYPE', expected application/json"
	elif [ "$before" != "$after" ]; then
		fail "$desc: $want but rows were written (orders/outbox $before -> $after)"
	else
		pass "$desc -> $want $(jq -c '{error}' <<<"$HTTP_BODY"), nothing written"
	fi
}
JSON=(-H 'Content-Type: application/json')
post() { local want=$1 desc=$2 body=$3; expect "$want" "$desc" POST /orders "${JSON[@]}" --data-binary "$body"; }

post 400 "malformed JSON" '{"customerId":"c1","amountCents":'
post 400 "empty body" ''
post 400 "a JSON array" '[{"customerId":"c1","amountCents":1}]'
post 400 "a JSON number" '4999'
post 400 "customerId missing" '{"amountCents":4999}'
post 400 "customerId empty" '{"customerId":"","amountCents":4999}'
post 400 "customerId not a string (123)" '{"customerId":123,"amountCents":4999}'
post 400 "customerId of 257 bytes" "{\"customerId\":\"$(printf 'c%.0s' $(seq 257))\",\"amountCents\":4999}"
post 400 "amountCents missing" '{"customerId":"c1"}'
post 400 "amountCents as a string \"12\"" '{"customerId":"c1","amountCents":"12"}'
post 400 "amountCents 4999.5" '{"customerId":"c1","amountCents":4999.5}'
post 400 "amountCents -1" '{"customerId":"c1","amountCents":-1}'
post 400 "amountCents 9007199254740992 (2^53)" '{"customerId":"c1","amountCents":9007199254740992}'

big=$(jq -nc --arg p "$(head -c $((MAX + 100)) /dev/zero | tr '\0' x)" '{customerId:"c1", amountCents:1, pad:$p}')
printf '%s' "$big" >"$T_DIR/big.json"
post 413 "body over max_body_size ($MAX) with Content-Length" "$big"
expect 413 "body over max_body_size ($MAX), chunked" POST /orders "${JSON[@]}" \
	-H 'Transfer-Encoding: chunked' --data-binary @"$T_DIR/big.json"

expect 405 "GET /orders" GET /orders
expect 405 "DELETE /orders/x" DELETE /orders/x
expect 404 "GET /nope" GET /nope
expect 404 "GET /orders/<random uuid>" GET "/orders/$(cat /proc/sys/kernel/random/uuid)"
expect 415 "Content-Type text/plain" POST /orders -H 'Content-Type: text/plain' \
	--data-binary '{"customerId":"c1","amountCents":4999}'

check_eq "no row written by any refused request (orders/outbox)" "0/0" "$(counts)"

# a good order, then read it back
post_order "c-good" 4999
check_eq "good order: POST /orders" 201 "$HTTP_STATUS"
created=$HTTP_BODY
id=$(jq -r .id <<<"$created")
check "good order: body has id, customer_id, amount_cents, created_at" \
	jq_true '.customer_id == "c-good" and .amount_cents == 4999 and (.id | length == 36) and (.created_at | type == "string")' "$created"
http GET "/orders/$id"
check_eq "GET /orders/{id}" 200 "$HTTP_STATUS"
check_eq "GET /orders/{id} has the same id, customer_id, amount_cents, created_at" \
	"$(jq -cS '{id, customer_id, amount_cents, created_at}' <<<"$created")" \
	"$(jq -cS '{id, customer_id, amount_cents, created_at}' <<<"$HTTP_BODY" 2>/dev/null)"
check_eq "the good order wrote one orders row and one outbox row" "1/1" "$(counts)"
check_eq "its outbox row is an order.created event keyed by the order" "order.created" \
	"$(sql "SELECT event_type FROM outbox WHERE payload::text LIKE '%$id%'")"

# the boundaries just inside the limits are accepted
post_order "$(printf 'b%.0s' $(seq 256))" 1
check_eq "customerId of exactly 256 bytes is accepted" 201 "$HTTP_STATUS"
post_order "c-max" 9007199254740991
check_eq "amountCents 9007199254740991 (2^53-1) is accepted" 201 "$HTTP_STATUS"
check_eq "... and stored exactly" 9007199254740991 "$(sql "SELECT amount_cents FROM orders WHERE customer_id = 'c-max'")"
check_eq "rows after the three good orders (orders/outbox)" "3/3" "$(counts)"

# 3000 pipelined requests (about 100 KB) on one connection: all answered,
# no worker crashes (evhttp was once taken over mid-pipeline and crashed)
pipelined=$("$PY" - "$HTTP_PORT" <<'PYEOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(10)
n = 3000
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * n)
data, t = b"", time.time()
while data.count(b" 200 OK") < n and time.time() - t < 15:
    try:
        d = s.recv(65536)
    except (socket.timeout, ConnectionError):
        break
    if not d:
        break
    data += d
print(data.count(b" 200 OK"))
PYEOF
)
check_eq "3000 pipelined GET /healthz on one connection answered" 3000 "$pipelined"
check_eq "no HTTP worker crashed" 0 "$(grep -ac 'killed by signal' "$OUTBOXD_LOG")"
post_order "after-pipeline" 1
check_eq "POST /orders still answers after the pipeline" 201 "$HTTP_STATUS"
