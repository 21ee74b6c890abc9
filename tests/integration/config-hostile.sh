#!/usr/bin/env bash
# config-hostile.sh -- a configuration path that is not a plain, small,
# text file gets a clear refusal naming the file (issue 25, items 3, 4, 9
# and 10):
#   - /dev/zero (under ulimit -v: a regression cannot exhaust memory), a
#     FIFO with and without a writer, a directory, a device, a missing and
#     an unreadable file, a file over the 1 MiB limit: each refused at
#     once, by kind, naming the file; exactly 1 MiB is still read;
#   - a NUL byte in the middle of a line, and "#\0" before a section: an
#     error with FILE:LINE, not "configuration OK" or a misleading key;
#   - SIGTERM (-t) and SIGINT (start-up) end a read that lasts (an
#     LD_PRELOAD shim makes read() of the file sleep 30 s);
#   - a running master keeps its configuration when a reload finds a
#     directory, a FIFO, a file too large or a NUL byte, and still reloads
#     a good file afterwards;
#   - a file every user can read that holds a secret gets one warning
#     line (-t and start-up), naming the file and the mode, never the
#     secret; none at 0640;
#   - an unquoted secret that libconfuse cannot parse is not echoed;
#   - "make install DESTDIR=..." twice keeps an edited outbox.conf, mode
#     0640, and installs the new one beside it.
# No database or emulator is needed: every configuration has no workers.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
OUTBOXD=$T_ROOT/outboxd
SECRET='hostile-VALUE-4711'

# good [EXTRA] -- a valid configuration that needs no database, no
# listener and no AWS; it holds a secret.  Line numbers below matter.
good() {
	cat <<EOF
# config-hostile base configuration
database = "postgresql://postgres@127.0.0.1:9/none?connect_timeout=2"
http { workers = 0 }
relay { workers = 0 }
consumer { workers = 0 }
aws {
	secret_access_key = "$SECRET"
}
EOF
}
GOOD=$T_DIR/good.conf
good >"$GOOD"
chmod 0640 "$GOOD"

# run_t FILE [ULIMIT_KB] -- outboxd -t -c FILE (under ulimit -v when
# given), at most 10 s; sets RC, OUT (stdout+stderr) and MS (elapsed)
run_t() {
	local t0 lim=${2:-unlimited}
	RC=0
	t0=$(now_ms)
	OUT=$( (ulimit -v "$lim" && exec timeout -k 2 10 "$OUTBOXD" -t -c "$1") 2>&1) || RC=$?
	MS=$(($(now_ms) - t0))
}

# refused_as NAME FILE WHAT -- the last run_t exited by itself with 78,
# within 5 s, and its message is "FILE: ...WHAT..."
refused_as() {
	local name=$1 file=$2 what=$3
	check_eq "$name: exit status 78 (EX_CONFIG; 124/137 = had to be killed)" 78 "$RC"
	check "$name: ended by itself within 5 s (${MS} ms)" [ "$MS" -lt 5000 ]
	check "$name: message \"$file: ...$what...\" (got: ${OUT:0:300})" \
		grep -qF "outboxd: $file: $what" <<<"$OUT"
}

run_t "$GOOD"
check_eq "good file: exit status" 0 "$RC"
check "good file at 0640: only \"configuration OK\", no warning (got: ${OUT:0:300})" \
	[ "$OUT" = "outboxd: $GOOD: configuration OK" ]

# ---- item 3: only a regular file, of bounded size -----------------------------
run_t /dev/zero 262144
refused_as "/dev/zero (ulimit -v 256 MiB)" /dev/zero "is a character device, not a regular file"
run_t /dev/null
refused_as "/dev/null" /dev/null "is a character device, not a regular file"

FIFO=$T_DIR/fifo.conf
mkfifo "$FIFO"
run_t "$FIFO"
refused_as "FIFO without a writer" "$FIFO" "is a FIFO (named pipe), not a regular file"
# a writer that never writes: a blocking open or read would wait for ever
exec 7<>"$FIFO"
run_t "$FIFO"
refused_as "FIFO with a silent writer" "$FIFO" "is a FIFO (named pipe), not a regular file"
exec 7>&-

mkdir "$T_DIR/dir.conf"
run_t "$T_DIR/dir.conf"
refused_as "directory" "$T_DIR/dir.conf" "is a directory, not a regular file"
check "directory: not the misleading \"database is not set\"" \
	bash -c '! grep -q "database is not set" <<<"$1"' _ "$OUT"

run_t "$T_DIR/missing.conf"
refused_as "missing file" "$T_DIR/missing.conf" "No such file or directory"

