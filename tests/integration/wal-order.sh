#!/usr/bin/env bash
# wal-order.sh -- relay-order.sh's per-key commit order, with relay.mode =
# "wal" on a wal_level = logical cluster: the same FIFO queue, the same
# interleaved transactions (a key's second session committing first),
# the 4 writers of insert-first and lock-first transactions, and rows
# committed while publishing is paused (outboxctl pause, which the wal
# relay honours too) sent in commit order once resumed.  4 relays: one
# streams, three stand by.  Sourced, so that this scenario keeps its own
# name.
export PG_WAL_LEVEL=logical
export OB_EXTRA_RELAY='mode = "wal"'
# shellcheck source=relay-order.sh
. "$(dirname "$0")/relay-order.sh"
