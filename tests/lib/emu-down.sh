#!/usr/bin/env bash
# emu-down.sh NAME STATEDIR -- stop the emulator emu-up.sh started
# (STATEDIR/NAME.pid).  Nothing to stop is not an error.
set -euo pipefail
NAME=${1:?usage: emu-down.sh NAME STATEDIR}
STATE=${2:?usage: emu-down.sh NAME STATEDIR}
. "$(cd "$(dirname "$0")" && pwd)/proc.sh"
proc_stop "$STATE/$NAME.pid" 10
