# ops.sh -- helpers for the tests/integration/ops-*.sh scenarios (sourced
# after common.sh): scraping /metrics, reading samples, the admin API.
#
# scrape FILE            GET /metrics into FILE (fails unless 200)
# sample FILE SERIES     value of a series as PromQL's sum() of a selector
#                        would say it: every sample of that name whose
#                        labels include SERIES's, added up (one: its text as
#                        written), e.g.
#                        sample m.txt 'outboxd_outbox_rows{status="pending"}'
#                        is the pending rows of every destination
#                        (prints 0 when no series matches)
# sample_max FILE SERIES the largest of those samples, as written (an age)
# series_count FILE SERIES
#                        how many samples match
# delta OLD NEW SERIES   NEW's value minus OLD's, as an integer
# promtool_ok FILE       the exposition parses and lints clean with promtool
# counters_not_backwards OLD NEW
#                        every counter sample (_total, _bucket, _count,
#                        _sum) of OLD is <= its value in NEW; prints any
#                        that went backwards
# admin_conf FILE        append an admin section (free port, ADMIN_TOKEN)
#                        to FILE; sets ADMIN_URL
# admin METHOD PATH [CURL ARGS...]
#                        request to the admin API with the token; sets
#                        HTTP_STATUS / HTTP_BODY like http
# admin_raw METHOD PATH [CURL ARGS...]   the same without a token
# master_child ROLE      pid of the running worker "outboxd: ROLE" whose
#                        parent is this scenario's outboxd master

ADMIN_TOKEN=${ADMIN_TOKEN:-ops-test-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')}

scrape() {
	local out=$1 code
	code=$(curl -sS -o "$out" -w '%{http_code}' --max-time 10 "$OUTBOXD_URL/metrics") || code=000
	[ "$code" = 200 ] || { say "GET /metrics answered $code"; return 1; }
}

# _samples FILE SERIES MODE -- the matching samples (MODE sum, max or count)
_samples() {
	awk -v k="$2" -v mode="$3" '
	function split_series(s, parts,   i) {
		parts["name"] = s; parts["labels"] = ""
		if ((i = index(s, "{")) > 0) {
			parts["name"] = substr(s, 1, i - 1)
			parts["labels"] = substr(s, i + 1, length(s) - i - 1)
		}
	}
	BEGIN { split_series(k, q); nq = split(q["labels"], want, ",") }
	/^#/ { next }
	{
		split_series($1, p)
		if (p["name"] != q["name"]) next
		for (j = 1; j <= nq; j++)
			if (want[j] != "" && index("," p["labels"] ",", "," want[j] ",") == 0) next
		n++; sum += $2; raw = $2
		if (n == 1 || $2 + 0 > max + 0) max = $2
	}
	END {
		if (mode == "count") print n + 0
		else if (n == 0) print 0
		else if (mode == "max") print max
		else if (n == 1) print raw
		else print sum
	}' "$1"
}
sample() { _samples "$1" "$2" sum; }
sample_max() { _samples "$1" "$2" max; }
series_count() { _samples "$1" "$2" count; }

delta() {
	awk -v a="$(sample "$1" "$3")" -v b="$(sample "$2" "$3")" 'BEGIN { printf "%d\n", b - a }'
}

promtool_ok() {
	local out
	out=$(promtool check metrics <"$1" 2>&1) || { say "promtool: $out"; return 1; }
	[ -z "$out" ] || { say "promtool: $out"; return 1; }
}

counters_not_backwards() {
	awk 'NR == FNR { if ($1 !~ /^#/ && $1 ~ /(_total|_bucket|_count|_sum)(\{|$)/) old[$1] = $2; next }
	     $1 in old && $2 + 0 < old[$1] + 0 { printf "%s went from %s to %s\n", $1, old[$1], $2; bad = 1 }
	     END { exit bad }' "$1" "$2"
}

admin_conf() {
	local port
	port=$("$T_LIB/free-port" 1)
	cat >>"$1" <<CONF

admin {
	listen = "127.0.0.1:$port"
	token = "$ADMIN_TOKEN"
}
CONF
	ADMIN_URL=http://127.0.0.1:$port
}

admin_raw() {
	local m=$1 p=$2 out=$T_DIR/admin.body
	shift 2
	HTTP_STATUS=$(curl -sS -o "$out" -w '%{http_code}' --max-time 30 -X "$m" "$ADMIN_URL$p" "$@") ||
		HTTP_STATUS=000
	HTTP_BODY=$(cat "$out" 2>/dev/null || true)
}

admin() {
	local m=$1 p=$2
	shift 2
	admin_raw "$m" "$p" -H "Authorization: Bearer $ADMIN_TOKEN" "$@"
}

master_child() {
	local master
	master=$(proc_pid "$OUTBOXD_PIDFILE")
	ps -o pid=,args= --ppid "$master" | awk -v r="$1" '$2 == "outboxd:" && ($3 " " $4) == r { print $1; exit }'
}
