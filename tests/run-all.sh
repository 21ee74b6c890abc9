#!/usr/bin/env bash
# tests/run-all.sh -- THE test command: installs what is missing (Debian 12,
# as root), installs the pinned emulators (npm ci), builds outboxd with
# --enable-werror, runs the unit tests (make check) and every
# tests/integration/*.sh scenario, then builds a copy with AddressSanitizer
# and UndefinedBehaviorSanitizer and runs the unit tests and SAN_SCENARIOS
# with it (any sanitizer report fails), runs every libFuzzer target
# (make fuzz: ASan + UBSan, FUZZ_SECONDS each, one PASS/FAIL line per
# target), checks that nothing is left running, and ends with the line
# "N passed, N failed".  Exit status 0 only
# when nothing failed.
#
#   tests/run-all.sh [--no-install] [--no-build] [--no-sanitizers] [--no-fuzz]
#                    [--no-soak] [SCENARIO...]
#     --no-install     do not run the installer or npm ci
#     --no-build       do not build, do not run make check (use ./outboxd as
#                      is); no sanitizer pass either
#     --no-sanitizers  skip the sanitizer pass (also skipped when SCENARIOs
#                      are named, unless SAN_SCENARIOS is set)
#     --no-fuzz        skip the fuzz pass (also skipped when SCENARIOs are
#                      named, and with --no-build)
#     --no-soak        skip the soak (tests/soak/soak.sh, run after the
#                      scenarios; also skipped when SCENARIOs are named,
#                      unless one of them is "soak")
#     SCENARIO         run only these integration scenarios (e.g. e2e-200)
# Environment: SCENARIO_TIMEOUT (s, default 300), OUTBOXD_TEST_KEEP=1 (keep
# every scenario's scratch directory), SAN_SCENARIOS (see below),
# FUZZ_SECONDS (s per fuzz target, default 30), SOAK_SECONDS (default 300).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
. "$ROOT/tests/lib/deps.sh"

INSTALL=1
BUILD=1
SAN=1
FUZZ=1
SOAK_STEP=1
ONLY=()
# The scenarios the sanitizer build runs: every worker and the master,
# stops (a worker giving up a hung broker call frees what it aborts),
# kills, reloads, bad input and strict framing on both listeners, both
# sinks, slow claims, headers a relay must refuse.  The
# environment's SAN_SCENARIOS (space-separated) replaces the list, and
# makes the pass run even when SCENARIOs are named.
SAN_ALWAYS=0
if [ -n "${SAN_SCENARIOS:-}" ]; then
	read -r -a SAN_SCENARIOS <<<"$SAN_SCENARIOS"
	SAN_ALWAYS=1
else
	SAN_SCENARIOS=(e2e-200 bad-input relay-kill relay-stop-drain relay-slow-claim
		webhook master-reload master-stop ops-admin relay-handoff
		http-strict admin-strict json-strict config-destinations
		ops-destinations idempotency headers sns)
	SAN_SCENARIOS+=(wal-e2e wal-kill)	# relay.mode = "wal"
fi
for a in "$@"; do
	case $a in
	--no-install)	INSTALL=0 ;;
	--no-build)	BUILD=0 ;;
	--no-sanitizers) SAN=0 ;;
	--no-fuzz)	FUZZ=0 ;;
	--no-soak)	SOAK_STEP=0 ;;
	-h | --help)	sed -n '2,28p' "$0"; exit 0 ;;
	-*)		echo "run-all: unknown option $a" >&2; exit 2 ;;
	*)		ONLY+=("${a%.sh}") ;;
	esac
done

PASS=0
FAIL=0
FAILED=()
T0=$(date +%s)
TAG=run-all-$$-$T0
LOGDIR=$(mktemp -d /tmp/outboxd-run-all.XXXXXX)
chmod 0755 "$LOGDIR"

banner() { printf '\n==== %s ====\n' "$*"; }
ok() { PASS=$((PASS + 1)); echo "PASS $*"; }
ko() { FAIL=$((FAIL + 1)); FAILED+=("$*"); echo "FAIL $*"; }

