# load.sh -- an order load generator and the checks that go with it, plus
# helpers to look at the master's children (sourced after common.sh; the
# master-*.sh scenarios use it).
#
# ---- load --------------------------------------------------------------------
# load_start NAME [load-gen.py OPTIONS]
#	Start tests/lib/load-gen.py against $OUTBOXD_URL in the background:
#	a steady stream of POST /orders (default 4 threads, 60 requests/s in
#	all, a new connection per request; --keepalive reuses connections,
#	--rate R, --threads N).  Its files are $T_DIR/NAME.ids ("ID CUSTOMER"
#	per 201), $T_DIR/NAME.fail (a JSON line per failed request) and, once
#	stopped, $T_DIR/NAME.stats (see load-gen.py); its own output goes to
#	$T_DIR/NAME.load.log.  Stopped at exit.
# load_stop NAME	SIGTERM; waits until the requests in progress ended.
# load_stat NAME FILTER	jq FILTER on NAME.stats (load_stop first)
# load_created NAME	201s so far
# load_wait_created NAME N SECONDS	wait until N more 201s than now
# load_summary NAME	one line: sent, created, failures by kind, stale
# load_failed_stored NAME	failed requests whose order is in the database
#	anyway (the answer was lost after the commit), as "CUSTOMER KIND"
#
# ---- outcomes ----------------------------------------------------------------
# wait_fulfilled IDFILE SECONDS
#	Wait until every order id in IDFILE (first column) has a DynamoDB
#	item; says how long it took; returns 1 on timeout (MISSING = count).
# check_orders_stored IDFILE WHAT
#	PASS/FAIL: every id in IDFILE has its orders row and its outbox row.
# wait_outbox_sent SECONDS
#	Wait until no outbox row is left other than 'sent' (a row a killed
#	relay had claimed waits for its lease to end).
# check_fulfilled_once IDFILE WHAT
#	PASS/FAIL: every id in IDFILE has a fulfillment item; every orders row
#	has exactly one item and every item an order; every outbox row 'sent'.
#
# ---- configuration -----------------------------------------------------------
# conf_set FILE SECTION KEY VALUE
#	Set KEY = VALUE inside "SECTION {" of FILE (added if absent); the new
#	file replaces the old by rename, so a reload never reads half of it.
#
# ---- the master's children ---------------------------------------------------
# children PID		"PID STAT TITLE" for each child of PID
# count_role PID ROLE	children titled "outboxd: ROLE N"
# child_pid PID TITLE	pid of the child with exactly that title
# zombies PID		children of PID in state Z (<defunct>), "PID TITLE"
# wait_counts PID SECONDS H R C	wait until PID has exactly H http, R relay,
#	C consumer children and no other child
# group_running PGID	processes of that process group still running (a
#	zombie is not: an orphan's exit status waits for init to collect it)

LOAD_PY=$T_LIB/load-gen.py

load_start() {
	local name=$1
	shift
	: "${OUTBOXD_URL:?}"
	rm -f "$T_DIR/$name.ids" "$T_DIR/$name.fail" "$T_DIR/$name.stats"
	touch "$T_DIR/$name.ids" "$T_DIR/$name.fail"
	add_log "$T_DIR/$name.load.log"
	on_exit "load_stop '$name' >/dev/null"
	proc_start "$T_DIR/$name.load.pid" "$T_DIR/$name.load.log" "$PY" "$LOAD_PY" \
		--url "$OUTBOXD_URL" --out "$T_DIR/$name" --tag "$name" "$@" ||
		die "could not start the load generator $name"
	say "load $name started ($*)"
}

load_stop() {
	local name=$1 pf=$T_DIR/$1.load.pid i
	[ -f "$pf" ] || return 0
	kill -TERM "$(proc_pid "$pf")" 2>/dev/null || true
	for i in $(seq 1 300); do
		proc_alive "$pf" || break
		sleep 0.1
	done
	proc_stop "$pf" 2
	[ -s "$T_DIR/$name.stats" ] || { say "load $name left no stats"; return 1; }
	say "load $name stopped: $(load_summary "$name")"
}

