#!/usr/bin/python3
"""schedule.py SEED SECONDS -- the soak's fault schedule, from a seed.

Prints one line per action, sorted by time: "T KIND [ARG...]" where T is
milliseconds from the start of the load.  The same SEED and SECONDS give
the same lines (Python's random.Random, its own generator, not the
process's), so a run is replayed with SOAK_SEED=SEED SOAK_SECONDS=SECONDS.

Kinds (HOST is a or b):
  kill-http HOST | kill-relay HOST | kill-consumer HOST
                        kill -9 one worker of that kind (the master
                        restarts it)
  kill-master HOST      kill -9 the master (its supervisor restarts it)
  pg-restart            PostgreSQL restarted in immediate mode (a crash:
                        no checkpoint, connections cut)
  sqs-500 SECS | ddb-500 SECS
                        every request answered HTTP 500 for SECS seconds
  sqs-timeout SECS | ddb-timeout SECS
                        every request held past the client's timeout (the
                        soak picks the delay) for SECS seconds
  sqs-drop SECS | ddb-drop SECS
                        every request carried out, then its connection
                        closed without an answer, for SECS seconds
  net-loss HOST PCT     drop PCT % of the packets between HOST and the
                        root namespace (database and emulators)
  net-delay HOST MS     loss off; every byte between them delayed MS ms
  net-partition HOST    delay off; no packet passes
  net-heal HOST         everything passes again
The net-* lines come as an episode per host: loss, then delay, then a
partition, then the heal; one host's episodes never overlap.  Everything
else is scattered over the run, overlapping at random, and every kind
appears at least once when the run is long enough (SECONDS >= 60).
Nothing is scheduled in the first 5 s or the last 10 % of the run, so
that the end of the run is faults stopped and the system draining.
"""
import random
import sys

POINT = ["kill-http", "kill-relay", "kill-consumer", "kill-master"]
SERVICE = ["sqs-500", "sqs-timeout", "sqs-drop", "ddb-500", "ddb-timeout", "ddb-drop"]


def plan(seed, seconds):
    r = random.Random(seed)
    lo, hi = 5.0, seconds * 0.9
    out = []
    if hi - lo < 10:
        return out

    def at():
        return r.uniform(lo, hi)

    def point(kind, t):
        if kind in POINT:
            out.append((t, kind, r.choice("ab")))
        elif kind == "pg-restart":
            out.append((t, kind))
        else:
            secs = r.randint(2, 6)
            out.append((t, kind, str(secs)))

    kinds = POINT + ["pg-restart"] + SERVICE
    if seconds >= 60:
        for k in kinds:
            point(k, at())
    # then one more fault every 6 s on average; worker kills twice as likely
    weights = [2, 2, 2, 1, 1] + [1] * len(SERVICE)
    n = int((hi - lo) / 6)
    for _ in range(n):
        point(r.choices(kinds, weights)[0], at())
    # network episodes: per host, one per ~90 s of run, at least one
    for host in "ab":
        episodes = max(1, int(seconds / 90))
        slot = (hi - lo) / episodes
        for e in range(episodes):
            loss, delay, part = r.randint(3, 8), r.randint(3, 8), r.randint(3, 10)
            span = loss + delay + part
            start = lo + e * slot + r.uniform(0, max(0.0, slot - span - 1))
            out.append((start, "net-loss", host, str(r.choice([5, 10, 20, 30]))))
            out.append((start + loss, "net-delay", host, str(r.choice([50, 200, 500, 1000]))))
            out.append((start + loss + delay, "net-partition", host))
            out.append((start + span, "net-heal", host))
    out.sort(key=lambda x: x[0])
    return out


def main():
    seed = int(sys.argv[1])
    seconds = float(sys.argv[2])
    for ev in plan(seed, seconds):
        print(" ".join([str(int(ev[0] * 1000))] + list(ev[1:])))


if __name__ == "__main__":
    main()