# step NAME CMD... -- one counted step; output to $LOGDIR/NAME.log, shown
# (the tail) when it fails
step() {
	local name=$1 log=$LOGDIR/$1.log
	shift
	if "$@" >"$log" 2>&1; then
		ok "$name"
		return 0
	fi
	ko "$name (log: $log)"
	tail -n 40 "$log"
	return 1
}

build() {
	autoreconf -fi && ./configure --enable-werror && make -j"$(nproc)"
}

leftovers() {
	local p pid
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		{ tr "\0" "\n" <"$p/environ"; } 2>/dev/null | grep -qxF "OUTBOXD_TEST_TAG=$TAG" && echo "$pid"
	done
	return 0
}

if [ $INSTALL = 1 ]; then
	banner "dependencies"
	step install ensure_deps || true
	step emulators emu_install || true
fi

BUILT=1
if [ $BUILD = 1 ]; then
	banner "build (--enable-werror)"
	step build build || BUILT=0
	banner "unit tests (make check)"
	if [ $BUILT = 1 ]; then
		log=$LOGDIR/make-check.log
		make -j"$(nproc)" check >"$log" 2>&1
		rc=$?
		grep -E '^(PASS|FAIL|XPASS|XFAIL|ERROR|SKIP):' "$log" || true
		np=$(sed -n 's/^# PASS: *//p' "$log" | tail -1)
		nf=$(($(sed -n 's/^# FAIL: *//p' "$log" | tail -1) + 0))
		ne=$(($(sed -n 's/^# ERROR: *//p' "$log" | tail -1) + 0))
		nx=$(($(sed -n 's/^# XPASS: *//p' "$log" | tail -1) + 0))
		ns=$(($(sed -n 's/^# SKIP: *//p' "$log" | tail -1) + 0))
		PASS=$((PASS + ${np:-0}))
		FAIL=$((FAIL + nf + ne + nx + ns))
		[ $((nf + ne + nx + ns)) = 0 ] || FAILED+=("make check: $nf failed, $ne errors, $nx xpass, $ns skipped (nothing may be skipped)")
		if [ $rc != 0 ] && [ $((nf + ne + nx)) = 0 ]; then
			ko "make check exited $rc without a test result (log: $log)"
			tail -n 40 "$log"
		elif [ -z "$np" ]; then
			ko "make check ran no unit test (log: $log)"
		fi
		[ $((nf + ne + nx)) = 0 ] || { tail -n 60 "$log"; cat tests/unit/*.log 2>/dev/null | tail -n 60; }
	else
		ko "make check not run: the build failed"
	fi
fi

scenarios=()
for f in tests/integration/*.sh; do
	n=$(basename "$f" .sh)
	if [ ${#ONLY[@]} -gt 0 ]; then
		keep=0
		for o in "${ONLY[@]}"; do [ "$o" = "$n" ] && keep=1; done
		[ $keep = 1 ] || continue
	fi
	scenarios+=("$f")
done
for o in ${ONLY[@]+"${ONLY[@]}"}; do
	[ "$o" = soak ] || [ -f "tests/integration/$o.sh" ] || ko "no scenario tests/integration/$o.sh"
done

# run_counted NAME TIMEOUT CMD... -- run a scenario-like test (it ends with
# "SUMMARY NAME passed=N failed=M"), output shown and kept in
# $LOGDIR/NAME.log; its checks count in the totals.
run_counted() {
	local n=$1 secs=$2 log=$LOGDIR/$1.log s0 rc line p fl
	shift 2
	s0=$(date +%s)
	OUTBOXD_TEST_TAG=$TAG timeout -k 15 "$secs" "$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	line=$(grep -E '^SUMMARY [^ ]+ passed=[0-9]+ failed=[0-9]+$' "$log" | tail -1)
	if [ -z "$line" ]; then
		ko "$n: ended (exit $rc$([ $rc = 124 ] && echo ', timed out')) without a summary"
		return
	fi
	p=$(sed 's/.* passed=\([0-9]*\) .*/\1/' <<<"$line")
	fl=$(sed 's/.* failed=\([0-9]*\)$/\1/' <<<"$line")
	PASS=$((PASS + p))
	FAIL=$((FAIL + fl))
	[ "$fl" = 0 ] || FAILED+=("$n: $fl failed")
	if [ "$fl" = 0 ] && [ "$rc" != 0 ]; then
		ko "$n: exit status $rc despite no failed check"
	fi
	[ "$p" != 0 ] || [ "$fl" != 0 ] || ko "$n: ran no check"
	echo "($n: $(($(date +%s) - s0)) s)"
}

