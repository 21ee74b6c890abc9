# shellcheck shell=bash disable=SC2034
# relay-lib.sh -- helpers shared by tests/integration/relay-*.sh (sourced
# after common.sh).
#
# relay_conf_write FILE [LINE...]
#	outbox_conf_write FILE (same OB_* knobs), then every LINE (e.g.
#	"lease = 5000") is added inside the relay { } section.
# RELAY_SQL_ORDER
#	SQL text of one order + its order.created outbox row, for
#	"psql -v cust=... -v amount=..."; sql_order CUSTOMER AMOUNT runs it and
#	prints the order id.
# orders_post_bg DIR N INTERVAL PREFIX
#	POST N orders (customerId PREFIX-I), one every INTERVAL seconds, in
#	the background; DIR/I.code is the HTTP status (000 = no answer),
#	DIR/I.json the body, DIR/I.t the epoch ms of the request.  Sets
#	ORDERS_BG_PID (wait for it).
# orders_201_ids DIR
#	order ids of the POSTs in DIR that answered 201, sorted.
# fulfilled_ids
#	orderId of every DynamoDB fulfillment item, sorted.
# wait_fulfilled SECONDS IDFILE
#	wait until every order id in IDFILE has a fulfillment item.
# relay_pids
#	"INDEX PID" of every running relay of the current outboxd (by the
#	process title "outboxd: relay N" inside outboxd's process group).
# fault_ctl [/SUBPATH] [CURL ARGS...]
#	curl the fault proxy's control endpoint $FP/__fault[/SUBPATH].
# sql_orders PREFIX N
#	N orders (customerId PREFIX1..PREFIXN) and their order.created rows,
#	each its own ordering key, written by one transaction.
# order_writers_run WRITERS PER_KEY KEYS MIXED
#	WRITERS concurrent psql sessions each run PER_KEY/WRITERS rounds over
#	keys key-01..KEYS, one autocommitted "SELECT ins_event(KEY, W, F)" per
#	event (the test defines ins_event); F (insert the row before taking the
#	key's counter) alternates when MIXED = 1, else is false.  Odd writers
#	walk the keys up, even ones down, so that every round each meets the
#	others on some key however far random sleeps have moved them apart.
#	Checks that no writer failed.
# order_inversions
#	pairs of 'test.seq' rows of one key whose ids are in the opposite
#	order of their payload's seq (the commit order).
# webhook_receiver_start
#	a fresh whsec_ secret (SECRET, also in $T_DIR/secret) and
#	tests/lib/webhook-receiver.py recording every request in REC
#	($T_DIR/webhook.jsonl); WH is its base URL.
# webhook_conf_write FILE TIMEOUT_MS [LINE...]
#	a configuration for relay.sink = "http" to WH/hooks: one HTTP worker,
#	no consumer, every LINE (e.g. "workers = 4") in the relay { } section.

relay_conf_write() {
	local file=$1 tmp line
	shift
	outbox_conf_write "$file"
	tmp=$file.tmp
	: >"$tmp.lines"
	for line in "$@"; do
		printf '\t%s\n' "$line" >>"$tmp.lines"
	done
	awk -v lf="$tmp.lines" '
		{ print }
		/^relay[[:space:]]*\{/ { while ((getline l < lf) > 0) print l }
	' "$file" >"$tmp"
	mv "$tmp" "$file"
	rm -f "$tmp.lines"
	grep -q '^relay' "$file" || die "relay_conf_write: no relay section in $file"
}

RELAY_SQL_ORDER="WITH o AS (
	INSERT INTO orders (customer_id, amount_cents)
	VALUES (:'cust', :amount)
	RETURNING id, customer_id, amount_cents, created_at),
x AS (INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'order.created', o.id::text,
		jsonb_build_object('orderId', o.id, 'customerId', o.customer_id,
			'amountCents', o.amount_cents, 'createdAt', o.created_at)
	FROM o RETURNING id)
SELECT o.id FROM o"

sql_order() {
	psql -X -v ON_ERROR_STOP=1 -qAt -v cust="$1" -v amount="$2" <<<"$RELAY_SQL_ORDER;"
}

orders_post_bg() {
	local dir=$1 n=$2 interval=$3 prefix=$4
	mkdir -p "$dir"
	(
		trap - ERR EXIT
		set +e
		for i in $(seq 1 "$n"); do
			date +%s%3N >"$dir/$i.t"
			curl -sS -o "$dir/$i.json" -w '%{http_code}\n' --max-time 10 \
				-H 'Content-Type: application/json' \
				--data-binary "{\"customerId\":\"$prefix-$i\",\"amountCents\":$((100 + i))}" \
				"$OUTBOXD_URL/orders" >"$dir/$i.code" 2>"$dir/$i.err" ||
				echo 000 >"$dir/$i.code"
			sleep "$interval"
		done
	) &
	ORDERS_BG_PID=$!
}

