#!/usr/bin/env bash
# soak.sh -- a chaos soak across two outboxd hosts (issue 29): orders at a
# steady rate against two masters, each in a network namespace of its own,
# sharing one PostgreSQL and the emulators, while a seeded random schedule
# of faults runs; then the faults stop, the system drains (bounded), and
# tests/soak/check.py checks every record.  Bounded in time (SOAK_SECONDS
# of load + at most SOAK_DRAIN s of drain) and in count (SOAK_RATE orders
# a second at most); stops by itself; the EXIT trap removes everything it
# made (namespaces, veth pairs, nftables rules live in the namespaces and
# go with them, processes, the scratch directory).
#
#   tests/soak/soak.sh            (as root: ip netns, nft)
# Environment:
#   SOAK_SECONDS  seconds of load and faults (default 300)
#   SOAK_RATE     orders a second, both hosts together (default 100)
#   SOAK_SEED     seed of the fault schedule (default: random, printed);
#                 the same seed and SOAK_SECONDS replay the same schedule
#   SOAK_DRAIN    most seconds to wait for the drain (default 240)
#   SOAK_BREAK    break the result on purpose before the checker, to see
#                 it fail: "item" deletes one fulfillment item, "failed"
#                 marks one outbox row failed, "secret" writes the AWS
#                 secret key into a log, "order" swaps two messages of one
#                 key as read back from the FIFO queue
#   OUTBOXD_TEST_KEEP=1  keep the scratch directory (logs, schedule, rows)
#
# The layout (one private /24, 10.A.B.0/24, picked so that it overlaps
# no route of the machine):
#   root namespace: PostgreSQL, fauxqs (SQS), dynalite (DynamoDB) and the
#     webhook receiver on loopback; tests/lib/fault-proxy.py in front of
#     fauxqs and of dynalite (HTTP 500, timeouts, connections dropped
#     after the write); per host a tests/lib/net-relay.py listening on the
#     root end of that host's veth (10.A.B.1 for a, .5 for b), forwarding
#     to the database, the fault proxies and the webhook receiver.
#   namespace a (10.A.B.2/30) and b (10.A.B.6/30): one outboxd master each
#     (2 HTTP workers, 2 relays, 1 consumer), the same outbox.conf shape,
#     run by tests/soak/supervise.sh (restarted as systemd would).
#   The load (tests/lib/load-gen.py, half the rate to each host) and the
#     keyed-event writer (psql on loopback) run in the root namespace.
# What stands in for netem: this kernel has no netem qdisc ("Specified
# qdisc kind is unknown"; neither fq, etf nor cake, so no EDT delay with a
# BPF program either).  Packet loss is nftables in the host's namespace
# ("numgen random mod 100 < PCT drop" on the packets to and from the
# root-namespace services, both ways); a partition is an nftables drop of
# all of them (the connections stay open and hear nothing, as with a cut
# link, which "ip link set down" would not give the load generator's side
# only); delay is net-relay.py, which is always on the path and holds every
# chunk for the delay while the schedule says so.  The HTTP side (load
# generator to the hosts) is never faulted: clients keep reaching a host
# that cannot reach its database.
#
# Settings that the soak needs and say so: relay.max_attempts = 1000 (the
# faults overlap; a row given up after 10 attempts would be a "failed"
# row for the checker, not a bug), the order queue's maxReceiveCount 1000
# (a DynamoDB outage must not dead-letter orders), short leases and
# timeouts (relay.timeout 2 s, lease 6 s) so faults resolve quickly.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
T_NAME=soak
SOAK=$(cd "$(dirname "$0")" && pwd)

SECONDS_RUN=${SOAK_SECONDS:-300}
RATE=${SOAK_RATE:-100}
SEED=${SOAK_SEED:-$(( $(od -An -N4 -tu4 /dev/urandom) ))}
DRAIN=${SOAK_DRAIN:-240}
RELAY_TIMEOUT=2000
DDB_CLIENT_TIMEOUT=10000	# consumer.c CONSUMER_WRITE_TIMEOUT