for f in ${scenarios[@]+"${scenarios[@]}"}; do
	n=$(basename "$f" .sh)
	banner "scenario $n"
	run_counted "$n" "${SCENARIO_TIMEOUT:-300}" bash "$f"
done

# ---- the soak ----------------------------------------------------------------
# tests/soak/soak.sh: two outboxd hosts in network namespaces under a seeded
# fault schedule for SOAK_SECONDS (default 300 here), then its checker; its
# checks count like a scenario's.  Runs with the scenarios (all, or when
# "soak" is named), not with --no-soak.  The seed is in its log (first and
# last lines): replay a failure with SOAK_SEED=N tests/soak/soak.sh.
run_soak=$SOAK_STEP
if [ ${#ONLY[@]} -gt 0 ]; then
	run_soak=0
	for o in "${ONLY[@]}"; do [ "$o" = soak ] && run_soak=$SOAK_STEP; done
fi
if [ "$run_soak" = 1 ]; then
	banner "soak (tests/soak/soak.sh, ${SOAK_SECONDS:-300} s)"
	export SOAK_SECONDS=${SOAK_SECONDS:-300}
	run_counted soak $((SOAK_SECONDS + ${SOAK_DRAIN:-240} + 300)) bash tests/soak/soak.sh
fi

# ---- the sanitizer pass ----------------------------------------------------
# A copy of the tree (the scenarios run the outboxd next to them), built
# with -fsanitize=address,undefined.  With OUTBOXD_SANITIZERS=1 each
# scenario fails on a report in any of its logs (tests/lib/common.sh), even
# when its checks passed: a worker the master restarted could otherwise
# pass unseen.  Leak checking is on: each process frees what it allocated
# before it exits.
san_build() (
	d=$1
	mkdir -p "$d" &&
		tar -C "$ROOT" --exclude=./.git --exclude=node_modules --exclude='*.o' \
			--exclude='*.a' --exclude=./outboxd --exclude=./outboxctl \
			--exclude=autom4te.cache -cf - . | tar -C "$d" -xf - || return 1
	for m in "$ROOT"/tests/emu/*/node_modules; do
		ln -sfn "$m" "$d/tests/emu/$(basename "$(dirname "$m")")/node_modules"
	done
	cd "$d" && autoreconf -fi && ./configure --enable-werror \
		CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined" \
		LDFLAGS="-fsanitize=address,undefined" && make -j"$(nproc)" &&
		make -j"$(nproc)" check || return 1
	! grep -lE "$SAN_REPORT_RE" tests/unit/*.log
)
if [ $BUILD = 1 ] && [ $SAN = 1 ] && { [ ${#ONLY[@]} = 0 ] || [ $SAN_ALWAYS = 1 ]; }; then
	banner "sanitizer pass (ASan + UBSan): build, unit tests, ${SAN_SCENARIOS[*]}"
	SANDIR=$LOGDIR/san
	# What AddressSanitizer, LeakSanitizer and UBSan print when they find
	# something; the scenarios grep their logs for it (tests/lib/common.sh).
	export SAN_REPORT_RE='ERROR: (Address|Leak)Sanitizer|runtime error: '
	export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
	export OUTBOXD_SANITIZERS=1
	if step san-build san_build "$SANDIR/tree"; then
		for n in "${SAN_SCENARIOS[@]}"; do
			log=$LOGDIR/san-$n.log
			OUTBOXD_TEST_TAG=$TAG timeout -k 15 "${SCENARIO_TIMEOUT:-300}" \
				bash "$SANDIR/tree/tests/integration/$n.sh" >"$log" 2>&1
			line=$(grep -E '^SUMMARY [^ ]+ passed=[0-9]+ failed=[0-9]+$' "$log" | tail -1)
			if [ -n "$line" ] && [ "${line##* }" = failed=0 ]; then
				ok "sanitizer build: $n (${line#SUMMARY * })"
			else
				ko "sanitizer build: $n: ${line:-no summary} (log: $log)"
				grep -E -A 12 "^FAIL|$SAN_REPORT_RE" "$log" | head -n 60
			fi
		done
	fi
	unset ASAN_OPTIONS UBSAN_OPTIONS OUTBOXD_SANITIZERS SAN_REPORT_RE
	[ $FAIL != 0 ] || rm -rf "$SANDIR/tree"
fi

# ---- the fuzz pass ---------------------------------------------------------
# Every libFuzzer target (tests/fuzz/, make fuzz) built with clang and
# ASan + UBSan, each run for FUZZ_SECONDS on a scratch copy of its seeds:
# a crash, a sanitizer report, a leak or a hang fails its step.  Two
# targets run at once: about (targets / 2) x 30 s plus a build.
if [ $BUILD = 1 ] && [ $FUZZ = 1 ] && [ $BUILT = 1 ] && [ ${#ONLY[@]} = 0 ]; then
	banner "fuzz pass (libFuzzer, ASan + UBSan): ${FUZZ_SECONDS:-30} s per target"
	FUZZ_TARGETS=$(make -s fuzz-list 2>/dev/null | tail -n 1)
	if [ -z "$FUZZ_TARGETS" ]; then
		ko "fuzz: no FUZZ_TARGETS in the Makefile"
	elif step fuzz-build make fuzz-build; then
		# Two targets at once (the machine has 2 cores), each still
		# FUZZ_SECONDS, each its own log and its own PASS/FAIL line, in
		# the list's order.
		read -r -a fuzz_list <<<"$FUZZ_TARGETS"
		for ((i = 0; i < ${#fuzz_list[@]}; i += 2)); do
			pair=("${fuzz_list[@]:i:2}")
			pids=()
			for t in "${pair[@]}"; do
				make fuzz-run FUZZ_TARGETS="$t" FUZZ_SECONDS="${FUZZ_SECONDS:-30}" \
					>"$LOGDIR/fuzz-$t.log" 2>&1 &
				pids+=($!)
			done
			for j in "${!pair[@]}"; do
				t=${pair[$j]}
				if wait "${pids[$j]}"; then
					ok "fuzz-$t"
					grep -h '^  PASS' "$LOGDIR/fuzz-$t.log"
				else
					ko "fuzz-$t (log: $LOGDIR/fuzz-$t.log)"
					tail -n 40 "$LOGDIR/fuzz-$t.log"
				fi
			done
		done
	fi
fi

banner "leftover processes"
sleep 0.5
left=$(leftovers)
if [ -n "$left" ]; then
	ko "processes left running by the scenarios: $(ps -o pid=,cmd= -p $(echo $left | tr ' ' ,) | tr '\n' ';')"
	for pid in $left; do kill -TERM "$pid" 2>/dev/null || true; done
	sleep 2
	for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
else
	ok "no process left running"
fi

banner "summary ($(($(date +%s) - T0)) s)"
for f in ${FAILED[@]+"${FAILED[@]}"}; do echo "  failed: $f"; done
if [ $FAIL = 0 ] && [ "${OUTBOXD_TEST_KEEP:-0}" != 1 ]; then
	rm -rf "$LOGDIR"
else
	echo "logs: $LOGDIR"
fi
echo "$PASS passed, $FAIL failed"
[ $FAIL = 0 ] && [ $PASS -gt 0 ]
