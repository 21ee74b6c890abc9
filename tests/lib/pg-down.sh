#!/usr/bin/env bash
# pg-down.sh DIR [--keep] -- stop the cluster made by pg-up.sh DIR and
# delete DIR (keep it with --keep, e.g. to read DIR/pg.log).
# A DIR without a cluster is not an error (nothing to stop).
set -euo pipefail
DIR=${1:?usage: pg-down.sh DIR [--keep]}
KEEP=${2:-}
PG_OS_USER=${PG_OS_USER:-postgres}
BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
if [ ! -d "$DIR/data" ]; then
	echo "pg-down: no cluster in $DIR"
	[ "$KEEP" = --keep ] || rm -rf "$DIR"
	exit 0
fi
if [ "$(id -u)" = 0 ]; then as_pg() { runuser -u "$PG_OS_USER" -- "$@"; }; else as_pg() { "$@"; }; fi
if [ -f "$DIR/data/postmaster.pid" ]; then
	pid=$(head -1 "$DIR/data/postmaster.pid" 2>/dev/null || true)
	# fast shutdown: roll back open transactions, disconnect clients
	if ! as_pg "$BINDIR/pg_ctl" -D "$DIR/data" -m fast -w -t 30 stop >/dev/null; then
		echo "pg-down: pg_ctl stop failed; killing postmaster $pid" >&2
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
		   grep -q -- "$DIR/data" "/proc/$pid/cmdline" 2>/dev/null; then
			kill -QUIT "$pid" 2>/dev/null || true
			sleep 1
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
fi
[ "$KEEP" = --keep ] || rm -rf "$DIR"
echo "pg-down: stopped${KEEP:+ (kept $DIR)}"