test_init
need_binaries
[ "$(id -u)" = 0 ] || die "the soak needs root (ip netns, nft)"
for c in ip nft runuser od; do
	command -v "$c" >/dev/null || die "missing dependency: $c (apt-get install iproute2 nftables)"
done
ip netns list >/dev/null 2>&1 || die "ip netns does not work here"
nft list tables >/dev/null 2>&1 || die "nft does not work here (nf_tables missing from the kernel?)"
BINDIR=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$BINDIR/pg_ctl" ] || die "no pg_ctl under /usr/lib/postgresql/*/bin"
say "seed $SEED, $SECONDS_RUN s at $RATE orders/s, drain at most $DRAIN s (replay: SOAK_SEED=$SEED SOAK_SECONDS=$SECONDS_RUN)"

# ---- the network -------------------------------------------------------------
pick_net() {
	local i a b
	for i in $(seq 0 50); do
		a=$((200 + ($$ + i * 7) % 50))
		b=$(((($$ / 50) + i * 13) % 256))
		if ! ip -4 route show table all | grep -q "10\.$a\.$b\." &&
			! ip -4 addr | grep -q "inet 10\.$a\.$b\."; then
			echo "10.$a.$b"
			return 0
		fi
	done
	return 1
}
NET=$(pick_net) || die "no free 10.x.y.0/24 found"
ID=$(($$ % 10000))
declare -A NS ROOT_IP HOST_IP VR VN
NS[a]=obsoak$ID-a; NS[b]=obsoak$ID-b
ROOT_IP[a]=$NET.1; HOST_IP[a]=$NET.2
ROOT_IP[b]=$NET.5; HOST_IP[b]=$NET.6
VR[a]=osk${ID}ar; VN[a]=osk${ID}an
VR[b]=osk${ID}br; VN[b]=osk${ID}bn

net_down() {
	local h pid
	for h in a b; do
		ip netns list 2>/dev/null | grep -q "^${NS[$h]}\b" || continue
		for pid in $(ip netns pids "${NS[$h]}" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
		ip netns del "${NS[$h]}" 2>/dev/null	# the veth pair goes with it
		ip link del "${VR[$h]}" 2>/dev/null
	done
	return 0
}
on_exit net_down
for h in a b; do
	ip netns add "${NS[$h]}" || die "ip netns add ${NS[$h]}"
	ip link add "${VR[$h]}" type veth peer name "${VN[$h]}" || die "ip link add veth"
	ip link set "${VN[$h]}" netns "${NS[$h]}"
	ip addr add "${ROOT_IP[$h]}/30" dev "${VR[$h]}"
	ip link set "${VR[$h]}" up
	ip -n "${NS[$h]}" addr add "${HOST_IP[$h]}/30" dev "${VN[$h]}"
	ip -n "${NS[$h]}" link set "${VN[$h]}" up
	ip -n "${NS[$h]}" link set lo up
done
veth_up() { ip -n "${NS[$1]}" -o link show up | grep -q "${VN[$1]}@"; }
wait_until 10 "the veth pairs up" veth_up a || die "the veth of ${NS[a]} is not up"
wait_until 10 "the veth pairs up" veth_up b || die "the veth of ${NS[b]} is not up"
say "network $NET.0/24: host a ${HOST_IP[a]} (namespace ${NS[a]}), host b ${HOST_IP[b]} (${NS[b]})"

# ---- the stack ---------------------------------------------------------------
# synchronous_commit back on (the test stack turns it off): with it off a
# PostgreSQL crash (pg-restart is an immediate shutdown) loses commits the
# server had acknowledged, by design -- the first soak run saw exactly that,
# 201s whose orders were gone, published and fulfilled before the crash.
# fsync can stay off: the server process dies, not the machine.
PG_EXTRA_CONF="synchronous_commit = on" STACK_MAX_RECEIVE=1000 STACK_VISIBILITY_TIMEOUT=5 stack_up
FIFO_URL=$(aws_call sqs "$SQS_ENDPOINT" CreateQueue '{"QueueName":"soak-keys.fifo",
	"Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"false","VisibilityTimeout":"10"}}' |
	jq -er .QueueUrl) || die "CreateQueue soak-keys.fifo failed"
webhook_receiver_start
WH_PORT=${WH##*:}

# svc_start NAME SCRIPT ARGS... -- a tests/lib python service on a port it
# picks and reports (no --stats: fault-proxy would rewrite its whole state
# on every request); sets SVC_PORT.
svc_start() {
	local name=$1 script=$2 pf=$T_DIR/$1.port i
	shift 2
	add_log "$T_DIR/$name.log"
	on_exit "proc_stop '$T_DIR/$name.pid' 5"
	proc_start "$T_DIR/$name.pid" "$T_DIR/$name.log" "$PY" "$T_LIB/$script" \
		--port 0 --port-file "$pf" "$@" || die "could not start $script"
	for i in $(seq 1 100); do
		[ -s "$pf" ] && break
		proc_alive "$T_DIR/$name.pid" || die "$script exited at start"
		sleep 0.05
	done
	SVC_PORT=$(cat "$pf")
}
svc_start fp-sqs fault-proxy.py --upstream "$SQS_ENDPOINT"
FP_SQS=http://127.0.0.1:$SVC_PORT
svc_start fp-ddb fault-proxy.py --upstream "$DDB_ENDPOINT"
FP_DDB=http://127.0.0.1:$SVC_PORT

# per host: a net relay on the root end of its veth, one port per service
read -r P_PG P_SQS P_DDB P_WH HTTP_PORT <<<"$("$T_LIB/free-port" 5 | paste -sd' ')"
for h in a b; do
	echo '{}' >"$T_DIR/net-$h.json"
	add_log "$T_DIR/net-$h.log"
	on_exit "proc_stop '$T_DIR/net-$h.pid' 5"
	proc_start "$T_DIR/net-$h.pid" "$T_DIR/net-$h.log" "$PY" "$T_LIB/net-relay.py" \
		--control "$T_DIR/net-$h.json" --stats "$T_DIR/net-$h.stats" \
		--map "${ROOT_IP[$h]}:$P_PG=127.0.0.1:$PGPORT" \
		--map "${ROOT_IP[$h]}:$P_SQS=127.0.0.1:${FP_SQS##*:}" \
		--map "${ROOT_IP[$h]}:$P_DDB=127.0.0.1:${FP_DDB##*:}" \
		--map "${ROOT_IP[$h]}:$P_WH=127.0.0.1:$WH_PORT" || die "net-relay $h"
done
PORTS="$P_PG, $P_SQS, $P_DDB, $P_WH"

# ---- the secrets and the configuration ---------------------------------------
AKID=AKIDSOAK$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)
ASECRET=soak-secret-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '%s\n%s\n%s\n' "$AKID" "$ASECRET" "$SECRET" >"$T_DIR/secrets"
chmod 0600 "$T_DIR/secrets"

# conf HOST -- the host's outbox.conf: the same shape on both, only the
# addresses differ
conf() {
	local h=$1 r=${ROOT_IP[$1]}
	cat >"$T_DIR/outbox-$h.conf" <<CONF
# tests/soak/soak.sh, host $h
database = "postgresql://postgres@$r:$P_PG/outboxd?connect_timeout=3"
log_level = "info"
shutdown_timeout = 5000

http {
	listen = "${HOST_IP[$h]}:$HTTP_PORT"
	workers = 2
}

relay {
	workers = 2
	batch_size = 10
	poll_interval = 200
	lease = 6000
	timeout = $RELAY_TIMEOUT
	max_attempts = 1000
	backoff_base = 100
	backoff_max = 2000
}

consumer {
	workers = 1
	wait_time = 1
}

aws {
	region = "us-east-1"
	access_key_id = "$AKID"
	secret_access_key = "$ASECRET"
}

sqs {
	queue_url = "$QUEUE_URL"
	endpoint_url = "http://$r:$P_SQS"
}

dynamodb {
	table = "fulfillments"
	endpoint_url = "http://$r:$P_DDB"
}

destination keys {
	sink = "sqs"
	queue_url = "$FIFO_URL"
}

destination hooks {
	sink = "http"
	url = "http://$r:$P_WH/hooks"
	secret = "$SECRET"
	timeout = $RELAY_TIMEOUT
}
CONF
	chmod 0600 "$T_DIR/outbox-$h.conf"
}

for h in a b; do
	conf "$h"
	"$T_ROOT/outboxd" -t -c "$T_DIR/outbox-$h.conf" >"$T_DIR/check-$h.out" 2>&1 ||
		{ cat "$T_DIR/check-$h.out"; die "outbox-$h.conf refused"; }
	mkdir -p "$T_DIR/host-$h"
	add_log "$T_DIR/host-$h/outboxd.log"
	on_exit "proc_stop '$T_DIR/sup-$h.pid' 20"
	proc_start "$T_DIR/sup-$h.pid" "$T_DIR/sup-$h.log" \
		bash "$SOAK/supervise.sh" "${NS[$h]}" "$T_DIR/outbox-$h.conf" "$T_DIR/host-$h" ||
		die "supervise.sh $h"
done
host_healthy() { curl -fsS -o /dev/null --max-time 2 "http://${HOST_IP[$1]}:$HTTP_PORT/healthz"; }
for h in a b; do
	wait_until 30 "host $h healthy" host_healthy "$h" ||
		{ tail -n 30 "$T_DIR/host-$h/outboxd.log"; die "host $h did not become healthy"; }
done
say "both hosts healthy (http://${HOST_IP[a]}:$HTTP_PORT, http://${HOST_IP[b]}:$HTTP_PORT)"

# ---- the fault schedule ---------------------------------------------------------
"$PY" "$SOAK/schedule.py" "$SEED" "$SECONDS_RUN" >"$T_DIR/schedule" || die "schedule.py failed"
say "fault schedule (seed $SEED, $(wc -l <"$T_DIR/schedule") actions; ms from the start of the load):"
sed 's/^/    /' "$T_DIR/schedule"
RANDOM=$SEED	# the worker a kill picks, replayable too

# nft_set HOST loss PCT | partition | heal -- rules on the packets between
# HOST's namespace and the root-namespace services (never its HTTP side)
nft_set() {
	local h=$1 what=$2 ns=${NS[$1]} r=${ROOT_IP[$1]} verdict= out= in=
	case $what in
	loss)	verdict="numgen random mod 100 < $3 drop" ;;
	partition) verdict=drop ;;
	heal)	;;
	esac
	if [ -n "$verdict" ]; then
		out="ip daddr $r tcp dport { $PORTS } $verdict"
		in="ip saddr $r tcp sport { $PORTS } $verdict"
	fi
	ip netns exec "$ns" nft -f - <<NFT
table inet soak
delete table inet soak
table inet soak {
	chain soak_out {
		type filter hook output priority 0; policy accept;
		$out
	}
	chain soak_in {
		type filter hook input priority 0; policy accept;
		$in
	}
}
NFT
}
net_delay() { echo "{\"delay_ms\": $2}" >"$T_DIR/net-$1.json.tmp" && mv "$T_DIR/net-$1.json.tmp" "$T_DIR/net-$1.json"; }
fp() { curl -sS -o /dev/null --max-time 5 -X POST "$1/__fault" -d "$2"; }

# kill_worker HOST TITLE -- kill -9 one of the master's workers titled
# "outboxd: TITLE N" (picked with $RANDOM)
kill_worker() {
	local h=$1 title=$2 m pids n
	m=$(cat "$T_DIR/host-$h/master.pid" 2>/dev/null) || return 1
	mapfile -t pids < <(ps -o pid=,args= --ppid "$m" | awk -v t="$title" '$2 == "outboxd:" && $3 == t { print $1 }')
	n=${#pids[@]}
	[ "$n" -gt 0 ] || return 1
	kill -KILL "${pids[$((RANDOM % n))]}"
}

pg_restart() {
	runuser -u postgres -- "$BINDIR/pg_ctl" -D "$T_STACK/pg/data" -m immediate -w -t 60 \
		-l "$T_STACK/pg/pg.log" restart </dev/null >>"$T_DIR/pg-restart.log" 2>&1
}

declare -A FAULTS
# fault LINE... -- carry out one schedule action; counts it (or its miss)
fault() {
	local kind=$1 ok=1
	shift
	case $kind in
	kill-http)	kill_worker "$1" http || ok=0 ;;
	kill-relay)	kill_worker "$1" relay || ok=0 ;;
	kill-consumer)	kill_worker "$1" consumer || ok=0 ;;
	kill-master)	kill -KILL "$(cat "$T_DIR/host-$1/master.pid")" 2>/dev/null || ok=0 ;;
	pg-restart)	pg_restart || ok=0 ;;
	sqs-500)	fp "$FP_SQS" "{\"mode\":\"status\",\"status\":500,\"seconds\":$1}" || ok=0 ;;
	ddb-500)	fp "$FP_DDB" "{\"mode\":\"status\",\"status\":500,\"seconds\":$1}" || ok=0 ;;
	sqs-timeout)	fp "$FP_SQS" "{\"mode\":\"delay\",\"ms\":$((RELAY_TIMEOUT + 1000)),\"seconds\":$1}" || ok=0 ;;
	ddb-timeout)	fp "$FP_DDB" "{\"mode\":\"delay\",\"ms\":$((DDB_CLIENT_TIMEOUT + 1000)),\"seconds\":$1}" || ok=0 ;;
	sqs-drop)	fp "$FP_SQS" "{\"mode\":\"drop\",\"seconds\":$1}" || ok=0 ;;
	ddb-drop)	fp "$FP_DDB" "{\"mode\":\"drop\",\"seconds\":$1}" || ok=0 ;;
	net-loss)	nft_set "$1" loss "$2" || ok=0 ;;
	net-delay)	{ nft_set "$1" heal && net_delay "$1" "$2"; } || ok=0 ;;
	net-partition)	{ net_delay "$1" 0 && nft_set "$1" partition; } || ok=0 ;;
	net-heal)	{ net_delay "$1" 0 && nft_set "$1" heal; } || ok=0 ;;
	*)		say "unknown fault kind $kind"; ok=0 ;;
	esac
	if [ $ok = 1 ]; then
		FAULTS[$kind]=$((${FAULTS[$kind]:-0} + 1))
	else
		FAULTS[$kind-missed]=$((${FAULTS[$kind-missed]:-0} + 1))
		say "fault $kind $* could not be carried out"
	fi
}

# ---- the run -----------------------------------------------------------------
# keyed events: 16 keys, each with its own increasing seq, ~20 a second,
# one autocommitted INSERT each (a failed one leaves a gap, never a step
# back); every 10th event goes to the webhook instead
keyed_writer() {
	trap - ERR EXIT
	set +e
	local end=$1 n=0 k q
	declare -A seq
	while [ "$(date +%s)" -lt "$end" ]; do
		q=
		for _ in 1 2 3 4; do
			n=$((n + 1))
			k=k-$((n % 16))
			if [ $((n % 10)) = 0 ]; then
				q+="INSERT INTO outbox (event_type, ordering_key, payload, destination) VALUES ('soak.hook', 'h-$n', '{\"n\": $n}', 'hooks');"$'\n'
			else
				seq[$k]=$((${seq[$k]:-0} + 1))
				q+="INSERT INTO outbox (event_type, ordering_key, payload, destination) VALUES ('soak.seq', '$k', '{\"key\": \"$k\", \"seq\": ${seq[$k]}}', 'keys');"$'\n'
			fi
		done
		timeout 10 psql -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d outboxd <<<"$q" >/dev/null 2>>"$T_DIR/keyed.err"
		sleep 0.2
	done
}

T_START=$(now_ms)
END=$(( T_START / 1000 + SECONDS_RUN ))
for h in a b; do
	on_exit "proc_stop '$T_DIR/load-$h.pid' 20"
	proc_start "$T_DIR/load-$h.pid" "$T_DIR/load-$h.log" "$PY" "$T_LIB/load-gen.py" \
		--url "http://${HOST_IP[$h]}:$HTTP_PORT" --out "$T_DIR/load-$h" \
		--threads "$(( RATE / 8 > 16 ? RATE / 8 : 16 ))" --rate "$(awk -v r="$RATE" 'BEGIN { print r / 2 }')" \
		--tag "soak$h" --timeout 5 --duration "$SECONDS_RUN" || die "load-gen $h"
done
keyed_writer "$END" &
KEYED_PID=$!
on_exit "kill $KEYED_PID 2>/dev/null"
say "load started: $RATE orders/s for $SECONDS_RUN s, keyed events ~20/s"

while read -r t kind args; do
	d=$(( T_START + t - $(now_ms) ))
	[ $d -le 0 ] || sleep "$(awk -v d="$d" 'BEGIN { printf "%.3f", d / 1000 }')"
	echo "$(( $(now_ms) - T_START )) $kind $args" >>"$T_DIR/faults.done"
	# shellcheck disable=SC2086
	fault "$kind" $args
done <"$T_DIR/schedule"
say "all $(wc -l <"$T_DIR/schedule") scheduled actions done; healing everything"
for h in a b; do net_delay "$h" 0; nft_set "$h" heal; done
fp "$FP_SQS" '{"mode":"pass"}'
fp "$FP_DDB" '{"mode":"pass"}'

load_done() { [ -s "$T_DIR/load-a.stats" ] && [ -s "$T_DIR/load-b.stats" ]; }
wait_until $((SECONDS_RUN + 60)) "the load generators to end" load_done || fail "load generators did not end"
wait "$KEYED_PID" 2>/dev/null
say "load done after $(( ($(now_ms) - T_START) / 1000 )) s: $(cat "$T_DIR/load-a.stats") / $(cat "$T_DIR/load-b.stats")"

# ---- the drain -----------------------------------------------------------------
not_sent() { sql "SELECT count(*) FROM outbox WHERE status <> 'sent'"; }
drained() {
	[ "$(not_sent)" = 0 ] && [ "$(queue_in_queue)" = "0+0" ]
}
t0=$(now_ms)
wait_until "$DRAIN" "every outbox row sent and the order queue empty" drained || true
say "drain: $(( ($(now_ms) - t0) / 1000 )) s; outbox rows not sent: $(not_sent); order queue visible+in flight: $(queue_in_queue)"
for h in a b; do host_healthy "$h" && pass "host $h healthy after the soak" || fail "host $h not healthy after the soak"; done

# stop the masters first (their logs are complete), then read the FIFO queue
for h in a b; do proc_stop "$T_DIR/sup-$h.pid" 20; done
"$PY" "$T_LIB/sqs-drain.py" --endpoint "$SQS_ENDPOINT" --queue-url "$FIFO_URL" --idle 3 \
	>"$T_DIR/fifo.tsv" 2>"$T_DIR/fifo.err" || true

case ${SOAK_BREAK:-} in
"")	;;
item)	id=$(sql "SELECT id FROM orders ORDER BY random() LIMIT 1")
	say "SOAK_BREAK=item: deleting the fulfillment item of order $id"
	aws_call dynamodb "$DDB_ENDPOINT" DeleteItem \
		"{\"TableName\":\"fulfillments\",\"Key\":{\"orderId\":{\"S\":\"$id\"}}}" >/dev/null ;;
failed)	say "SOAK_BREAK=failed: marking one outbox row failed"
	sql "UPDATE outbox SET status = 'failed' WHERE id = (SELECT min(id) FROM outbox)" ;;
secret)	say "SOAK_BREAK=secret: writing the AWS secret key into host a's log"
	echo "oops $ASECRET" >>"$T_DIR/host-a/outboxd.log" ;;
order)	say "SOAK_BREAK=order: swapping the first two messages of key k-1 as read from the FIFO queue"
	awk -F'\t' '$1 == "k-1" && n < 2 { held[n++] = $0; if (n == 2) { print held[1]; print held[0] } next } { print }' \
		"$T_DIR/fifo.tsv" >"$T_DIR/fifo.tsv.tmp" && mv "$T_DIR/fifo.tsv.tmp" "$T_DIR/fifo.tsv" ;;
*)	die "SOAK_BREAK must be item, failed, secret or order" ;;
esac

# ---- the check -------------------------------------------------------------------
psql -X -qAt -v ON_ERROR_STOP=1 -c "\\copy (SELECT id, customer_id, amount_cents FROM orders) TO '$T_DIR/orders.tsv'" ||
	fail "reading the orders"
psql -X -qAt -v ON_ERROR_STOP=1 -c "\\copy (SELECT id, event_type, status, coalesce(destination, ''), ordering_key,
	coalesce(payload->>'orderId', ''), coalesce(payload->>'customerId', ''), coalesce(payload->>'amountCents', ''),
	coalesce(payload->>'seq', ''), attempts FROM outbox) TO '$T_DIR/outbox.tsv'" || fail "reading the outbox"
{
	for h in a b; do
		# every exit but the last (the soak's own stop) was restarted
		echo "restarts_$h $(($(wc -l <"$T_DIR/host-$h/restarts") - 1))"
	done
	for k in "${!FAULTS[@]}"; do echo "fault_$k ${FAULTS[$k]}"; done
	for n in sqs ddb; do
		echo "proxy_faulted_$n $(curl -sS --max-time 10 "http://127.0.0.1:$(cat "$T_DIR/fp-$n.port")/__fault" | jq .stats.faulted_requests)"
	done
	for h in a b; do echo "net_delayed_chunks_$h $(jq .delayed_chunks "$T_DIR/net-$h.stats")"; done
	echo "pg_restart_errors $(grep -c . "$T_DIR/keyed.err" 2>/dev/null || echo 0)"
} >"$T_DIR/figures.in"

rc=0
"$PY" "$SOAK/check.py" --dir "$T_DIR" --ddb "$DDB_ENDPOINT" --seed "$SEED" \
	--seconds "$SECONDS_RUN" --rate "$RATE" >"$T_DIR/check.out" 2>&1 || rc=$?
cat "$T_DIR/check.out"
np=$(grep -c '^PASS' "$T_DIR/check.out" || true)
nf=$(grep -c '^FAIL' "$T_DIR/check.out" || true)
T_PASS=$((T_PASS + np))
T_FAIL=$((T_FAIL + nf))
[ $rc = 0 ] || [ "$nf" != 0 ] || fail "check.py exited $rc"
[ "$np" != 0 ] || fail "check.py checked nothing"
say "seed $SEED (replay: SOAK_SEED=$SEED SOAK_SECONDS=$SECONDS_RUN SOAK_RATE=$RATE tests/soak/soak.sh)"
