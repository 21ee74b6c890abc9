#!/usr/bin/env bash
# idempotency.sh -- Idempotency-Key on POST /orders (outboxd(8), HTTP API),
# against a real PostgreSQL and outboxd with two HTTP workers.
#   - every malformed key answers 400 idempotency_key_invalid, and writes
#     nothing;
#   - the same key and order answer the first order (201, same id, fields,
#     Location), however the JSON is written, and write nothing; a quoted
#     key and its bare form are one key; another customerId or amount
#     answers 422 idempotency_key_reused; a key rolled back with its order
#     (bad body, a refused order) is free again; a key whose order was
#     deleted answers 404;
#   - a key another transaction holds answers 409 idempotency_key_in_use
#     at once (its advisory lock held by psql) or after a short wait (its
#     row inserted, uncommitted, by psql), and is free after a rollback;
#   - commit-then-crash: a proxy drops outboxd's answer to a keyed POST;
#     the retry gets the same order, and there is one order, one outbox
#     row and one DynamoDB fulfillment;
#   - 1000 pairs of identical keyed requests sent at the same moment on two
#     connections make exactly 1000 orders; each key sent again answers its
#     pair's order;
#   - expiry (http.idempotency_ttl): a key older than the TTL is deleted by
#     relay 1's retention (its first pass, 5 s after the start) and a new
#     order takes it; an expired key not yet deleted is free as well.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
stack_up

TTL=600
outbox_conf_write "$T_DIR/outbox.conf"
# conf.sh has no hook for the http section
sed -i "s/^\tmax_body_size = .*/&\n\tidempotency_ttl = $TTL/" "$T_DIR/outbox.conf"
grep -q "idempotency_ttl = $TTL" "$T_DIR/outbox.conf" || die "could not set http.idempotency_ttl"

# fp CUSTOMER AMOUNT -- the fingerprint outboxd(8) documents, in SQL
fp() { echo "sha256(convert_to('$1', 'UTF8') || '\\x00'::bytea || convert_to('$2', 'UTF8'))"; }

# Keys made before outboxd starts: one expired (twice the TTL old), one
# not (half of it), each with an order of exp-cust, 5 cents.
OLD_ID=$(cat /proc/sys/kernel/random/uuid)
YOUNG_ID=$(cat /proc/sys/kernel/random/uuid)
sql "INSERT INTO orders (id, customer_id, amount_cents, created_at) VALUES
	('$OLD_ID', 'exp-cust', 5, now() - interval '$((2 * TTL)) s'),
	('$YOUNG_ID', 'exp-cust', 5, now() - interval '$((TTL / 2)) s');
INSERT INTO outbox_idempotency_keys (key, fingerprint, order_id, created_at) VALUES
	('exp-old', $(fp exp-cust 5), '$OLD_ID', now() - interval '$((2 * TTL)) s'),
	('exp-young', $(fp exp-cust 5), '$YOUNG_ID', now() - interval '$((TTL / 2)) s')" >/dev/null
outboxd_start "$T_DIR/outbox.conf"

# counts -- orders/outbox/keys rows (but the exp-* keys, which retention
# deletes when it runs)
counts() { sql "SELECT (SELECT count(*) FROM orders) || '/' || (SELECT count(*) FROM outbox) || '/' || (SELECT count(*) FROM outbox_idempotency_keys WHERE key NOT LIKE 'exp-%')"; }
# post_key KEY CUSTOMER AMOUNT [CURL ARGS] -- POST /orders with that
# Idempotency-Key value, as given; sets HTTP_* (common.sh), HTTP_LOCATION
post_key() {
	local k=$1 body
	body=$(jq -nc --arg c "$2" --argjson a "$3" '{customerId:$c, amountCents:$a}')
	shift 3
	http POST /orders -H 'Content-Type: application/json' -H "Idempotency-Key: $k" \
		--data-binary "$body" "$@"
	HTTP_LOCATION=$(grep -i '^location:' "$T_DIR/http.hdr" | sed 's/^[^:]*: *//; s/\r$//' || true)
}
# expect_error STATUS CODE DESCRIPTION -- the last answer was STATUS with
# the API's JSON error CODE
expect_error() {
	if [ "$HTTP_STATUS" = "$1" ] && jq_true ".error == \"$2\" and (.message | type == \"string\")" "$HTTP_BODY"; then
		pass "$3: $1 $2"
	else
		fail "$3: expected $1 $2, got $HTTP_STATUS $HTTP_BODY"
	fi
}

