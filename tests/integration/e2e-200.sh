#!/usr/bin/env bash
# e2e-200.sh -- the whole chain under a little load: 200 orders through
# POST /orders, 8 at a time, end up as exactly 200 orders rows, 200 outbox
# rows all 'sent', and exactly 200 DynamoDB fulfillment items that agree
# with the orders table; the queue ends empty; SIGTERM stops everything.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
stack_up
outboxd_start

N=${E2E_ORDERS:-200}
mkdir -p "$T_DIR/orders"

post_one() {
	local i=$1
	curl -sS -o "$T_DIR/orders/$i.json" -w '%{http_code}\n' --max-time 30 \
		-H 'Content-Type: application/json' \
		--data-binary "{\"customerId\":\"cust-$i\",\"amountCents\":$((1000 + i))}" \
		"$OUTBOXD_URL/orders" >"$T_DIR/orders/$i.code" 2>"$T_DIR/orders/$i.err" ||
		echo 000 >"$T_DIR/orders/$i.code"
}
export -f post_one
export T_DIR OUTBOXD_URL

t0=$(now_ms)
seq 1 "$N" | xargs -P 8 -n 1 bash -c 'post_one "$1"' _
t_posted=$(now_ms)
say "$N POSTs done in $((t_posted - t0)) ms"

# first the clock: wait for the last fulfillment before any slow checking
items_done() { [ "$(ddb_count "$DDB_ENDPOINT" "$DDB_TABLE")" -ge "$N" ]; }
wait_until 90 "$N fulfillment items" items_done || true
t_last=$(now_ms)
say "first POST -> last fulfillment seen: $((t_last - t0)) ms for $N orders (poll step 200 ms)"
say "outbox created_at -> sent_at: $(sql "SELECT 'min ' || round(1000 * extract(epoch FROM min(sent_at - created_at))) || ' ms, avg ' || round(1000 * extract(epoch FROM avg(sent_at - created_at))) || ' ms, max ' || round(1000 * extract(epoch FROM max(sent_at - created_at))) || ' ms' FROM outbox")"
echo "TIMING e2e-200 first_post_to_last_fulfillment_ms=$((t_last - t0)) orders=$N"

