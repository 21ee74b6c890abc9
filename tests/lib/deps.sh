# deps.sh -- install what building and testing outboxd needs (sourced by
# tests/run-all.sh and tests/demo.sh; also runnable: bash tests/lib/deps.sh).
#
# ensure_deps
#	On Debian 12: installs the missing Debian packages with apt-get (as
#	root; otherwise it says what to install and fails), then checks that
#	Node.js >= 20 (the pinned fauxqs 1.9.2 needs it), Debian's botocore
#	for /usr/bin/python3, and PostgreSQL's server binaries are there.
#	clang and libclang-rt-14-dev (libclang_rt.fuzzer-x86_64.a, the
#	libFuzzer runtime of Debian 12's clang 14) are for make fuzz.
#	Packages already installed are not touched; Node.js is installed from
#	Debian only when no `node` is on PATH at all.
# emu_install
#	npm ci in tests/emu/fauxqs and tests/emu/dynalite (exact versions from
#	their package-lock.json).

OUTBOXD_APT_PACKAGES="build-essential autoconf automake pkg-config
	libpq-dev libevent-dev libcurl4-openssl-dev libcjson-dev libconfuse-dev
	libexpat1-dev libcmocka-dev libssl-dev postgresql python3-botocore python3-psycopg2
	curl jq ca-certificates
	procps util-linux coreutils prometheus valgrind
	clang libclang-rt-14-dev"
# the soak (tests/soak/soak.sh): network namespaces and nftables rules
OUTBOXD_APT_PACKAGES+=" iproute2 nftables"

_deps_say() { echo "deps: $*" >&2; }
_deps_die() { echo "deps: ERROR: $*" >&2; return 1; }

_deps_installed() {
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

ensure_deps() {
	local p missing=() major
	command -v dpkg-query >/dev/null ||
		{ _deps_die "not a Debian system (no dpkg-query); install by hand: $OUTBOXD_APT_PACKAGES nodejs (>= 20) npm"; return 1; }
	for p in $OUTBOXD_APT_PACKAGES; do
		_deps_installed "$p" || missing+=("$p")
	done
	command -v node >/dev/null || missing+=(nodejs)
	command -v npm >/dev/null || missing+=(npm)
	if [ ${#missing[@]} -gt 0 ]; then
		if [ "$(id -u)" != 0 ]; then
			_deps_die "missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})"
			return 1
		fi
		_deps_say "installing: ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q >&2 || { _deps_die "apt-get update failed"; return 1; }
		apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
			{ _deps_die "apt-get install ${missing[*]} failed"; return 1; }
	else
		_deps_say "all Debian packages present"
	fi
	command -v node >/dev/null || { _deps_die "node still missing after install"; return 1; }
	major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
	if [ "$major" -lt 20 ]; then
		_deps_die "Node.js $(node --version) is too old: the pinned SQS emulator fauxqs 1.9.2 needs Node.js >= 20 (Debian 12's own nodejs is 18; install Node.js 20 and run again)"
		return 1
	fi
	command -v npm >/dev/null || { _deps_die "npm missing"; return 1; }
	/usr/bin/python3 -c 'import botocore.auth' 2>/dev/null ||
		{ _deps_die "/usr/bin/python3 cannot import botocore (apt-get install python3-botocore)"; return 1; }
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 ||
		{ _deps_die "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)"; return 1; }
	_deps_say "node $(node --version), npm $(npm --version), $("$(ls /usr/lib/postgresql/*/bin/postgres | sort -V | tail -1)" --version), botocore $(/usr/bin/python3 -c 'import botocore; print(botocore.__version__)')"
}

emu_install() {
	local root d
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	for d in "$root/tests/emu/fauxqs" "$root/tests/emu/dynalite"; do
		_deps_say "npm ci in ${d#$root/}"
		(cd "$d" && npm ci --no-audit --no-fund --loglevel=error) >&2 ||
			{ _deps_die "npm ci failed in $d"; return 1; }
	done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	ensure_deps
	emu_install
fi