# ---- malformed keys ----------------------------------------------------------
before=$(counts)
body='{"customerId":"cust-bad","amountCents":1}'
bad_key() {	# DESCRIPTION MESSAGE CURL-HEADER-ARGS...
	local d=$1 m=$2
	shift 2
	http POST /orders -H 'Content-Type: application/json' "$@" --data-binary "$body"
	expect_error 400 idempotency_key_invalid "malformed key, $d"
	check_eq "  ... its message" "$m" "$(jq -r .message <<<"$HTTP_BODY" 2>/dev/null)"
}
M_EMPTY="Idempotency-Key must not be empty"
M_LONG="Idempotency-Key must be at most 255 characters"
M_SYNTAX="Idempotency-Key must be a quoted string of printable ASCII characters (an RFC 8941 sf-string) or a bare token"
long=$(printf 'k%.0s' $(seq 256))
bad_key "empty value" "$M_EMPTY" -H 'Idempotency-Key;'
bad_key "empty string \"\"" "$M_EMPTY" -H 'Idempotency-Key: ""'
bad_key "256 characters, quoted" "$M_LONG" -H "Idempotency-Key: \"$long\""
bad_key "256 characters, bare" "$M_LONG" -H "Idempotency-Key: $long"
bad_key "unterminated string" "$M_SYNTAX" -H 'Idempotency-Key: "abc'
bad_key "escape other than \\\" and \\\\" "$M_SYNTAX" -H 'Idempotency-Key: "a\qb"'
bad_key "non-ASCII character" "$M_SYNTAX" -H 'Idempotency-Key: "é"'
bad_key "tab inside the string" "$M_SYNTAX" -H $'Idempotency-Key: "a\tb"'
bad_key "a parameter after the string" "$M_SYNTAX" -H 'Idempotency-Key: "a";p=1'
bad_key "a list of two strings" "$M_SYNTAX" -H 'Idempotency-Key: "a", "b"'
bad_key "bare value that is not a token" "$M_SYNTAX" -H 'Idempotency-Key: a b'
bad_key "the field twice" "Idempotency-Key must be given once" \
	-H 'Idempotency-Key: "twice"' -H 'Idempotency-Key: "twice"'
check_eq "malformed keys wrote nothing (orders/outbox/keys)" "$before" "$(counts)"

# ---- same key, same order: the first answer again ---------------------------------
post_key '"k-basic"' cust-basic 100
check_eq "first POST with a key" 201 "$HTTP_STATUS"
first=$HTTP_BODY
id=$(jq -r .id <<<"$first")
loc=$HTTP_LOCATION
check_eq "  ... Location names the order" "/orders/$id" "$loc"
after_first=$(counts)
check_eq "  ... one order, one outbox row, one key row" \
	"$(awk -F/ '{ print $1 + 1 "/" $2 + 1 "/" $3 + 1 }' <<<"$before")" "$after_first"
check_eq "  ... the key row names the order" "$id" "$(sql "SELECT order_id FROM outbox_idempotency_keys WHERE key = 'k-basic'")"
post_key '"k-basic"' cust-basic 100
check_eq "same key, same order: status" 201 "$HTTP_STATUS"
check_eq "  ... the same body (id and every field)" "$first" "$HTTP_BODY"
check_eq "  ... the same Location" "$loc" "$HTTP_LOCATION"
http POST /orders -H 'Content-Type: application/json' -H 'Idempotency-Key: "k-basic"' \
	--data-binary $' {\n "amountCents" : 100, "note": "ignored",\n "customerId": "cust-\\u0062asic" } '
check_eq "same fields written otherwise (order, spaces, escapes, ignored member): the same order" \
	"$id" "$(jq -r .id <<<"$HTTP_BODY" 2>/dev/null)"
post_key 'k-basic' cust-basic 100
check_eq "the bare token k-basic is the same key as \"k-basic\"" "$id" "$(jq -r .id <<<"$HTTP_BODY" 2>/dev/null)"
post_key '"k-basic"' cust-other 100
expect_error 422 idempotency_key_reused "same key, another customerId"
post_key '"k-basic"' cust-basic 101
expect_error 422 idempotency_key_reused "same key, another amountCents"
check_eq "replays and reuses wrote nothing (orders/outbox/keys)" "$after_first" "$(counts)"

