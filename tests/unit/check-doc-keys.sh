#!/bin/sh
# check-doc-keys.sh -- the configuration keys the parser accepts, the keys
# the manual documents and the keys the shipped files show must agree.
#
#   src/conf.c            every CFG_* option of the cfg_opt_t tables, named
#                         section.key (top-level keys have no section)
#   man/outbox.conf.5     every ".It Cm KEY" of ".Ss Top-level keys" and
#                         ".Ss The SECTION section", and every key (set or
#                         commented out) of the complete example, the first
#                         literal display of EXAMPLES
#   etc/outbox.conf       every key, set or commented out ("#key = ...")
#   etc/*example*         only keys that exist (a subset is fine)
#
# For a key with a default in conf.c, its "Default:" in the manual must show
# that value; for a key with a CONF_RANGE validator, its "Type:" line must
# show "MIN to MAX".  Prints every difference and exits 1 if there is any.
# Run by "make check"; top_srcdir (or $1) is the source tree.
set -eu
top=${1:-${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
conf_c=$top/src/conf.c
man5=$top/man/outbox.conf.5
etc=$top/etc/outbox.conf
for f in "$conf_c" "$man5" "$etc"; do
	[ -r "$f" ] || { echo "check-doc-keys: cannot read $f" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-doc-keys.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---- src/conf.c: "key<TAB>default" per option, default "-" if NULL ------
# Tables are "static cfg_opt_t NAME[] = { ... };".  CFG_SEC("s", TABLE, ..)
# makes TABLE's keys "s.KEY"; the table given to cfg_init() is the root.
awk '
function strip(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
/cfg_opt_t[ \t]+[A-Za-z0-9_]+[ \t]*\[\][ \t]*=/ {
	t = $0; sub(/.*cfg_opt_t[ \t]+/, "", t); sub(/[ \t]*\[.*/, "", t)
	table = t; next
}
table != "" && /^[ \t]*};/ { table = ""; next }
table != "" && /CFG_SEC[ \t]*\(/ {
	s = $0; sub(/.*CFG_SEC[ \t]*\([ \t]*"/, "", s)
	name = s; sub(/".*/, "", name)
	sub(/^[^"]*"[ \t]*,[ \t]*/, "", s); sub(/[ \t,)].*/, "", s)
	parent[s] = table; secname[s] = name
	next
}
table != "" && /CFG_[A-Z_]+[ \t]*\([ \t]*"/ {
	s = $0; sub(/.*CFG_[A-Z_]+[ \t]*\([ \t]*"/, "", s)
	name = s; sub(/".*/, "", name)
	sub(/^[^"]*"[ \t]*,[ \t]*/, "", s)
	if (s ~ /^"/) { d = substr(s, 2); sub(/".*/, "", d) }
	else { d = s; sub(/[ \t]*,.*/, "", d); d = strip(d) }
	if (d == "NULL") d = "-"
	if (d == "cfg_true") d = "true"
	if (d == "cfg_false") d = "false"
	n++; otab[n] = table; oname[n] = name; odef[n] = d
	next
}
/cfg_init[ \t]*\(/ { r = $0; sub(/.*cfg_init[ \t]*\([ \t]*/, "", r); sub(/[ \t,)].*/, "", r); root = r }
function prefix(t,   p) {
	if (t == root || !(t in parent)) return ""
	p = prefix(parent[t]); return p secname[t] "."
}
END {
	if (root == "") { print "check-doc-keys: no cfg_init() in conf.c" > "/dev/stderr"; exit 1 }
	for (i = 1; i <= n; i++)
		if (otab[i] == root || (otab[i] in parent))
			printf "%s%s\t%s\n", prefix(otab[i]), oname[i], odef[i]
}' "$conf_c" | sort >"$tmp/code.tsv"
cut -f1 "$tmp/code.tsv" >"$tmp/code"

# Ranges: CONF_RANGE(fn, min, max) and cfg_set_validate_func(cfg, "s|key", fn)
awk '
/^CONF_RANGE\(/ {
	s = $0; sub(/^CONF_RANGE\([ \t]*/, "", s); sub(/\)[ \t]*$/, "", s)
	split(s, a, ","); fn = a[1]; gsub(/[ \t]/, "", fn)
	rng[fn] = product(a[2]) "\t" product(a[3]); next
}
# "64L * 1024 * 1024" -> 67108864
function product(e,   f, i, k, v) {
	gsub(/[ \tL()]/, "", e); k = split(e, f, "*"); v = 1
	for (i = 1; i <= k; i++) v *= f[i]
	return sprintf("%d", v)
}
/cfg_set_validate_func[ \t]*\(/ {
	s = $0; sub(/.*cfg_set_validate_func[ \t]*\([^"]*"/, "", s)
	key = s; sub(/".*/, "", key); gsub(/\|/, ".", key)
	fn = s; sub(/^[^"]*"[ \t]*,[ \t]*/, "", fn); sub(/[ \t)].*/, "", fn)
	if (fn in rng) print key "\t" rng[fn]
}' "$conf_c" | sort >"$tmp/ranges.tsv"

# ---- man/outbox.conf.5 ---------------------------------------------------
# "KEY<TAB>default text<TAB>type text" from the key lists; the default and
# type texts run from "Default:"/"Type:" to the end of their sentence, with
# macro names dropped (".Dq info ." -> "info").
awk '
function flush() {
	sub(/[ \t]*[.;][ \t]*$/, "", dflt); sub(/[ \t]*[.;][ \t]*$/, "", typ)
	if (key != "") printf "%s\t%s\t%s\n", key, dflt, typ
	key = ""; dflt = ""; typ = ""; grab = ""
}
function text(l) {
	sub(/^\.[A-Z][a-z][ \t]*/, "", l)
	gsub(/[ \t](Dq|Ql|Ev|No|Ns|Cm)[ \t]/, " ", l)
	return l
}
/^\.Sh / { flush(); sect = "none"; depth = 0; next }
/^\.Ss Top-level keys[ \t]*$/ { flush(); sect = ""; depth = 0; next }
/^\.Ss The [A-Za-z0-9_]+ section[ \t]*$/ { flush(); sect = $3 "."; depth = 0; next }
/^\.Ss / { flush(); sect = "none"; next }
sect == "none" { next }
/^\.Bl/ { depth++; next }
/^\.El/ { if (depth == 1) flush(); depth--; next }
depth == 1 && /^\.It Cm / { flush(); key = sect $3; next }
key == "" { next }
/^Default:/ { grab = "d"; l = $0; sub(/^Default:[ \t]*/, "", l); dflt = l; if (l ~ /\.$/) grab = ""; next }
/^Type:/ { grab = "t"; l = $0; sub(/^Type:[ \t]*/, "", l); typ = l; if (l ~ /\.$/) grab = ""; next }
grab != "" {
	l = text($0)
	if (grab == "d") dflt = dflt " " l; else typ = typ " " l
	if ($0 ~ /[.;] *$/ || $0 ~ /^[^.].*\.$/) grab = ""
	next
}
END { flush() }' "$man5" | sort >"$tmp/man.tsv"
cut -f1 "$tmp/man.tsv" >"$tmp/man"

# Keys of a configuration file (or text in that syntax): "key = ..." lines,
# also commented out ("#key = ..."), inside "name {" or "name TITLE {"
# ... "}" blocks, which may be commented out whole ("#destination x {",
# "#	sink = ...", "#}").  A list value ("= {"a", "b"}") is one value.
conf_keys() {
	awk '
	{
		line = $0
		sub(/^[ \t]+/, "", line)
		if (line ~ /^#/) {
			sub(/^#[ \t]*/, "", line)
			if (line ~ /^[A-Za-z0-9_]+[ \t]*=/) {
				sub(/[ \t]*=.*/, "", line)
				print prefix() line
			} else if (line ~ /^[A-Za-z0-9_]+([ \t]+("[^"]*"|[A-Za-z0-9_.-]+))?[ \t]*\{[ \t]*$/) {
				sub(/[ \t{].*/, "", line)
				stack[++sp] = line
			} else if (line ~ /^\}[ \t]*$/ && sp > 0) {
				sp--
			}
			next
		}
		gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
		gsub(/\047[^\047]*\047/, "\"\"", line)
		sub(/[ \t]*(#|\/\/).*/, "", line)
		while (line != "") {
			sub(/^[ \t]+/, "", line)
			if (line ~ /^[A-Za-z0-9_]+([ \t]+(""|[A-Za-z0-9_.-]+))?[ \t]*\{/) {
				name = line; sub(/[ \t{].*/, "", name)
				stack[++sp] = name
				sub(/^[^{]*\{/, "", line)
			} else if (line ~ /^[A-Za-z0-9_]+[ \t]*=/) {
				name = line; sub(/[ \t]*=.*/, "", name)
				print prefix() name
				sub(/^[^=]*=[ \t]*/, "", line)
				if (line ~ /^\{/)
					sub(/^\{[^}]*\}?/, "", line)
				else
					sub(/^("[^"]*"|[^ \t}]*)/, "", line)
			} else if (line ~ /^\}/) {
				sp--; line = substr(line, 2)
			} else {
				line = ""
			}
		}
	}
	function prefix(   i, p) { p = ""; for (i = 1; i <= sp; i++) p = p stack[i] "."; return p }
	' "$@" | sort -u
}

conf_keys "$etc" >"$tmp/etc"
awk '/^\.Sh EXAMPLES/ { ex = 1; next }
	ex && /^\.Bd -literal/ { on = 1; next }
	on && /^\.Ed/ { exit }
	on { print }' "$man5" | sed 's/\\e/\\/g' >"$tmp/example.conf"
conf_keys "$tmp/example.conf" >"$tmp/example"

fail=0
report() {	# report TITLE FILE: prints the lines of FILE under TITLE
	if [ -s "$2" ]; then
		echo "$1"
		sed 's/^/	/' "$2"
		fail=1
	fi
}

[ -s "$tmp/code" ] || { echo "check-doc-keys: no option found in $conf_c" >&2; exit 1; }
comm -23 "$tmp/code" "$tmp/man" >"$tmp/d1"
comm -13 "$tmp/code" "$tmp/man" >"$tmp/d2"
comm -23 "$tmp/code" "$tmp/etc" >"$tmp/d3"
comm -13 "$tmp/code" "$tmp/etc" >"$tmp/d4"
comm -23 "$tmp/code" "$tmp/example" >"$tmp/d5"
comm -13 "$tmp/code" "$tmp/example" >"$tmp/d6"
report "keys in src/conf.c not documented in man/outbox.conf.5 (add an .It Cm entry):" "$tmp/d1"
report "keys documented in man/outbox.conf.5 that src/conf.c does not accept:" "$tmp/d2"
report "keys in src/conf.c missing from etc/outbox.conf (add them, commented out if optional):" "$tmp/d3"
report "keys in etc/outbox.conf that src/conf.c does not accept:" "$tmp/d4"
report "keys in src/conf.c missing from the complete example in man/outbox.conf.5 EXAMPLES:" "$tmp/d5"
report "keys in the man/outbox.conf.5 example that src/conf.c does not accept:" "$tmp/d6"

for ex in "$top"/etc/*example*; do
	[ -f "$ex" ] || continue
	conf_keys "$ex" | comm -13 "$tmp/code" - >"$tmp/d7"
	report "keys in ${ex#"$top"/} that src/conf.c does not accept:" "$tmp/d7"
done

# Defaults: "Default:" must show the value conf.c gives (NULL defaults are
# described in words and not compared).
: >"$tmp/d8"
while IFS='	' read -r key def; do
	[ "$def" != "-" ] || continue
	mdef=$(awk -F '\t' -v k="$key" '$1 == k { print $2 }' "$tmp/man.tsv")
	case " $mdef " in
	*[!0-9A-Za-z_.:-]"$def"[!0-9A-Za-z_.:-]*) ;;
	*)	[ -z "$(grep -x "$key" "$tmp/man")" ] ||
			echo "$key: conf.c default $def, manual says \"Default: $mdef\"" >>"$tmp/d8" ;;
	esac
done <"$tmp/code.tsv"
report "defaults that differ between src/conf.c and man/outbox.conf.5:" "$tmp/d8"

# Ranges: "Type:" must show "MIN to MAX".
: >"$tmp/d9"
while IFS='	' read -r key lo hi; do
	grep -qx "$key" "$tmp/man" || continue
	mtyp=$(awk -F '\t' -v k="$key" '$1 == k { print $3 }' "$tmp/man.tsv")
	case "$mtyp" in
	*"$lo to $hi"[!0-9]*|*"$lo to $hi") ;;
	*)	echo "$key: conf.c range $lo..$hi, manual says \"Type: $mtyp\"" >>"$tmp/d9" ;;
	esac
done <"$tmp/ranges.tsv"
report "ranges that differ between src/conf.c and man/outbox.conf.5:" "$tmp/d9"

n=$(wc -l <"$tmp/code")
if [ "$fail" = 0 ]; then
	echo "check-doc-keys: $n keys; src/conf.c, man/outbox.conf.5 and etc/outbox.conf agree"
fi
exit "$fail"
