#!/usr/bin/env bash
# tests/demo.sh -- THE main-job command: see outboxd work end to end.
#
# Installs what is missing (Debian 12, as root), builds outboxd, starts a
# local stack (PostgreSQL, the SQS and DynamoDB emulators) and outboxd,
# places an order with curl, waits for its fulfillment and prints it with
# `outboxctl fulfillment ID`, then keeps everything running until Ctrl-C so
# you can place more orders.  Everything it started is stopped on exit.
#
#   tests/demo.sh [--once] [--no-install]
#     --once        stop right after the first fulfillment is printed
#     --no-install  do not run the installer or npm ci
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
LIB=$ROOT/tests/lib
. "$LIB/deps.sh"
. "$LIB/proc.sh"

ONCE=0
INSTALL=1
for a in "$@"; do
	case $a in
	--once)		ONCE=1 ;;
	--no-install)	INSTALL=0 ;;
	-h | --help)	sed -n '2,13p' "$0"; exit 0 ;;
	*)		echo "demo: unknown argument $a (try --help)" >&2; exit 2 ;;
	esac
done

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { echo "demo: ERROR: $*" >&2; exit 1; }

STATE=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$STATE" ]; then
		say "stopping"
		[ -f "$STATE/outboxd.pid" ] && proc_stop "$STATE/outboxd.pid" 20
		"$LIB/stack.sh" down "$STATE" >/dev/null 2>&1 || echo "demo: stack.sh down $STATE failed" >&2
		echo "stopped outboxd, PostgreSQL and the emulators"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 0' INT	# Ctrl-C is the normal way to stop the demo
trap 'exit 143' TERM

if [ $INSTALL = 1 ]; then
	say "checking dependencies"
	ensure_deps
	emu_install
fi

say "building outboxd"
if [ ! -f Makefile ]; then
	autoreconf -fi
	./configure --enable-werror
fi
make -j"$(nproc)"
[ -x ./outboxd ] && [ -x ./outboxctl ] || die "the build did not produce ./outboxd and ./outboxctl"

say "starting PostgreSQL, the SQS emulator and the DynamoDB emulator"
STATE=$(mktemp -d /tmp/outboxd-demo.XXXXXX)
"$LIB/stack.sh" up "$STATE"
. "$STATE/env"

say "starting outboxd -c $OUTBOXD_CONF (log: $STATE/outboxd.log)"
proc_start "$STATE/outboxd.pid" "$STATE/outboxd.log" ./outboxd -c "$OUTBOXD_CONF"
for _ in $(seq 1 100); do
	curl -fsS -o /dev/null --max-time 2 "$OUTBOXD_URL/healthz" 2>/dev/null && break
	proc_alive "$STATE/outboxd.pid" || { cat "$STATE/outboxd.log" >&2; die "outboxd exited (log above)"; }
	sleep 0.2
done
curl -fsS -o /dev/null "$OUTBOXD_URL/healthz" || { tail -n 30 "$STATE/outboxd.log" >&2; die "outboxd is not answering GET /healthz"; }
echo "outboxd is up at $OUTBOXD_URL (pid $(proc_pid "$STATE/outboxd.pid"))"

say "placing an order"
echo "\$ curl -sS -X POST $OUTBOXD_URL/orders -H 'Content-Type: application/json' -d '{\"customerId\":\"c1\",\"amountCents\":4999}'"
resp=$(curl -sS -w '\n%{http_code}' -X POST "$OUTBOXD_URL/orders" \
	-H 'Content-Type: application/json' -d '{"customerId":"c1","amountCents":4999}')
code=${resp##*$'\n'}
body=${resp%$'\n'*}
echo "HTTP $code"
echo "$body"
[ "$code" = 201 ] || die "expected 201 Created"
id=$(jq -r .id <<<"$body")

say "waiting for the fulfillment of order $id"
echo "\$ ./outboxctl -c $OUTBOXD_CONF fulfillment $id"
found=0
for _ in $(seq 1 150); do
	if ./outboxctl -c "$OUTBOXD_CONF" fulfillment "$id" >"$STATE/fulfillment.json" 2>"$STATE/outboxctl.err"; then
		found=1
		break
	fi
	sleep 0.2
done
[ $found = 1 ] || { cat "$STATE/outboxctl.err" >&2; tail -n 30 "$STATE/outboxd.log" >&2; die "no fulfillment for $id after 30 s"; }
cat "$STATE/fulfillment.json"
echo "The order went PostgreSQL (orders + outbox, one transaction) -> relay -> SQS -> consumer -> DynamoDB."

if [ $ONCE = 1 ]; then
	exit 0
fi

say "running; press Ctrl-C to stop"
cat <<EOF
Try:
  curl -sS -X POST $OUTBOXD_URL/orders -H 'Content-Type: application/json' -d '{"customerId":"c2","amountCents":1250}'
  curl -sS $OUTBOXD_URL/orders/$id
  $ROOT/outboxctl -c $OUTBOXD_CONF fulfillment $id
  psql postgresql://postgres@127.0.0.1:$PG_PORT/outboxd -c 'SELECT id, status, attempts FROM outbox'
  tail -f $STATE/outboxd.log
EOF
while proc_alive "$STATE/outboxd.pid"; do
	sleep 1
done
tail -n 30 "$STATE/outboxd.log" >&2
die "outboxd exited unexpectedly (log above)"