cp "$GOOD" "$T_DIR/unreadable.conf"
chmod 0600 "$T_DIR/unreadable.conf"
if [ "$(id -u)" = 0 ]; then
	RC=0
	t0=$(now_ms)
	OUT=$(setpriv --reuid nobody --regid nogroup --clear-groups \
		timeout -k 2 10 "$OUTBOXD" -t -c "$T_DIR/unreadable.conf" 2>&1) || RC=$?
	MS=$(($(now_ms) - t0))
else
	chmod 0000 "$T_DIR/unreadable.conf"
	run_t "$T_DIR/unreadable.conf"
fi
refused_as "unreadable file (0600, another user)" "$T_DIR/unreadable.conf" "Permission denied"

# exactly the limit is read; one byte more is refused
pad() { # pad FILE SIZE -- good.conf padded with blanks to SIZE bytes
	good >"$1"
	head -c $(($2 - $(stat -c %s "$1"))) /dev/zero | tr '\0' ' ' >>"$1"
	chmod 0640 "$1"
}
pad "$T_DIR/limit.conf" 1048576
run_t "$T_DIR/limit.conf"
check_eq "1 MiB file: exit status" 0 "$RC"
check "1 MiB file: configuration OK (got: ${OUT:0:300})" grep -q 'configuration OK' <<<"$OUT"
pad "$T_DIR/large.conf" 1048577
run_t "$T_DIR/large.conf"
refused_as "1 MiB + 1 byte" "$T_DIR/large.conf" "is larger than 1048576 bytes (1 MiB)"
head -c 100000000 /dev/zero | tr '\0' ' ' >"$T_DIR/huge.conf"
run_t "$T_DIR/huge.conf" 262144
refused_as "100 MB file (ulimit -v 256 MiB)" "$T_DIR/huge.conf" "is larger than 1048576 bytes (1 MiB)"

# ---- item 4: a NUL byte --------------------------------------------------------
# in the middle of line 4, and "#\0" on a line of its own before a section
# that the NUL would hide (libconfuse stopped there: "configuration OK")
good | sed '4s/relay {/relay \x00{/' >"$T_DIR/nul-mid.conf"
run_t "$T_DIR/nul-mid.conf"
refused_as "NUL in the middle of line 4" "$T_DIR/nul-mid.conf:4" "the file holds a NUL byte"
{ sed -n '1,5p' "$GOOD"; printf '#\0\n'; echo 'bogus = 1'; } >"$T_DIR/nul-comment.conf"
run_t "$T_DIR/nul-comment.conf"
refused_as "\"#\\0\" on line 6" "$T_DIR/nul-comment.conf:6" "the file holds a NUL byte"
{ sed -n '1,3p' "$GOOD"; printf '#\0\n'; echo 'relay { workers = 1 }'; } >"$T_DIR/nul-hides.conf"
run_t "$T_DIR/nul-hides.conf"
refused_as "\"#\\0\" before a relay section" "$T_DIR/nul-hides.conf:4" "the file holds a NUL byte"
check "\"#\\0\": not the misleading \"sqs.queue_url is not set\"" \
	bash -c '! grep -q "sqs.queue_url" <<<"$1"' _ "$OUT"

# ---- item 3: a stop signal ends a read that lasts ------------------------------
# slow-read.so: read() of the file named by SLOW_READ_FILE sleeps 30 s
# first, as a hung network file system would (a regular file's read cannot
# be made to block otherwise).
command -v "${CC:-cc}" >/dev/null || die "no C compiler (${CC:-cc}) for the slow-read shim"
cat >"$T_DIR/slow-read.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

ssize_t
read(int fd, void *buf, size_t n)
{
	static ssize_t	(*real)(int, void *, size_t);
	const char	*want = getenv("SLOW_READ_FILE");
	char		 link[64], target[4096];
	struct timespec	 ts = { 30, 0 };
	ssize_t		 len;

	if (real == NULL)
		real = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if (want != NULL && (len = readlink(link, target,
	    sizeof(target) - 1)) > 0) {
		target[len] = '\0';
		if (strcmp(target, want) == 0)
			while (nanosleep(&ts, &ts) == -1)
				;
	}
	return real(fd, buf, n);
}
EOF
"${CC:-cc}" -shared -fPIC -O -o "$T_DIR/slow-read.so" "$T_DIR/slow-read.c" -ldl ||
	die "could not build the slow-read shim"
SLOW=$(realpath "$GOOD")