orders_201_ids() {
	local dir=$1 f
	for f in "$dir"/*.code; do
		[ "$(cat "$f")" = 201 ] || continue
		jq -r .id "${f%.code}.json"
	done | LC_ALL=C sort
}

# histogram of the answers: "201x48 500x2"
orders_codes() {
	cat "$1"/*.code 2>/dev/null | sort | uniq -c | awk '{ printf "%s%sx%s", sep, $2, $1; sep = " " }'
}

fulfilled_ids() {
	ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" | jq -r '.[].orderId.S' | LC_ALL=C sort
}

_all_fulfilled() {
	fulfilled_ids >"$T_DIR/fulfilled.now" || return 1
	[ -z "$(LC_ALL=C comm -23 "$1" "$T_DIR/fulfilled.now")" ]
}

wait_fulfilled() {
	wait_until "$1" "fulfillments for every order in $2" _all_fulfilled "$2"
}

relay_pids() {
	local pgid
	pgid=$(proc_pid "$OUTBOXD_PIDFILE")
	ps -e -o pid=,pgid=,args= | awk -v g="$pgid" '$2 == g && $3 == "outboxd:" && $4 == "relay" { print $5, $1 }'
}

# owner_of_port LPORT -- pid of the process owning the local end LPORT of a
# connection to the fault proxy (port $FP_PORT)
owner_of_port() {
	ss -tnpH state established "( dport = :$FP_PORT and sport = :$1 )" 2>/dev/null |
		grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2
}

fault_ctl() {
	local path=
	case ${1:-} in /*) path=$1; shift ;; esac
	curl -sS --max-time 10 "$FP/__fault$path" "$@"
}

sql_orders() {
	sql "WITH o AS (
		INSERT INTO orders (customer_id, amount_cents)
		SELECT '$1' || g, 100 + g FROM generate_series(1, $2) g
		RETURNING id, customer_id, amount_cents, created_at)
	INSERT INTO outbox (event_type, ordering_key, payload)
	SELECT 'order.created', o.id::text,
		jsonb_build_object('orderId', o.id, 'customerId', o.customer_id,
			'amountCents', o.amount_cents, 'createdAt', o.created_at)
	FROM o" >/dev/null
}

order_writers_run() {
	local n=$1 per=$2 keys=$3 mixed=$4 w r k f ks p wfail=0 pids=()

	for w in $(seq 1 "$n"); do
		for r in $(seq 1 $((per / n))); do
			if [ $((w % 2)) = 1 ]; then ks=$(seq 1 "$keys"); else ks=$(seq "$keys" -1 1); fi
			for k in $ks; do
				if [ "$mixed" = 1 ] && [ $(((w + r + k) % 2)) = 0 ]; then f=true; else f=false; fi
				printf "SELECT ins_event('key-%02d', %d, %s);\n" "$k" "$w" "$f"
			done
		done >"$T_DIR/writer.$w.sql"
	done
	for w in $(seq 1 "$n"); do
		psql -X -v ON_ERROR_STOP=1 -qAt -f "$T_DIR/writer.$w.sql" >"$T_DIR/writer.$w.out" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || wfail=$((wfail + 1)); done
	check_eq "writers that failed" 0 "$wfail"
}

order_inversions() {
	sql "SELECT count(*) FROM outbox a JOIN outbox b ON a.ordering_key = b.ordering_key AND a.id < b.id
		WHERE a.event_type = 'test.seq' AND (a.payload->>'seq')::int > (b.payload->>'seq')::int"
}

webhook_receiver_start() {
	SECRET="whsec_$(head -c 24 /dev/urandom | base64)"
	printf '%s\n' "$SECRET" >"$T_DIR/secret"
	chmod 0600 "$T_DIR/secret"
	REC=$T_DIR/webhook.jsonl
	proxy_start webhook webhook-receiver.py --secret-file "$T_DIR/secret" --record "$REC"
	WH=http://127.0.0.1:$PROXY_PORT
}

webhook_conf_write() {
	local file=$1 timeout=$2 line
	shift 2
	{
		echo "database = \"$DATABASE_URL\""
		echo "http { listen = \"127.0.0.1:$HTTP_PORT\" workers = 1 }"
		echo "relay {"
		echo "	sink = \"http\""
		for line in "$@"; do
			printf '\t%s\n' "$line"
		done
		echo "}"
		echo "webhook { url = \"$WH/hooks\" secret = \"$SECRET\" timeout = $timeout }"
		echo "consumer { workers = 0 }"
	} >"$file"
}

# webhook_receiver_slow MS -- the receiver answers every request 204 after MS ms.
webhook_receiver_slow() {
	curl -fsS -o /dev/null -X POST "$WH/__control" \
		--data-binary "{\"script\": [], \"default\": {\"status\": 204, \"delay_ms\": $1}}" ||
		die "could not script the receiver"
}

# webhook_drain_once N SECONDS -- with outboxd running: insert N rows (a key
# each), wait up to SECONDS for all to be sent, stop outboxd, and check each
# was sent once (webhook_insert_wait, outboxd_stop, webhook_sent_once).
webhook_drain_once() {
	webhook_insert_wait "$1" "$2"
	outboxd_stop
	webhook_sent_once "$1"
}

# webhook_insert_wait N SECONDS -- insert N rows (a key each) and wait up
# to SECONDS for all to be sent.
webhook_insert_wait() {
	local n=$1
	sql "INSERT INTO outbox (event_type, ordering_key, payload)
		SELECT 'order.created', 'k' || i, json_build_object('n', i)
		FROM generate_series(1, $n) i"
	_all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")" = "$n" ]; }
	wait_until "$2" "all $n rows sent" _all_sent || true
}

# webhook_sent_once N -- the N rows were each sent once: after one attempt,
# one request to the receiver per row, as many distinct webhook-ids.
webhook_sent_once() {
	local n=$1
	check_eq "rows sent" "$n" "$(sql "SELECT count(*) FROM outbox WHERE status = 'sent'")"
	check_eq "rows failed" 0 "$(sql "SELECT count(*) FROM outbox WHERE status = 'failed'")"
	check_eq "rows published more than once (attempts > 1)" 0 \
		"$(sql "SELECT count(*) FROM outbox WHERE attempts > 1")"
	check_eq "requests the receiver got (one per row)" "$n" "$(wc -l <"$REC")"
	check_eq "distinct webhook-ids among them" "$n" \
		"$(jq -r '.headers["webhook-id"]' "$REC" | sort -u | wc -l)"
}
