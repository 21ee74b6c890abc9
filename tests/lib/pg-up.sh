#!/usr/bin/env bash
# pg-up.sh DIR PORT -- start a throwaway PostgreSQL cluster for tests.
#
#   DIR/data  the cluster (PGDATA)      DIR/pg.log  server log
#   DIR       unix socket directory     DIR/env     shell exports for clients
#
# Listens on 127.0.0.1:PORT and on DIR/.s.PGSQL.PORT only; superuser role
# "postgres", trust authentication.  Durability is off (fsync,
# synchronous_commit, full_page_writes): never put real data in it.
# As root the server runs as the OS user $PG_OS_USER (default postgres)
# through runuser, because initdb refuses root; DIR must then be reachable
# by that user (use /tmp, not /root).  Stop it with pg-down.sh DIR.
# PG_WAL_LEVEL=logical (or replica) sets wal_level, with room for
# replication slots and WAL senders (relay.mode = "wal"); unset: the
# server's default, replica.
set -euo pipefail
DIR=${1:?usage: pg-up.sh DIR PORT}
PORT=${2:?usage: pg-up.sh DIR PORT}
PG_OS_USER=${PG_OS_USER:-postgres}
die() { echo "pg-up: $*" >&2; exit 1; }

BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
[ -n "$BINDIR" ] && [ -x "$BINDIR/initdb" ] ||
	die "no initdb under /usr/lib/postgresql/*/bin (apt-get install postgresql)"

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
sock="$DIR/.s.PGSQL.$PORT"
[ ${#sock} -le 107 ] || die "socket path too long (${#sock} > 107 bytes): $sock"
[ ! -e "$DIR/data/PG_VERSION" ] || die "$DIR/data already exists (run pg-down.sh $DIR first)"

if [ "$(id -u)" = 0 ]; then
	id "$PG_OS_USER" >/dev/null 2>&1 || die "OS user $PG_OS_USER missing (apt-get install postgresql creates it)"
	chown "$PG_OS_USER": "$DIR"
	chmod 0755 "$DIR"	# socket dir: reachable by local test users; data/ stays 0700
	as_pg() { runuser -u "$PG_OS_USER" -- "$@"; }
	as_pg test -x "$DIR" ||
		die "$PG_OS_USER cannot reach $DIR (a parent directory is not o+x; use a directory under /tmp)"
else
	as_pg() { "$@"; }
fi

# -N: no fsync of the new cluster; C.UTF-8 for reproducible sorting/encoding
as_pg "$BINDIR/initdb" -D "$DIR/data" -U postgres --auth=trust -N \
	--locale=C.UTF-8 --encoding=UTF8 >"$DIR/initdb.log" 2>&1 ||
	{ cat "$DIR/initdb.log" >&2; die "initdb failed (log above)"; }

cat >>"$DIR/data/postgresql.conf" <<CONF
# ---- test settings (tests/lib/pg-up.sh) ----
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 128MB
log_min_messages = warning
${PG_WAL_LEVEL:+wal_level = $PG_WAL_LEVEL
max_replication_slots = 10
max_wal_senders = 10}
${PG_EXTRA_CONF:-}
CONF

as_pg "$BINDIR/pg_ctl" -D "$DIR/data" -l "$DIR/pg.log" -w -t 60 start >/dev/null ||
	{ cat "$DIR/pg.log" >&2; die "pg_ctl start failed (server log above)"; }

cat >"$DIR/env" <<ENV
export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
ENV
chmod 0644 "$DIR/env"
echo "pg-up: ready on 127.0.0.1:$PORT and $sock (pid $(head -1 "$DIR/data/postmaster.pid"))"