# stop_during_read NAME SIGNAL ARGS... -- start outboxd ARGS with the shim
# (the signal's default action restored: bash ignores INT in background
# jobs), check it is still reading after 1 s, send SIGNAL, check it ends
# within 3 s, killed by it
stop_during_read() {
	local name=$1 sig=$2 pid i rc=0
	shift 2
	env --default-signal=INT,TERM LD_PRELOAD="$T_DIR/slow-read.so" \
		SLOW_READ_FILE="$SLOW" "$OUTBOXD" "$@" >"$T_DIR/slow.out" 2>&1 &
	pid=$!
	sleep 1
	check "$name: still reading after 1 s (the shim works)" kill -0 "$pid"
	kill "-$sig" "$pid" 2>/dev/null || true
	for i in $(seq 1 30); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		fail "$name: still running 3 s after SIG$sig (signal blocked while reading?)"
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		return 0
	fi
	pass "$name: ended within 3 s of SIG$sig"
	wait "$pid" || rc=$?
	check_eq "$name: killed by SIG$sig" "$((128 + $(kill -l "$sig")))" "$rc"
}
stop_during_read "-t, SIGTERM during the read" TERM -t -c "$GOOD"
stop_during_read "start-up, SIGINT during the first read" INT -c "$GOOD"

# ---- item 3/4: a reload keeps the running configuration on a refused file -------
RCONF=$T_DIR/reload.conf
good >"$RCONF"
chmod 0644 "$RCONF"	# world-readable, with a secret: warned at start
RLOG=$T_DIR/reload.log
RPID=$T_DIR/reload.pid
add_log "$RLOG"
on_exit "proc_stop '$RPID'"
proc_start "$RPID" "$RLOG" "$OUTBOXD" -c "$RCONF" || die "could not start outboxd"
wait_until 10 "outboxd starting" grep -q 'msg="outboxd .* starting' "$RLOG" ||
	die "outboxd did not start (see $RLOG)"
check "start-up, 0644: one warning naming the file and the mode" \
	grep -qF "level=warn role=master pid=$(proc_pid "$RPID") msg=\"$RCONF: mode 0644 lets every user read this file, and it holds secrets (aws.secret_access_key): chmod o-r it\"" "$RLOG"
check "start-up, 0644: the secret is not in the log" bash -c '! grep -qF "$1" "$2"' _ "$SECRET" "$RLOG"
sleep 1.1	# a generation runs 1 s before a reload (master.c)

# reload_refused NAME REASON -- SIGHUP; the master logs that it keeps the
# running configuration because "RCONF: REASON" (or "RCONF:LINE: REASON"
# when REASON starts with the line), and lives on
n_refused=0
reload_refused() {
	n_refused=$((n_refused + 1))
	kill -HUP "$(proc_pid "$RPID")"
	if wait_until 5 "reload refused ($1)" bash -c \
		'[ "$(grep -c "reload failed, keeping the running configuration" "$1")" -ge "$2" ]' _ "$RLOG" "$n_refused"; then
		check "reload, $1: refused, keeping the running configuration: \"$RCONF:$2\"" \
			grep -qF "reload failed, keeping the running configuration: $RCONF:$2" "$RLOG"
	else
		fail "reload, $1: no \"reload failed\" line within 5 s"
	fi
	check "reload, $1: the master is still running" proc_alive "$RPID"
}
mv "$RCONF" "$RCONF.good"
mkdir "$RCONF"
reload_refused "directory" " is a directory, not a regular file"
rmdir "$RCONF"
mkfifo "$RCONF"
reload_refused "FIFO" " is a FIFO (named pipe), not a regular file"
rm -f "$RCONF"
cp "$T_DIR/large.conf" "$RCONF"
reload_refused "1 MiB + 1 byte" " is larger than 1048576 bytes (1 MiB)"
cp "$T_DIR/nul-hides.conf" "$RCONF"
reload_refused "\"#\\0\"" "4: the file holds a NUL byte"
mv -f "$RCONF.good" "$RCONF"
kill -HUP "$(proc_pid "$RPID")"
check "reload of the good file afterwards: done, generation 2" \
	wait_until 5 "reload done" grep -q 'reload done: generation 2' "$RLOG"
t0=$(now_ms)
kill -TERM "$(proc_pid "$RPID")"
wait_until 5 "outboxd stopped" bash -c '! kill -0 "$1" 2>/dev/null' _ "$(proc_pid "$RPID")" || true
check "SIGTERM after the reloads: the master stops ($(($(now_ms) - t0)) ms)" bash -c '! kill -0 "$1" 2>/dev/null' _ "$(proc_pid "$RPID")"

