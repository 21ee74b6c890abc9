#!/usr/bin/python3
"""check.py --dir DIR --ddb ENDPOINT [--seed N --seconds S --rate R] --
the soak's checker (tests/soak/soak.sh runs it once the faults stopped and
the system drained).  Prints one "PASS ..." or "FAIL ..." line per check,
then the figures; exit status 1 when any check failed.

It reads, in DIR (what soak.sh wrote):
  load-a.ids, load-b.ids    "ORDER_ID CUSTOMER_ID" per 201 (load-gen.py)
  load-a.stats, load-b.stats   the load generators' counts
  orders.tsv     id, customer_id, amount_cents of every order row
  outbox.tsv     id, event_type, status, destination, ordering_key,
                 payload orderId, customerId, amountCents, seq, attempts
  fifo.tsv       the FIFO queue read back (tests/lib/sqs-drain.py): group,
                 sequence number, deduplication id, body, in receive order
  webhook.jsonl  the webhook receiver's record
  secrets        the AWS key id, the AWS secret key, the webhook secret
  host-*/outboxd.log, host-*/restarts, figures.in, every *.log
and scans the DynamoDB table "fulfillments" itself (ENDPOINT, paged).

Checks:
  - every 201 has exactly one order row, with the customerId and amount
    the request sent, and exactly one order.created outbox row;
  - no request made two orders (customerIds are unique per request);
  - every outbox row is sent: none pending, none failed;
  - exactly one fulfillment item per order row with the order's
    customerId and amountCents, and no item for an unknown order;
  - every FIFO (destination "keys") row reached the FIFO queue, and per
    key the sequence numbers never go backwards in the order received
    (repeats of the last one, a redelivery, are allowed);
  - every webhook (destination "hooks") row reached the receiver with a
    valid signature;
  - no secret in any log (the AWS key id and secret key, the webhook
    secret);
  - no outboxd worker or master died of anything but the soak's kill -9
    (no "signal 6/11", sanitizer report or assertion in the host logs).
"""
import argparse
import collections
import glob
import http.client
import json
import os
import re
import sys
import urllib.parse

