#!/usr/bin/env bash
# emu-up.sh fauxqs|dynalite PORT STATEDIR -- start a local AWS emulator on
# 127.0.0.1:PORT in the background.  STATEDIR gets NAME.pid ("PID
# STARTTIME", see proc.sh) and NAME.log.  Stop: emu-down.sh NAME STATEDIR.
#
#   fauxqs 1.9.2 (SQS, JSON protocol only) through tests/emu/fauxqs/
#     fauxqs-loopback.mjs: binds 127.0.0.1 and hands out queue URLs
#     http://127.0.0.1:PORT/000000000000/NAME.  Region = the one in the
#     request's credential scope.  Does not check signatures.
#   dynalite 4.0.0 (DynamoDB), in memory, tables ACTIVE at once.  Wants a
#     well-formed Authorization header but does not check the signature.
#
# Installs the pinned packages (npm ci) when node_modules is missing.
set -euo pipefail
KIND=${1:?usage: emu-up.sh fauxqs|dynalite PORT STATEDIR}
PORT=${2:?usage: emu-up.sh fauxqs|dynalite PORT STATEDIR}
STATE=${3:?usage: emu-up.sh fauxqs|dynalite PORT STATEDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
EMU=$(cd "$HERE/../emu" && pwd)/$KIND
. "$HERE/proc.sh"
die() { echo "emu-up: $*" >&2; exit 1; }

command -v node >/dev/null || die "node not found (Node.js >= 20 is needed)"
case $KIND in
fauxqs)
	set -- env FAUXQS_PORT="$PORT" BIND_HOST=127.0.0.1 \
		FAUXQS_LOGGER="${FAUXQS_LOGGER:-false}" \
		node "$EMU/fauxqs-loopback.mjs"
	probe=(-X POST -H 'Content-Type: application/x-amz-json-1.0'
	       -H 'X-Amz-Target: AmazonSQS.ListQueues' -d '{}')
	;;
dynalite)
	MS=${DDB_TABLE_MS:-0}
	set -- node "$EMU/node_modules/dynalite/cli.js" --host 127.0.0.1 \
		--port "$PORT" --createTableMs "$MS" --deleteTableMs "$MS" \
		--updateTableMs "$MS"
	probe=()
	;;
*)	die "unknown emulator '$KIND' (fauxqs or dynalite)" ;;
esac
[ -d "$EMU" ] || die "no $EMU"
if [ ! -d "$EMU/node_modules/$KIND" ]; then
	echo "emu-up: installing $KIND (npm ci in $EMU)" >&2
	(cd "$EMU" && npm ci --no-audit --no-fund --loglevel=error) >&2 ||
		die "npm ci failed in $EMU"
fi
mkdir -p "$STATE"
: >"$STATE/$KIND.log"
proc_start "$STATE/$KIND.pid" "$STATE/$KIND.log" "$@" || die "could not start $KIND"
for _ in $(seq 1 150); do
	if curl -sS -o /dev/null ${probe[@]+"${probe[@]}"} "http://127.0.0.1:$PORT/" 2>/dev/null; then
		echo "emu-up: $KIND on http://127.0.0.1:$PORT (pid $(proc_pid "$STATE/$KIND.pid"))"
		exit 0
	fi
	proc_alive "$STATE/$KIND.pid" || break
	sleep 0.1
done
cat "$STATE/$KIND.log" >&2
proc_stop "$STATE/$KIND.pid" 2
die "$KIND did not answer on 127.0.0.1:$PORT (its log is above)"