# ---- item 9: the world-readable warning, and no secret in errors ----------------
cp "$GOOD" "$T_DIR/world.conf"
chmod 0644 "$T_DIR/world.conf"
RC=0
ERR=$(timeout 10 "$OUTBOXD" -t -c "$T_DIR/world.conf" 2>&1 >"$T_DIR/world.out") || RC=$?
check_eq "-t, 0644 with a secret: still valid, exit status" 0 "$RC"
check "-t, 0644 with a secret: configuration OK on stdout" grep -qF "outboxd: $T_DIR/world.conf: configuration OK" "$T_DIR/world.out"
check_eq "-t, 0644 with a secret: one warning line on stderr" \
	"outboxd: warning: $T_DIR/world.conf: mode 0644 lets every user read this file, and it holds secrets (aws.secret_access_key): chmod o-r it" "$ERR"
check "-t, 0644: the secret is not in the warning" bash -c '! grep -qF "$1" <<<"$2"' _ "$SECRET" "$ERR"
chmod 0640 "$T_DIR/world.conf"
RC=0
ERR=$(timeout 10 "$OUTBOXD" -t -c "$T_DIR/world.conf" 2>&1 >/dev/null) || RC=$?
check_eq "-t, 0640: exit status" 0 "$RC"
check_eq "-t, 0640: no warning" "" "$ERR"
good | sed '/secret_access_key/d' >"$T_DIR/nosecret.conf"
chmod 0644 "$T_DIR/nosecret.conf"
run_t "$T_DIR/nosecret.conf"
check_eq "-t, 0644 without a secret: no warning" "outboxd: $T_DIR/nosecret.conf: configuration OK" "$OUT"

# an unquoted secret: libconfuse stops inside it and names a token of it
good | sed "7s|.*|\tsecret_access_key = AKsecretPART1/PART2+PART3 PART4|" >"$T_DIR/unquoted.conf"
run_t "$T_DIR/unquoted.conf"
refused_as "unquoted secret" "$T_DIR/unquoted.conf:7" "the value of aws.secret_access_key is malformed (quote it)"
check "unquoted secret: no part of it in the message (got: ${OUT:0:300})" \
	bash -c '! grep -qE "AKsecret|PART" <<<"$1"' _ "$OUT"
good | sed "2s|.*|database = host=h password=PwPART1 user=u|" >"$T_DIR/unquoted-db.conf"
run_t "$T_DIR/unquoted-db.conf"
refused_as "unquoted database with a password" "$T_DIR/unquoted-db.conf:2" "the value of database is malformed (quote it)"
check "unquoted database: the password is not in the message (got: ${OUT:0:300})" \
	bash -c '! grep -q "PwPART" <<<"$1"' _ "$OUT"

# ---- item 10: make install twice keeps an edited configuration -------------------
DEST=$T_DIR/dest
[ -f "$T_ROOT/Makefile" ] || die "$T_ROOT is not configured (no Makefile)"
RC=0
make -s -C "$T_ROOT" install DESTDIR="$DEST" >"$T_DIR/install1.log" 2>&1 || RC=$?
check_eq "make install DESTDIR (first): exit status" 0 "$RC"
CONF=$(find "$DEST" -path '*/etc/outbox.conf' -type f | head -1)
check "first install: an etc/outbox.conf under DESTDIR (got: ${CONF:-none})" [ -n "$CONF" ]
CONF=${CONF:-$DEST/none}
check "first install: it is the shipped etc/outbox.conf" cmp -s "$CONF" "$T_ROOT/etc/outbox.conf"
check_eq "first install: its mode" 640 "$(stat -c %a "$CONF" 2>/dev/null)"
check "first install: the schema under share/outboxd/sql/" \
	bash -c '[ -n "$(find "$1" -path "*/share/outboxd/sql/schema.sql")" ]' _ "$DEST"
echo "# edited by config-hostile" >>"$CONF"
cp "$CONF" "$T_DIR/edited.conf"
RC=0
make -s -C "$T_ROOT" install DESTDIR="$DEST" >"$T_DIR/install2.log" 2>&1 || RC=$?
check_eq "make install DESTDIR (second): exit status" 0 "$RC"
check "second install: the edited outbox.conf is kept" cmp -s "$CONF" "$T_DIR/edited.conf"
check_eq "second install: its mode" 640 "$(stat -c %a "$CONF" 2>/dev/null)"
check "second install: the new one beside it as outbox.conf.dist, as shipped" \
	cmp -s "$CONF.dist" "$T_ROOT/etc/outbox.conf"
check_eq "second install: outbox.conf.dist mode" 640 "$(stat -c %a "$CONF.dist" 2>/dev/null)"
check "second install: says so (got: $(grep -F 'exists' "$T_DIR/install2.log" | tail -1))" \
	grep -qF "$CONF exists: kept it, the new one is $CONF.dist" "$T_DIR/install2.log"