AUTH = ("AWS4-HMAC-SHA256 Credential=AKIDOUTBOXDTEST/20250101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + "0" * 64)

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("PASS %s" % what)
    else:
        failed += 1
        print("FAIL %s%s" % (what, (": " + detail) if detail else ""))


def sample(xs, n=5):
    xs = list(xs)
    return ", ".join(str(x) for x in xs[:n]) + (" ... (%d in all)" % len(xs) if len(xs) > n else "")


def ddb_scan(endpoint):
    u = urllib.parse.urlsplit(endpoint)
    items, start = [], None
    while True:
        req = {"TableName": "fulfillments", "ConsistentRead": True}
        if start:
            req["ExclusiveStartKey"] = start
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        c.request("POST", "/", json.dumps(req), {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "DynamoDB_20120810.Scan",
            "X-Amz-Date": "20250101T000000Z", "Authorization": AUTH})
        r = c.getresponse()
        body = r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError("Scan: HTTP %d %s" % (r.status, body[:300]))
        doc = json.loads(body)
        items.extend(doc.get("Items") or [])
        start = doc.get("LastEvaluatedKey")
        if not start:
            return items


def tsv(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ddb", required=True)
    ap.add_argument("--seed", default="?")
    ap.add_argument("--seconds", default="?")
    ap.add_argument("--rate", default="?")
    a = ap.parse_args()
    d = a.dir

    # ---- the answers -------------------------------------------------------
    created = {}		# order id -> customer id
    dup_201 = 0
    for h in "ab":
        with open(os.path.join(d, "load-%s.ids" % h)) as f:
            for line in f:
                oid, cust = line.split()
                if oid in created:
                    dup_201 += 1
                created[oid] = cust
    load = {h: json.load(open(os.path.join(d, "load-%s.stats" % h))) for h in "ab"}
    sent = sum(s["sent"] for s in load.values())
    n201 = sum(s["created"] for s in load.values())
    fails = collections.Counter()
    for s in load.values():
        for k in ("refused", "reset", "timeout", "error"):
            fails[k] += s.get(k, 0)
        for code, n in (s.get("http") or {}).items():
            fails["http_" + code] += n

    # ---- the rows ----------------------------------------------------------
    orders = {}
    by_customer = collections.Counter()
    for oid, cust, amount in tsv(os.path.join(d, "orders.tsv")):
        orders[oid] = (cust, int(amount))
        by_customer[cust] += 1
    outbox = tsv(os.path.join(d, "outbox.tsv"))
    status = collections.Counter(r[2] for r in outbox)
    created_rows = collections.Counter(r[5] for r in outbox if r[1] == "order.created")

    missing = [o for o in created if o not in orders]
    check(not missing and dup_201 == 0, "every 201 has its order row (%d 201s)" % len(created),
          "missing: %s; order ids answered twice: %d" % (sample(missing), dup_201))
    wrong = []
    for o, cust in created.items():
        if o in orders:
            seq = int(cust.rsplit("-", 1)[1])
            if orders[o] != (cust, seq):
                wrong.append(o)
    check(not wrong, "every 201's order row holds what its request sent", sample(wrong))
    not_one = [o for o in created if created_rows.get(o, 0) != 1]
    check(not not_one, "every 201 has exactly one order.created outbox row",
          sample("%s x%d" % (o, created_rows.get(o, 0)) for o in not_one))
    orphans = [o for o in orders if created_rows.get(o, 0) != 1]
    check(not orphans, "every order row has exactly one order.created outbox row (%d orders)" % len(orders),
          sample(orphans))
    twice = [c for c, n in by_customer.items() if n > 1]
    check(not twice, "no request made two orders", sample(twice))
    pend = [r[0] for r in outbox if r[2] == "pending"]
    fail = [r[0] for r in outbox if r[2] == "failed"]
    check(not pend, "no outbox row pending (%d rows)" % len(outbox), "pending ids: %s" % sample(pend))
    check(not fail, "no outbox row failed", "failed ids: %s" % sample(fail))

    # ---- the fulfillments ------------------------------------------------------
    items = ddb_scan(a.ddb)
    per = collections.Counter(i["orderId"]["S"] for i in items)
    lost = [o for o in orders if per.get(o, 0) == 0]
    dupl = [o for o, n in per.items() if n > 1]
    unknown = [o for o in per if o not in orders]
    check(not lost, "every order has a fulfillment item (%d items)" % len(items), "lost: %s" % sample(lost))
    check(not dupl, "no order has two fulfillment items", sample(dupl))
    check(not unknown, "no fulfillment item for an unknown order", sample(unknown))
    bad = []
    for i in items:
        o = i["orderId"]["S"]
        if o in orders:
            cust, amount = orders[o]
            if i.get("customerId", {}).get("S") != cust or int(i.get("amountCents", {}).get("N", "-1")) != amount:
                bad.append(o)
    check(not bad, "every fulfillment item matches its order (customerId, amountCents)", sample(bad))

    # ---- per-key order on the FIFO queue ---------------------------------------
    fifo_rows = {r[0]: r for r in outbox if r[3] == "keys"}
    got = tsv(os.path.join(d, "fifo.tsv")) if os.path.exists(os.path.join(d, "fifo.tsv")) else []
    seen_ids = set()
    last = {}
    back = []
    for g, _sn, dedup, body in (x + [""] * (4 - len(x)) for x in got):
        seen_ids.add(dedup)
        try:
            doc = json.loads(body)
            k, s = doc["key"], int(doc["seq"])
        except (ValueError, KeyError, TypeError):
            back.append("unreadable message %r" % body[:80])
            continue
        if k != g:
            back.append("%s in group %s" % (k, g))
        if k in last and s < last[k]:
            back.append("%s: %d after %d" % (k, s, last[k]))
        last[k] = max(s, last.get(k, s))
    not_there = [i for i in fifo_rows if i not in seen_ids]
    check(fifo_rows and not not_there, "every FIFO row reached the FIFO queue (%d rows, %d messages read)" %
          (len(fifo_rows), len(got)), "not received: %s" % sample(not_there))
    check(not back, "per key, sequence numbers never go backwards on the FIFO queue (%d keys)" % len(last),
          sample(back))
    redelivered = len(got) - len(seen_ids)

    # ---- the webhook -------------------------------------------------------------
    hook_rows = [r for r in outbox if r[3] == "hooks"]
    rec = [json.loads(line) for line in open(os.path.join(d, "webhook.jsonl"))] \
        if os.path.exists(os.path.join(d, "webhook.jsonl")) else []
    hook_ns = collections.Counter()
    badsig = 0
    for r in rec:
        if not r.get("sig_ok"):
            badsig += 1
        try:
            hook_ns[json.loads(r["body"])["n"]] += 1
        except (ValueError, KeyError, TypeError):
            pass
    want = [int(r[4].split("-", 1)[1]) for r in hook_rows]
    nohook = [n for n in want if hook_ns.get(n, 0) == 0]
    check(hook_rows and not nohook, "every webhook row reached the receiver (%d rows, %d requests)" %
          (len(hook_rows), len(rec)), "not received: %s" % sample(nohook))
    check(badsig == 0, "every webhook request carried a valid signature", "%d bad" % badsig)

    # ---- the logs ------------------------------------------------------------------
    secrets = [s.strip() for s in open(os.path.join(d, "secrets")) if s.strip()]
    logs = sorted(set(glob.glob(os.path.join(d, "**", "*.log"), recursive=True) +
                      glob.glob(os.path.join(d, "**", "*.err"), recursive=True)))
    leaks = []
    for path in logs:
        with open(path, "rb") as f:
            text = f.read()
        for i, s in enumerate(secrets):
            if s.encode() in text:
                leaks.append("%s in %s" % (["AWS key id", "AWS secret key", "webhook secret"][min(i, 2)],
                                           os.path.relpath(path, d)))
    check(len(secrets) == 3 and not leaks, "no secret in any of %d logs" % len(logs), sample(leaks))
    dup_absorbed = 0
    crashes = []
    worker_deaths = collections.Counter()
    respawns = 0
    for h in "ab":
        with open(os.path.join(d, "host-%s" % h, "outboxd.log"), errors="replace") as f:
            for line in f:
                if "order already fulfilled (duplicate delivery)" in line:
                    dup_absorbed += 1
                m = re.search(r'msg="(\w+) \d+ pid=\d+ (exited with status \d+|killed by signal \d+)', line)
                if m:
                    worker_deaths[(m.group(1), m.group(2))] += 1
                    if "killed by signal" in m.group(2) and "signal 9" not in m.group(2):
                        crashes.append("host %s: %s" % (h, line.strip()[:200]))
                if "respawning" in line:
                    respawns += 1
                if re.search(r"ERROR: (Address|Leak)Sanitizer|runtime error: |Assertion .* failed", line):
                    crashes.append("host %s: %s" % (h, line.strip()[:200]))
    check(not crashes, "no outboxd process died but of the soak's kill -9", sample(crashes, 3))

    # ---- the figures -----------------------------------------------------------------
    fig = {}
    if os.path.exists(os.path.join(d, "figures.in")):
        for line in open(os.path.join(d, "figures.in")):
            k, _, v = line.strip().partition(" ")
            fig[k] = v
    print("---- soak figures (seed %s, %s s, %s orders/s) ----" % (a.seed, a.seconds, a.rate))
    print("orders requested %d; 201s %d; failed requests %d (%s)" %
          (sent, n201, sum(fails.values()), ", ".join("%s %d" % kv for kv in sorted(fails.items()) if kv[1]) or "none"))
    print("order rows %d (%d without a 201: committed, answer lost); fulfillment items %d" %
          (len(orders), len(set(orders) - set(created)), len(items)))
    print("lost %d, duplicate fulfillments %d, stuck (pending) %d, failed %d" %
          (len(lost), len(dupl), len(pend), len(fail)))
    print("outbox rows %d (%s)" % (len(outbox), ", ".join("%s %d" % kv for kv in sorted(status.items()))))
    print("duplicates absorbed by the consumers (\"duplicate delivery\" log lines): %d" % dup_absorbed)
    print("FIFO: %d rows, %d messages read, %d redelivered; webhook: %d rows, %d requests" %
          (len(fifo_rows), len(got), redelivered, len(hook_rows), len(rec)))
    print("master restarts: a %s, b %s; worker respawns %d; worker exits: %s" %
          (fig.get("restarts_a", "?"), fig.get("restarts_b", "?"), respawns,
           ", ".join("%s %s: %d" % (k[0], k[1], n) for k, n in sorted(worker_deaths.items())) or "none"))
    faults = sorted((k[6:], v) for k, v in fig.items() if k.startswith("fault_"))
    print("faults injected: %s" % (", ".join("%s %s" % kv for kv in faults) or "none"))
    print("requests faulted by the proxies: sqs %s, ddb %s; chunks delayed by the net relays: a %s, b %s" %
          (fig.get("proxy_faulted_sqs", "?"), fig.get("proxy_faulted_ddb", "?"),
           fig.get("net_delayed_chunks_a", "?"), fig.get("net_delayed_chunks_b", "?")))
    print("checks: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