post_key '"k\"q\\z"' cust-esc 1
check_eq "a key with escapes: status" 201 "$HTTP_STATUS"
check_eq "  ... stored unescaped" 1 "$(sql "SELECT count(*) FROM outbox_idempotency_keys WHERE key = 'k\"q\\z'")"

post_key '"exp-young"' exp-cust 5
check_eq "a key stored with the documented fingerprint (SHA-256 of customerId, NUL, amountCents) answers its order" \
	"201 $YOUNG_ID" "$HTTP_STATUS $(jq -r .id <<<"$HTTP_BODY" 2>/dev/null)"

n=$(counts)
post_order cust-nokey 3
check_eq "an order without the header: 201" 201 "$HTTP_STATUS"
check_eq "  ... and no key row (orders/outbox/keys)" "$(awk -F/ '{ print $1 + 1 "/" $2 + 1 "/" $3 }' <<<"$n")" "$(counts)"

http POST /orders -H 'Content-Type: application/json' -H 'Idempotency-Key: "k-later"' \
	--data-binary '{"customerId":"cust-later","amountCents":-1}'
expect_error 400 amount_cents_negative "a key with a bad body"
check_eq "  ... stores no key" 0 "$(sql "SELECT count(*) FROM outbox_idempotency_keys WHERE key = 'k-later'")"
sql "CREATE FUNCTION idem_refuse() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN RAISE EXCEPTION 'customer is blocked'; END \$\$;
CREATE TRIGGER idem_refuse BEFORE INSERT ON orders FOR EACH ROW
WHEN (NEW.customer_id = 'cust-later') EXECUTE FUNCTION idem_refuse()" >/dev/null
post_key '"k-later"' cust-later 2
expect_error 422 order_refused "a key with an order the database refuses"
check_eq "  ... stores no key" 0 "$(sql "SELECT count(*) FROM outbox_idempotency_keys WHERE key = 'k-later'")"
sql "DROP TRIGGER idem_refuse ON orders; DROP FUNCTION idem_refuse()" >/dev/null
post_key '"k-later"' cust-later 2
check_eq "  ... so the key is free for the order once it is good" 201 "$HTTP_STATUS"

post_key '"k-gone"' cust-gone 4
gone=$(jq -r .id <<<"$HTTP_BODY")
sql "DELETE FROM orders WHERE id = '$gone'" >/dev/null
post_key '"k-gone"' cust-gone 4
expect_error 404 not_found "the key of an order deleted since"

