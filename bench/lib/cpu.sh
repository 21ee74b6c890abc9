# cpu.sh -- where the CPU time of a workload goes, by process group (sourced).
#
# cpu_snap FILE   write "GROUP TICKS" lines: CPU time (user + system, clock ticks) so far of
#   pg        the stack's postmaster and its children (exited backends through cutime)
#   outboxd   outboxd's master and workers ($OB_RUN/outboxd.pid)
#   sqs ddb   the fauxqs and dynalite emulators ($STACK_DIR/sqs, $STACK_DIR/ddb)
#   sink      the nginx 204 sink ($SINK_RUN/sink.pid)
#   load      live wrk or pgbench children of this shell (the load generators; take both
#             snapshots while the load runs, an exited process's time is not seen)
#   machine   every CPU of the machine (/proc/stat), so "other" = machine - the groups above
#             = everything else on the machine, other users' work included
#   uptime    /proc/uptime read right after /proc/stat (centiseconds): the wall time the
#             machine figure covers, whatever the snapshot itself takes on a loaded machine
#   and parts of two groups, by process title (live processes only; not added to the known
#   total): ob_http, ob_relay, ob_consumer (outboxd's workers of each kind) and pg_walsender
#   (PostgreSQL's walsenders: wal mode's stream)
# cpu_result LABEL A B   print and record (lib.sh's result) one JSON line: seconds of CPU
#   per group between snapshots A and B, and the share of the machine's 2 cores.
_cpu_proc() { # PID [with_children_exited] -> ticks
  local f=/proc/$1/stat
  [ -r "$f" ] || { echo 0; return; }
  # fields after the command name (which may hold spaces): 14 utime 15 stime 16 cutime 17 cstime
  sed 's/^.*) //' "$f" | awk -v c="${2:-0}" '{ t = $12 + $13; if (c) t += $14 + $15; print t }'
}
_cpu_tree() { # PID -> ticks of PID (with exited children) and its live children
  local p=$1 t c
  [ -n "$p" ] && [ -d "/proc/$p" ] || { echo 0; return; }
  t=$(_cpu_proc "$p" 1)
  for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do t=$((t + $(_cpu_proc "$c" 1))); done
  echo "$t"
}
_cpu_titled() { # PARENT TITLE-PATTERN NAME -> "NAME ticks" of PARENT's live children so titled
  local p t=0
  for p in $(ps -o pid=,args= --ppid "${1:-0}" 2>/dev/null | awk -v pat="$2" 'index($0, pat) { print $1 }'); do
    t=$((t + $(_cpu_proc "$p" 0)))
  done
  echo "$3 $t"
}
_cpu_pidfile() { [ -f "$1" ] && awk '{print $1; exit}' "$1"; }
cpu_snap() {
  local out=$1 pg sq dd ob sk t u p ld=0
  pg=$(head -1 "${STACK_DIR:?}/pg/data/postmaster.pid" 2>/dev/null || true)
  sq=$(_cpu_pidfile "$STACK_DIR/sqs/fauxqs.pid"); dd=$(_cpu_pidfile "$STACK_DIR/ddb/dynalite.pid")
  ob=$(_cpu_pidfile "${OB_RUN:-/nonexistent}/outboxd.pid"); sk=$(_cpu_pidfile "${SINK_RUN:-/nonexistent}/sink.pid")
  for p in $(pgrep -x -P "$$" 'wrk|pgbench' 2>/dev/null); do ld=$((ld + $(_cpu_proc "$p" 0))); done
  t=$(awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat)
  u=$(awk '{printf "%d", $1 * 100}' /proc/uptime)
  {
    echo "pg $(_cpu_tree "$pg")"
    echo "outboxd $(_cpu_tree "$ob")"
    echo "sqs $(_cpu_tree "$sq")"
    echo "ddb $(_cpu_tree "$dd")"
    echo "sink $(_cpu_tree "$sk")"
    echo "load $ld"
    _cpu_titled "$ob" 'outboxd: http' ob_http
    _cpu_titled "$ob" 'outboxd: relay' ob_relay
    _cpu_titled "$ob" 'outboxd: consumer' ob_consumer
    _cpu_titled "$pg" 'walsender' pg_walsender
    echo "machine $t"
    echo "uptime $u"
  } >"$out"
}
# wall_s and the busy share use the wall time between the two /proc/stat reads (uptime), not
# the time between the calls: a snapshot takes ~0.3 s, more on a loaded machine.
cpu_result() { # LABEL A B
  local j
  j=$(awk -v lbl="$1" -v hz="$(getconf CLK_TCK)" -v ncpu="$(nproc)" '
    FNR == NR { a[$1] = $2; next } { d[$1] = ($2 - a[$1]) / ($1 == "uptime" ? 100 : hz) }
    END {
      wall = d["uptime"]
      known = d["pg"] + d["outboxd"] + d["sqs"] + d["ddb"] + d["sink"] + d["load"]
      other = d["machine"] - known; if (other < 0) other = 0
      printf "{\"bench\":\"cpu\",\"label\":\"%s\",\"wall_s\":%.2f", lbl, wall
      n = split("pg outboxd sqs ddb sink load", g, " ")
      for (i = 1; i <= n; i++) printf ",\"%s_cpu_s\":%.2f", g[i], d[g[i]]
      printf ",\"other_cpu_s\":%.2f,\"machine_cpu_s\":%.2f", other, d["machine"]
      n = split("ob_http ob_relay ob_consumer pg_walsender", s, " ")
      for (i = 1; i <= n; i++) if (s[i] in d) printf ",\"%s_cpu_s\":%.2f", s[i], d[s[i]]
      for (i = 1; i <= n; i++) printf ",\"%s_pct\":%.1f", g[i], (d["machine"] > 0 ? 100 * d[g[i]] / d["machine"] : 0)
      printf ",\"other_pct\":%.1f,\"machine_busy_pct\":%.1f}", (d["machine"] > 0 ? 100 * other / d["machine"] : 0), (wall > 0 ? 100 * d["machine"] / (wall * ncpu) : 0)
    }' "$2" "$3")
  result "$j"
}