load_stat() { jq -r "$2" "$T_DIR/$1.stats"; }

load_created() { wc -l <"$T_DIR/$1.ids" | tr -d ' '; }

load_wait_created() {
	local name=$1 want
	want=$(($(load_created "$name") + $2))
	_load_has() { [ "$(load_created "$1")" -ge "$2" ]; }
	wait_until "$3" "$2 more orders from load $name" _load_has "$name" "$want"
}

load_summary() {
	local f=$T_DIR/$1.stats
	if [ -s "$f" ]; then
		jq -r '"sent \(.sent), 201 \(.created), failed \(.failed) (refused \(.refused), reset \(.reset), timeout \(.timeout), error \(.error), http \(.http | tostring)), stale keep-alive retried \(.stale), \(((.last_ms - .first_ms) / 1000) | floor) s"' "$f"
	else
		echo "201 so far $(load_created "$1"), failed so far $(wc -l <"$T_DIR/$1.fail")"
	fi
}

load_failed_stored() {
	local name=$1 list
	list=$(jq -r '.customer' "$T_DIR/$name.fail" | sed "s/'/''/g; s/.*/'&'/" | paste -sd, -)
	[ -n "$list" ] || return 0
	sql "SELECT customer_id FROM orders WHERE customer_id IN ($list)" |
		LC_ALL=C sort >"$T_DIR/$name.stored"
	[ -s "$T_DIR/$name.stored" ] || return 0
	jq -r '"\(.customer) \(.kind)"' "$T_DIR/$name.fail" | LC_ALL=C sort >"$T_DIR/$name.failkinds"
	LC_ALL=C join "$T_DIR/$name.stored" "$T_DIR/$name.failkinds"
}

# ---- outcomes ----------------------------------------------------------------

# _items_ids FILE -- the orderId of every fulfillment item, sorted
_items_ids() {
	ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" | jq -r '.[].orderId.S' | LC_ALL=C sort >"$1"
}

wait_fulfilled() {
	local ids=$1 secs=$2 t0 deadline
	t0=$(now_ms)
	deadline=$((t0 + secs * 1000))
	cut -d' ' -f1 "$ids" | LC_ALL=C sort -u >"$T_DIR/want.ids"
	while :; do
		if _items_ids "$T_DIR/have.ids"; then
			MISSING=$(LC_ALL=C comm -23 "$T_DIR/want.ids" "$T_DIR/have.ids" | wc -l)
			if [ "$MISSING" = 0 ]; then
				say "all $(wc -l <"$T_DIR/want.ids") orders fulfilled ($(($(now_ms) - t0)) ms of waiting)"
				return 0
			fi
		fi
		if [ "$(now_ms)" -ge $deadline ]; then
			say "after ${secs}s, $MISSING of $(wc -l <"$T_DIR/want.ids") orders have no fulfillment item"
			return 1
		fi
		sleep 1
	done
}