# ---- in progress: 409 ------------------------------------------------------------
# hold SQL SECONDS -- run SQL in a transaction held open SECONDS by psql in
# the background, then rolled back; returns once psql sleeps in it
hold() {
	psql -X -q -v ON_ERROR_STOP=1 >"$T_DIR/hold.log" 2>&1 <<SQL &
BEGIN;
$1;
SELECT pg_sleep($2);
ROLLBACK;
SQL
	HOLD_PID=$!
	HOLD_SLEEP=$2
	wait_until 10 "psql holding its transaction" holding ||
		fail "psql did not hold its transaction: $(tr '\n' ' ' <"$T_DIR/hold.log")"
}
holding() { [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep($HOLD_SLEEP)%' AND state = 'active'")" = 1 ]; }
before=$(counts)
hold "SELECT pg_advisory_xact_lock(2028, hashtext('k-held'))" 4
t0=$(now_ms)
post_key '"k-held"' cust-held 9
t_busy=$(($(now_ms) - t0))
expect_error 409 idempotency_key_in_use "a key whose first request is in flight (its lock held by psql)"
check "  ... answered without waiting for it ($t_busy ms < 1000 ms)" [ "$t_busy" -lt 1000 ]
wait "$HOLD_PID"
hold "INSERT INTO outbox_idempotency_keys (key, fingerprint, order_id) VALUES ('k-held', $(fp cust-held 9), gen_random_uuid())" 4
t0=$(now_ms)
post_key '"k-held"' cust-held 9
t_busy=$(($(now_ms) - t0))
expect_error 409 idempotency_key_in_use "a key whose row another transaction inserted and holds (psql)"
check "  ... answered after a short wait, not psql's 4 s ($t_busy ms < 2000 ms)" [ "$t_busy" -lt 2000 ]
check_eq "in-flight keys wrote nothing (orders/outbox/keys)" "$before" "$(counts)"
post_order cust-during-hold 1
check_eq "an order without a key meanwhile: 201" 201 "$HTTP_STATUS"
wait "$HOLD_PID"
post_key '"k-held"' cust-held 9
check_eq "after psql rolled back, the key is free: 201" 201 "$HTTP_STATUS"
check_eq "  ... one order for it" 1 "$(sql "SELECT count(*) FROM orders WHERE customer_id = 'cust-held'")"

# ---- commit, then the answer is lost ------------------------------------------------
proxy_start drop drop-proxy.py --upstream "$OUTBOXD_URL" --drop 1
crash_body='{"customerId":"cust-crash","amountCents":4242}'
crash_post() {
	curl -sS -o "$T_DIR/crash.body" -w '%{http_code}' --max-time 30 \
		-H 'Content-Type: application/json' -H 'Idempotency-Key: "k-crash"' \
		--data-binary "$crash_body" "http://127.0.0.1:$PROXY_PORT/orders" 2>"$T_DIR/crash.err"
}
code=$(crash_post) || true
check_eq "the first POST through the proxy gets no answer" 000 "$code"
check "  ... curl saw the connection end (empty reply)" grep -q 'Empty reply' "$T_DIR/crash.err"
check_eq "  ... though outboxd answered it 201" '[201]' "$(jq -c .dropped_status "$T_DIR/drop.stats")"
committed=$(sql "SELECT order_id FROM outbox_idempotency_keys WHERE key = 'k-crash'")
check "  ... and its key row committed" [ -n "$committed" ]
code=$(crash_post) || true
check_eq "the retry with the same key: status" 201 "$code"
check_eq "  ... the order that was committed" "$committed" "$(jq -r .id "$T_DIR/crash.body" 2>/dev/null)"
check "  ... with the fields posted" jq_file '.customer_id == "cust-crash" and .amount_cents == 4242' "$T_DIR/crash.body"
check_eq "exactly one order" 1 "$(sql "SELECT count(*) FROM orders WHERE customer_id = 'cust-crash'")"
check_eq "exactly one outbox row" 1 "$(sql "SELECT count(*) FROM outbox WHERE payload->>'customerId' = 'cust-crash'")"
crash_items() { ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" | jq -c '[.[] | select(.customerId.S == "cust-crash") | .orderId.S]'; }
crash_done() {
	[ "$(sql "SELECT status FROM outbox WHERE payload->>'customerId' = 'cust-crash'")" = sent ] &&
		[ "$(crash_items)" != "[]" ]
}
wait_until 30 "the fulfillment of cust-crash" crash_done || true
check_eq "exactly one fulfillment, for that order" "[\"$committed\"]" "$(crash_items)"

# ---- 1000 pairs at the same moment --------------------------------------------------
cat >"$T_DIR/pairs.py" <<'PYEOF'
# 1000 pairs: both requests of a pair wait on one barrier, then go at once,
# each on its own connection (keep-alive: 2 x 16 connections, spread by
# the kernel over the two HTTP workers).  Then every key once more.
import http.client, json, sys, threading
port, n, runners = int(sys.argv[1]), 1000, 16
out = {}            # key -> [(status, id)...]
lock = threading.Lock()

def post(c, i):
    body = json.dumps({"customerId": "pair-%d" % i, "amountCents": i}).encode()
    for attempt in range(3):
        try:
            c.request("POST", "/orders", body, {"Content-Type": "application/json",
                                                "Idempotency-Key": '"pair-%d"' % i})
            r = c.getresponse(); b = r.read()
            j = json.loads(b)
            return r.status, j.get("id"), j.get("error")
        except (ConnectionError, http.client.HTTPException):
            c.close()
    return 0, None, "connection"

def side(k, s, go):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for i in range(k, n, runners):
        go.wait()
        res = post(c, i)
        with lock:
            out.setdefault(i, []).append(res)

barriers = [threading.Barrier(2) for _ in range(runners)]
ts = [threading.Thread(target=side, args=(k, s, barriers[k]))
      for k in range(runners) for s in (0, 1)]
[t.start() for t in ts]; [t.join() for t in ts]
bad, n409, nreplay = [], 0, 0
for i in range(n):
    rs = out.get(i, [])
    ids = {r[1] for r in rs if r[0] == 201}
    n409 += sum(r[0] == 409 for r in rs)
    if len(rs) != 2 or len(ids) != 1 or any(r[0] not in (201, 409) for r in rs) or \
            any(r[0] == 409 and r[2] != "idempotency_key_in_use" for r in rs):
        bad.append((i, rs))
first = {i: next((r[1] for r in out.get(i, []) if r[0] == 201), None) for i in range(n)}
# once more, 16 at a time
again = {}
def more(k):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for i in range(k, n, runners):
        again[i] = post(c, i)
ts = [threading.Thread(target=more, args=(k,)) for k in range(runners)]
[t.start() for t in ts]; [t.join() for t in ts]
same = sum(again[i][0] == 201 and again[i][1] == first[i] and first[i] is not None for i in range(n))
print(len(bad), n409, same)
for b in bad[:5]: print("BAD", b, file=sys.stderr)
for i in [i for i in range(n) if not (again[i][0] == 201 and again[i][1] == first[i])][:5]:
    print("AGAIN", i, again[i], first[i], file=sys.stderr)
PYEOF
t0=$(now_ms)
read -r pbad p409 psame <<<"$("$PY" "$T_DIR/pairs.py" "$HTTP_PORT")"
say "1000 pairs and 1000 retries in $(($(now_ms) - t0)) ms; ${p409:-?} losers answered 409"
check_eq "1000 pairs: pairs whose answers are not one order (201s of one id, the rest 409)" 0 "${pbad:-none}"
check_eq "exactly 1000 orders for them" 1000 "$(sql "SELECT count(*) FROM orders WHERE customer_id LIKE 'pair-%'")"
check_eq "exactly 1000 outbox rows for them" 1000 "$(sql "SELECT count(*) FROM outbox WHERE payload->>'customerId' LIKE 'pair-%'")"
check_eq "exactly 1000 key rows, each naming its pair's order" 1000 \
	"$(sql "SELECT count(*) FROM outbox_idempotency_keys k JOIN orders o ON o.id = k.order_id WHERE k.key LIKE 'pair-%' AND o.customer_id = k.key")"
check_eq "each key once more: its pair's order (201, same id)" 1000 "${psame:-0}"

# ---- expiry ------------------------------------------------------------------------
gone_old() { [ "$(sql "SELECT count(*) FROM outbox_idempotency_keys WHERE key = 'exp-old'")" = 0 ]; }
wait_until 20 "retention to delete the expired key" gone_old || true
check "retention deleted the key older than http.idempotency_ttl" gone_old
check "  ... and logged it" grep -q "retention: deleted 1 idempotency key(s) older than $TTL s" "$OUTBOXD_LOG"
check_eq "  ... and kept the younger one" 1 "$(sql "SELECT count(*) FROM outbox_idempotency_keys WHERE key = 'exp-young'")"
post_key '"exp-old"' exp-cust 5
new=$(jq -r .id <<<"$HTTP_BODY" 2>/dev/null)
check_eq "the expired key makes a new order: status" 201 "$HTTP_STATUS"
check "  ... not the old one ($new)" [ -n "$new" -a "$new" != "$OLD_ID" ]
check_eq "  ... and the key now names it" "$new" "$(sql "SELECT order_id FROM outbox_idempotency_keys WHERE key = 'exp-old'")"
# expired, not deleted yet (retention's next pass is a minute away), and
# made with another order: honoured, it would answer 422
sql "INSERT INTO outbox_idempotency_keys (key, fingerprint, order_id, created_at)
	VALUES ('exp-late', $(fp other 1), gen_random_uuid(), now() - interval '$((TTL + 1)) s')" >/dev/null
post_key '"exp-late"' cust-late 7
check_eq "an expired key retention has not deleted yet is free: status" 201 "$HTTP_STATUS"
check_eq "  ... the key row now names the new order, fresh" "$(jq -r .id <<<"$HTTP_BODY" 2>/dev/null) true" \
	"$(sql "SELECT order_id || ' ' || (created_at > now() - interval '1 minute') FROM outbox_idempotency_keys WHERE key = 'exp-late'")"

check_eq "no HTTP worker crashed" 0 "$(grep -ac 'killed by signal' "$OUTBOXD_LOG" || true)"
