#!/usr/bin/python3
"""net-relay.py -- a TCP relay that can delay traffic: the soak's stand-in
for `tc netem delay`, which this kernel does not have (no netem, fq, etf
or cake qdisc; see tests/soak/soak.sh).

    /usr/bin/python3 tests/lib/net-relay.py --control FILE \
        --map LISTEN_HOST:LISTEN_PORT=UPSTREAM_HOST:UPSTREAM_PORT [--map ...]
        [--stats FILE]

Each --map is a listener: every connection accepted there gets its own
connection to the upstream, and bytes are copied both ways unchanged.
What stands in for the network's delay: while FILE (JSON, read every
0.2 s; missing or unreadable = {}) says {"delay_ms": N}, every chunk read
from either side is written to the other N ms after it arrived, in order
(a per-direction queue, so a delay never reorders bytes).  Packet loss and
partitions are not done here but by nftables rules on the path (the soak
adds them), so the relay sees them as the kernel delivers them: TCP
retransmits, or silence.  A connection one side closes is closed on the
other side once what was queued for it is written.  Standard library only.

Stats (FILE given): {"connections": N, "open": N, "bytes": N,
"delayed_chunks": N, "delay_ms": N}, written every 0.2 s when changed.
"""
import argparse
import asyncio
import collections
import json
import os
import signal
import sys
import time

state = {"delay_ms": 0}
stats = {"connections": 0, "open": 0, "bytes": 0, "delayed_chunks": 0,
         "delay_ms": 0}


class Pipe:
    """One direction: bytes read on one transport, written to another,
    each chunk no sooner than delay_ms after it was read."""

    def __init__(self, loop):
        self.loop = loop
        self.dst = None
        self.queue = collections.deque()
        self.timer = None
        self.closing = False

    def feed(self, data):
        d = state["delay_ms"]
        stats["bytes"] += len(data)
        if d <= 0 and not self.queue and self.dst is not None:
            self.dst.write(data)
            return
        if d > 0:
            stats["delayed_chunks"] += 1
        self.queue.append((time.monotonic() + d / 1000.0, data))
        self.kick()

    def kick(self):
        if self.timer is not None or self.dst is None:
            return
        now = time.monotonic()
        while self.queue and self.queue[0][0] <= now:
            self.dst.write(self.queue.popleft()[1])
        if self.queue:
            self.timer = self.loop.call_at(
                self.loop.time() + (self.queue[0][0] - now), self.fire)
        elif self.closing:
            self.dst.close()

    def fire(self):
        self.timer = None
        self.kick()

    def close(self):
        self.closing = True
        if self.dst is not None and not self.queue and self.timer is None:
            self.dst.close()


class Side(asyncio.Protocol):
    def __init__(self, out_pipe, in_pipe, on_lost=None):
        self.out_pipe = out_pipe	# what this side reads goes here
        self.in_pipe = in_pipe		# what this side is sent comes from here
        self.on_lost = on_lost
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        self.in_pipe.dst = transport
        self.in_pipe.kick()

    def data_received(self, data):
        self.out_pipe.feed(data)

    def eof_received(self):
        self.out_pipe.close()
        return False

    def connection_lost(self, exc):
        self.out_pipe.close()
        if self.on_lost:
            self.on_lost()


async def serve_map(loop, listen, upstream):
    lh, lp = listen.rsplit(":", 1)
    uh, up = upstream.rsplit(":", 1)

    def factory():
        c2u = Pipe(loop)	# client -> upstream
        u2c = Pipe(loop)	# upstream -> client
        stats["connections"] += 1
        stats["open"] += 1
        client = Side(c2u, u2c, on_lost=lambda: stats.__setitem__("open", stats["open"] - 1))

        async def connect():
            try:
                await loop.create_connection(lambda: Side(u2c, c2u), uh, int(up))
            except OSError:
                if client.transport is not None:
                    client.transport.abort()
        loop.create_task(connect())
        return client

    srv = await loop.create_server(factory, lh, int(lp), reuse_address=True, backlog=512)
    return srv


async def main_async(a):
    loop = asyncio.get_running_loop()
    servers = []
    for m in a.map:
        listen, upstream = m.split("=", 1)
        servers.append(await serve_map(loop, listen, upstream))
    sys.stderr.write("net-relay[%d]: %s\n" % (os.getpid(), ", ".join(a.map)))
    sys.stderr.flush()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    last = None
    while not stop.is_set():
        try:
            with open(a.control) as f:
                c = json.load(f)
            d = int(c.get("delay_ms", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            d = 0
        if d != state["delay_ms"]:
            sys.stderr.write("net-relay[%d]: delay %d ms\n" % (os.getpid(), d))
            sys.stderr.flush()
        state["delay_ms"] = stats["delay_ms"] = d
        snap = json.dumps(stats)
        if a.stats and snap != last:
            tmp = a.stats + ".tmp"
            with open(tmp, "w") as f:
                f.write(snap + "\n")
            os.replace(tmp, a.stats)
            last = snap
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
        except asyncio.TimeoutError:
            pass
    for s in servers:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--map", action="append", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--stats", default=None)
    a = ap.parse_args()
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