n201=$(cat "$T_DIR"/orders/*.code | grep -c '^201$' || true)
check_eq "POST /orders answered 201 for every order" "$N" "$n201"
if [ "$n201" != "$N" ]; then
	say "other answers: $(cat "$T_DIR"/orders/*.code | sort | uniq -c | tr '\n' ' ')"
fi

# every 201 body describes the order that was posted (cust-I, 1000 + I)
bad=$(cd "$T_DIR/orders" && jq -n '[inputs | (input_filename | rtrimstr(".json") | tonumber) as $i
	| select((type == "object"
		and (.id | type == "string")
		and (.id | test("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"))
		and .customer_id == "cust-\($i)" and .amount_cents == 1000 + $i
		and (.created_at | type == "string")) | not)] | length' $(seq -f '%g.json' 1 "$N") 2>/dev/null) ||
	bad="some body is not JSON"
check_eq "201 bodies carry id (UUID), customer_id, amount_cents, created_at as posted (mismatches)" 0 "$bad"
jq -r .id "$T_DIR"/orders/*.json 2>/dev/null | LC_ALL=C sort -u >"$T_DIR/ids.api"
check_eq "distinct order ids returned" "$N" "$(wc -l <"$T_DIR/ids.api")"

check_eq "orders rows" "$N" "$(sql 'SELECT count(*) FROM orders')"
check_eq "outbox rows" "$N" "$(sql 'SELECT count(*) FROM outbox')"
check_eq "outbox rows of type order.created" "$N" "$(sql "SELECT count(*) FROM outbox WHERE event_type = 'order.created'")"
sql 'SELECT id FROM orders ORDER BY 1' >"$T_DIR/ids.db"
check "order ids in the table are those the API returned" cmp -s "$T_DIR/ids.api" "$T_DIR/ids.db"
check_eq "outbox rows with status 'sent'" "$N" "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
check_eq "outbox rows 'sent' without sent_at" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent' AND sent_at IS NULL")"
ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" >"$T_DIR/items.json"
check_eq "fulfillment items" "$N" "$(jq length "$T_DIR/items.json")"

# every item matches its order: same id, customerId, amountCents
sql "SELECT id || E'\t' || customer_id || E'\t' || amount_cents FROM orders ORDER BY 1" >"$T_DIR/orders.tsv"
jq -r '.[] | [.orderId.S, .customerId.S, .amountCents.N] | @tsv' "$T_DIR/items.json" | LC_ALL=C sort >"$T_DIR/items.tsv"
if cmp -s "$T_DIR/orders.tsv" "$T_DIR/items.tsv"; then
	pass "every item's orderId, customerId, amountCents match the orders table"
else
	fail "items differ from the orders table: $(diff "$T_DIR/orders.tsv" "$T_DIR/items.tsv" | head -5 | tr '\n' '|')"
fi
check_eq "items with status \"received\"" "$N" "$(jq '[.[] | select(.status.S == "received")] | length' "$T_DIR/items.json")"
check_eq "items with a createdAt string" "$N" "$(jq '[.[] | select(.createdAt.S | type == "string")] | length' "$T_DIR/items.json")"
check_eq "items with amountCents stored as a number (N)" "$N" "$(jq '[.[] | select(.amountCents.N != null)] | length' "$T_DIR/items.json")"

check_queue_drained 20 "consumers to delete every message"

# A burst of concurrent orders is written in group commits (several orders
# per statement, customer ids passed as one text[] literal): every answer
# must carry its own request's customer id, byte for byte, whatever quoting
# the id needs, and so must the row behind its Location.
cat >"$T_DIR/burst.py" <<'PYEOF'
import http.client, json, sys, threading
from urllib.parse import urlparse
u = urlparse(sys.argv[1])
ids = ['q"uote', 'back\\slash', 'a,b', '{brace}', 'NULL', ' spaced ', '\\"', 'é ✓ 😀', "it's", '']
ids = [f"{b}-{i}" for i in range(16) for b in ids]
res, lock = [], threading.Lock()
def run(chunk):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    for cid in chunk:
        c.request("POST", "/orders", json.dumps({"customerId": cid, "amountCents": 7}).encode(),
                  {"Content-Type": "application/json"})
        r = c.getresponse(); body = r.read()
        c.request("GET", r.getheader("Location") or "/orders/none"); g = c.getresponse(); gb = g.read()
        with lock:
            res.append((cid, r.status, json.loads(body).get("customer_id"), g.status, json.loads(gb).get("customer_id")))
ts = [threading.Thread(target=run, args=(ids[k::32],)) for k in range(32)]
[t.start() for t in ts]; [t.join() for t in ts]
bad = [x for x in res if x[1] != 201 or x[2] != x[0] or x[3] != 200 or x[4] != x[0]]
print(len(res), len(bad))
for b in bad[:5]: print("BAD", b, file=sys.stderr)
PYEOF
read -r nburst nbad <<<"$("$PY" "$T_DIR/burst.py" "$OUTBOXD_URL")"
check_eq "burst of 32 concurrent clients: orders answered" 160 "${nburst:-0}"
check_eq "orders whose 201 or stored row does not carry their own customerId" 0 "${nbad:-1}"

# A trigger's DETAIL and HINT reach the client as "detail" and "hint", and
# the log line (the first refusal of the run: not rate-limited).
sql "CREATE FUNCTION e2e_refuse_why() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	IF NEW.customer_id = 'refused-empty' THEN
		RAISE EXCEPTION 'customer is blocked' USING DETAIL = '', HINT = E' \\n';
	END IF;
	IF NEW.customer_id = 'refused-blank' THEN
		RAISE EXCEPTION USING MESSAGE = '', ERRCODE = 'P0003';
	END IF;
	RAISE EXCEPTION 'customer is blocked' USING DETAIL = 'customer refused-why is on the block list',
		HINT = 'ask support to unblock';
END \$\$;
CREATE TRIGGER e2e_refuse_why BEFORE INSERT ON orders
FOR EACH ROW WHEN (NEW.customer_id IN ('refused-why', 'refused-empty', 'refused-blank')) EXECUTE FUNCTION e2e_refuse_why();"
post_order refused-why 8
check_eq "an order a trigger refuses with a DETAIL and a HINT: HTTP status" 422 "$HTTP_STATUS"
check_eq "  ... with its reason phrase (not libevent's \"Client Error\")" "HTTP/1.1 422 Unprocessable Content" \
	"$(head -1 "$T_DIR/http.hdr" | tr -d '\r')"
check "  ... the body carries both" jq_true '.error == "order_refused" and
	.message == "the database refused the order: customer is blocked" and
	.detail == "customer refused-why is on the block list" and .hint == "ask support to unblock"' "$HTTP_BODY"
check "  ... and so does the log line" grep -q 'order refused: customer is blocked (SQLSTATE P0001) DETAIL: customer refused-why is on the block list HINT: ask support to unblock' "$OUTBOXD_LOG"
post_order refused-empty 8
check "an empty DETAIL and a blank HINT: no such members" \
	jq_true '.error == "order_refused" and (has("detail") | not) and (has("hint") | not)' "$HTTP_BODY"
post_order refused-blank 8
check_eq "an order a trigger refuses with an empty message: HTTP status" 422 "$HTTP_STATUS"
check "  ... the body says the message was empty, and gives the SQLSTATE" jq_true '.error == "order_refused" and
	.message == "the database refused the order with an empty message (SQLSTATE P0003)"' "$HTTP_BODY"

# A 201 only after the commit: a transaction can still fail at its commit
# (here a deferred constraint trigger of the user's on orders), after the
# statement itself returned the new row.  That order must get a 422 (the
# database refused it: retrying cannot help) with the trigger's message,
# and leave no row; the next order is served as usual.
sql "CREATE FUNCTION e2e_refuse() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN RAISE EXCEPTION 'refused at commit'; END \$\$;
CREATE CONSTRAINT TRIGGER e2e_refuse AFTER INSERT ON orders DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW WHEN (NEW.customer_id = 'refused-at-commit') EXECUTE FUNCTION e2e_refuse();"
post_order refused-at-commit 5
check_eq "an order whose commit fails: HTTP status" 422 "$HTTP_STATUS"
check "  ... with a JSON error body that gives the database's reason" \
	jq_true '.error == "order_refused" and (.message | endswith("refused at commit"))' "$HTTP_BODY"
check "  ... and, without a DETAIL or HINT, no such members" jq_true '(has("detail") | not) and (has("hint") | not)' "$HTTP_BODY"
check_eq "  ... and no orders row" 0 "$(sql "SELECT count(*) FROM orders WHERE customer_id = 'refused-at-commit'")"
post_order after-refused 6
check_eq "the next order: HTTP status" 201 "$HTTP_STATUS"
# A trigger's own SQLSTATE in class P0, and a long message of two-byte
# characters: the 422 carries it cut at a character, valid UTF-8 and JSON.
sql "CREATE FUNCTION e2e_refuse_long() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN RAISE EXCEPTION '%', repeat('é', 300) USING ERRCODE = 'P0002'; END \$\$;
CREATE TRIGGER e2e_refuse_long BEFORE INSERT ON orders
FOR EACH ROW WHEN (NEW.customer_id = 'refused-long') EXECUTE FUNCTION e2e_refuse_long();"
post_order refused-long 7
check_eq "an order a trigger refuses with SQLSTATE P0002: HTTP status" 422 "$HTTP_STATUS"
check "  ... its body is valid UTF-8 and JSON, the message cut at a character" "$PY" -c '
import json, sys
b = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
m = b["message"]
sys.exit(not (b["error"] == "order_refused" and m.startswith("the database refused the order: é") and set(m[32:]) == {"é"}))
' "$T_DIR/http.body"
# A client sending refused orders over and over cannot fill the log: the
# refusals are logged rate-limited (the first, then one per 10 s per
# worker, counting the rest), yet each is answered.
n422=0
for i in $(seq 1 40); do
	post_order refused-long 7
	[ "$HTTP_STATUS" = 422 ] && n422=$((n422 + 1))
done
check_eq "40 more refused orders: answered 422" 40 "$n422"
# (Each worker logs its first refusal, then one per 10 s: the earlier
# refusals above may have used up both workers' first lines.)
lines=$(grep -c 'SQLSTATE P0002' "$OUTBOXD_LOG" || true)
all=$(grep -c 'order refused:' "$OUTBOXD_LOG" || true)
check "  ... logged in a few lines, not one each ($lines for 41, $all refusal lines in all)" \
	[ "$lines" -le 4 -a "$all" -ge 1 ]
sql "DROP TRIGGER e2e_refuse_long ON orders; DROP FUNCTION e2e_refuse_long()"

# The same refusal inside a group commit: concurrent orders wait behind the
# busy connection and are written by one statement; when its commit fails,
# the others must still be written (one by one), and only the refused one
# gets the 422.  Bursts repeat until the log shows such a split.
cat >"$T_DIR/refuse.py" <<'PYEOF'
import http.client, json, sys, threading
from urllib.parse import urlparse
u = urlparse(sys.argv[1]); run = sys.argv[2]
names = [f"good-{run}-{i}" for i in range(47)]
names.insert(23, "refused-at-commit")
codes, lock, go = {}, threading.Lock(), threading.Barrier(len(names))
def post(cid):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    body = json.dumps({"customerId": cid, "amountCents": 1}).encode()
    go.wait()
    c.request("POST", "/orders", body, {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    with lock: codes[cid] = r.status
ts = [threading.Thread(target=post, args=(n,)) for n in names]
[t.start() for t in ts]; [t.join() for t in ts]
good = [n for n in names if n != "refused-at-commit"]
print(sum(codes[n] == 201 for n in good), len(good), codes["refused-at-commit"])
PYEOF
split_seen=0 good_lost=0 refused_code=
for run in $(seq 1 20); do
	read -r ok total refused_code <<<"$("$PY" "$T_DIR/refuse.py" "$OUTBOXD_URL" "$run")"
	good_lost=$((good_lost + ${total:-47} - ${ok:-0}))
	if grep -q 'orders written together failed; writing them one by one' "$OUTBOXD_LOG"; then
		split_seen=1
		break
	fi
done
check_eq "a group commit with a refused order was split and retried (seen in the log)" 1 "$split_seen"
check_eq "  ... good orders of those bursts not answered 201" 0 "$good_lost"
check_eq "  ... the refused order's HTTP status" 422 "${refused_code:-none}"
check_eq "  ... good orders stored" "$(sql "SELECT count(*) FROM orders WHERE customer_id LIKE 'good-%'")" \
	"$(sql "SELECT count(*) FROM outbox WHERE payload->>'customerId' LIKE 'good-%'")"
check_eq "  ... and no refused order stored" 0 "$(sql "SELECT count(*) FROM orders WHERE customer_id = 'refused-at-commit'")"
# Bursts of refused orders sent together, so that they are written
# together and split: each gets its 422, and the log gets neither a line
# per batch nor a line per order.
cat >"$T_DIR/refuse-burst.py" <<'PYEOF'
import http.client, json, sys, threading
from urllib.parse import urlparse
u = urlparse(sys.argv[1]); n422 = [0]; lock = threading.Lock()
body = json.dumps({"customerId": "refused-at-commit", "amountCents": 1}).encode()
def post(go):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.connect()
    go.wait()
    c.request("POST", "/orders", body, {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    with lock: n422[0] += r.status == 422
for _ in range(5):
    go = threading.Barrier(40)
    ts = [threading.Thread(target=post, args=(go,)) for _ in range(40)]
    [t.start() for t in ts]; [t.join() for t in ts]
print(n422[0])
PYEOF
split0=$(grep -c 'written together failed' "$OUTBOXD_LOG" || true)
ref0=$(grep -c 'refused at commit' "$OUTBOXD_LOG" || true)
check_eq "200 refused orders in bursts of 40: answered 422" 200 "$("$PY" "$T_DIR/refuse-burst.py" "$OUTBOXD_URL")"
split1=$(grep -c 'written together failed' "$OUTBOXD_LOG" || true)
ref1=$(grep -c 'refused at commit' "$OUTBOXD_LOG" || true)
check "  ... log lines about split batches: $((split1 - split0)), about refusals: $((ref1 - ref0)) (a few each)" \
	[ $((split1 - split0)) -le 4 -a $((ref1 - ref0)) -le 4 ]
sql "DROP TRIGGER e2e_refuse ON orders; DROP FUNCTION e2e_refuse()"

# graceful stop: SIGTERM to the master; it and every child are gone in time
pid=$(proc_pid "$OUTBOXD_PIDFILE")
kill -TERM "$pid"
t_term=$(now_ms)
if wait_until 15 "outboxd to exit after SIGTERM" outboxd_gone; then
	pass "outboxd master exited $(($(now_ms) - t_term)) ms after SIGTERM"
else
	fail "outboxd master still running 15 s after SIGTERM"
fi
rc=0
wait "$pid" 2>/dev/null || rc=$?
check_eq "outboxd exit status after SIGTERM" 0 "$rc"
sleep 0.3
left=$(outboxd_group_pids "$pid" | tr '\n' ' ')
check_eq "no outboxd worker left after the master exited" "" "${left% }"
check "log lines name role and pid" grep -Eq '(master|relay|consumer|http).*[0-9]+' "$OUTBOXD_LOG"