_outbox_all_sent() { [ "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")" = 0 ]; }

wait_outbox_sent() {
	local t0
	t0=$(now_ms)
	if wait_until "$1" "every outbox row 'sent'" _outbox_all_sent; then
		say "every outbox row 'sent' ($(($(now_ms) - t0)) ms of waiting)"
	else
		say "outbox rows by status: $(sql "SELECT string_agg(status || ' ' || n, ', ') FROM (SELECT status, count(*) n FROM outbox GROUP BY 1) s")"
		return 1
	fi
}

check_orders_stored() {
	local ids=$1 what=$2 n
	cut -d' ' -f1 "$ids" | LC_ALL=C sort -u >"$T_DIR/s.want"
	n=$(wc -l <"$T_DIR/s.want")
	sql "SELECT id FROM orders" | LC_ALL=C sort >"$T_DIR/s.orders"
	sql "SELECT ordering_key FROM outbox WHERE event_type = 'order.created'" |
		LC_ALL=C sort >"$T_DIR/s.outbox"
	check_eq "$what: $n orders answered 201 without an orders row" 0 \
		"$(LC_ALL=C comm -23 "$T_DIR/s.want" "$T_DIR/s.orders" | wc -l)"
	check_eq "$what: $n orders answered 201 without an outbox row" 0 \
		"$(LC_ALL=C comm -23 "$T_DIR/s.want" "$T_DIR/s.outbox" | wc -l)"
	check_eq "$what: outbox rows per order (orders with other than one)" 0 \
		"$(uniq -c "$T_DIR/s.outbox" | awk '$1 != 1' | wc -l)"
}

check_fulfilled_once() {
	local ids=$1 what=$2 n
	cut -d' ' -f1 "$ids" | LC_ALL=C sort -u >"$T_DIR/f.want"
	n=$(wc -l <"$T_DIR/f.want")
	check_eq "$what: distinct order ids among the 201s" "$(wc -l <"$ids" | tr -d ' ')" "$n"
	ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" >"$T_DIR/f.items.json"
	jq -r '.[].orderId.S' "$T_DIR/f.items.json" | LC_ALL=C sort >"$T_DIR/f.items"
	sql "SELECT id FROM orders" | LC_ALL=C sort >"$T_DIR/f.orders"
	check_eq "$what: of $n orders answered 201, without a fulfillment item" 0 \
		"$(LC_ALL=C comm -23 "$T_DIR/f.want" "$T_DIR/f.items" | wc -l)"
	check_eq "$what: fulfillment items with the same orderId twice" 0 \
		"$(uniq -d "$T_DIR/f.items" | wc -l)"
	check_eq "$what: fulfillment items = orders rows" "$(wc -l <"$T_DIR/f.orders")" \
		"$(wc -l <"$T_DIR/f.items")"
	check_eq "$what: orders rows without an item, items without an order" "0 0" \
		"$(LC_ALL=C comm -23 "$T_DIR/f.orders" "$T_DIR/f.items" | wc -l) $(LC_ALL=C comm -13 "$T_DIR/f.orders" "$T_DIR/f.items" | wc -l)"
	check_eq "$what: outbox rows not 'sent'" 0 "$(sql "SELECT count(*) FROM outbox WHERE status <> 'sent'")"
}

# ---- configuration -----------------------------------------------------------

conf_set() {
	local file=$1
	awk -v s="$2" -v k="$3" -v v="$4" '
		$1 == s && $2 == "{" { in_sec = 1; print; next }
		in_sec && $1 == k && $2 == "=" { print "\t" k " = " v; done = 1; next }
		in_sec && $1 == "}" { if (!done) print "\t" k " = " v; in_sec = 0; done = 0 }
		{ print }' "$file" >"$file.new" && mv "$file.new" "$file"
}

# ---- the master's children ---------------------------------------------------

children() { ps --ppid "$1" -o pid=,stat=,args= 2>/dev/null | sed 's/^ *//' || true; }

count_role() {
	children "$1" | awk -v r="$2" '$3 == "outboxd:" && $4 == r && $5 ~ /^[0-9]+$/ && NF == 5' | wc -l
}

child_pid() {
	children "$1" | awk -v t="$2" '{ p = $1; $1 = ""; $2 = ""; sub(/^  /, ""); if ($0 == t) print p }'
}

zombies() { children "$1" | awk '$2 ~ /^Z/ { print }'; }

group_running() {
	ps -e -o pid=,pgid=,stat= | awk -v g="$1" '$2 == g && $3 !~ /^Z/ { print $1 }'
}

_counts_are() {
	local pid=$1
	[ "$(count_role "$pid" http)" = "$2" ] &&
	[ "$(count_role "$pid" relay)" = "$3" ] &&
	[ "$(count_role "$pid" consumer)" = "$4" ] &&
	[ "$(children "$pid" | wc -l)" = $(($2 + $3 + $4)) ]
}

wait_counts() {
	local pid=$1 secs=$2
	shift 2
	wait_until "$secs" "children: $1 http, $2 relay, $3 consumer" _counts_are "$pid" "$@"
}

# counts_now PID -- "H http, R relay, C consumer, N in all"
counts_now() {
	echo "$(count_role "$1" http) http, $(count_role "$1" relay) relay, $(count_role "$1" consumer) consumer, $(children "$1" | wc -l) in all"
}
