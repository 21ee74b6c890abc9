#!/usr/bin/env python3
"""b3-split.py -- where B3's commit -> ack time goes, hop by hop.

    b3-split.py PCAP SQS_PORT PG_PORT ROWS_CSV

PCAP is a loopback capture (tcpdump -i lo -w) of one B3 run; ROWS_CSV has one line per outbox
row: id, created_at, the order's commit timestamp, sent_at (epoch seconds) and the order id.
All the clocks are this machine's, so the capture's timestamps and PostgreSQL's line up.

Per row, from the capture:
  statement   created_at (the statement's now()) -> its commit timestamp    PostgreSQL
  reply       commit -> the first packet carrying the order id to the
              HTTP worker                                                    PostgreSQL
  to_sqs      that packet -> the SendMessageBatch carrying the row's id      outboxd (HTTP worker,
              on the wire                                                    handoff, relay 1)
  sqs         that request -> the first byte of SQS's answer                 the emulator
  to_stamp    the answer -> sent_at                                          outboxd (relay 1)
Prints one JSON line: p50/p90/p99/max (ms) of each and of the total (created_at -> sent_at),
and the ten slowest rows with their split.
"""
import csv
import json
import re
import struct
import sys

UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TARGET = re.compile(rb"x-amz-target: *AmazonSQS\.(\w+)", re.I)
ENTRY_ID = re.compile(rb'"Id":"(\d+)"')


def packets(path):
    """(time s, src port, dst port, TCP payload) of each IPv4 TCP packet with a payload."""
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0] if len(head) == 24 else 0
        if magic not in (0xA1B2C3D4, 0xA1B23C4D):
            sys.exit("b3-split: %s is not a little-endian pcap file" % path)
        frac = 1e9 if magic == 0xA1B23C4D else 1e6
        link, = struct.unpack("<I", head[20:24])
        skip = {1: 14, 113: 16}.get(link)      # Ethernet (lo), Linux cooked
        if skip is None:
            sys.exit("b3-split: link type %d not handled" % link)
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, sub, incl, _ = struct.unpack("<IIII", rec)
            data = f.read(incl)
            ip = data[skip:]
            if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
                continue
            tcp = ip[(ip[0] & 15) * 4:]
            sport, dport = struct.unpack(">HH", tcp[:4])
            payload = tcp[(tcp[12] >> 4) * 4:]
            if payload:
                yield sec + sub / frac, sport, dport, payload


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    pcap, sqs, pg, rows_csv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    calls, open_call = [], {}       # SQS calls; the one in progress per client port
    pg_reply = {}                   # order id -> its first packet from PostgreSQL
    for t, sport, dport, payload in packets(pcap):
        if dport == sqs:
            c = open_call.get(sport)
            if c is None or c["answer"] is not None:
                c = open_call[sport] = {"sent": t, "answer": None, "body": b""}
                calls.append(c)
            c["body"] += payload
        elif sport == sqs:
            c = open_call.get(dport)
            if c is not None and c["answer"] is None:
                c["answer"] = t
        elif sport == pg:
            for u in UUID.findall(payload):
                pg_reply.setdefault(u.decode(), t)
    by_row = {}
    for c in calls:
        m = TARGET.search(c["body"])
        if m and m.group(1) == b"SendMessageBatch" and c["answer"] is not None:
            for i in ENTRY_ID.findall(c["body"]):
                by_row.setdefault(int(i), c)
    split = []
    with open(rows_csv) as f:
        for rid, created, commit, sent, order in csv.reader(f):
            c, r = by_row.get(int(rid)), pg_reply.get(order)
            if c is None or r is None:
                continue
            created, commit, sent = float(created), float(commit), float(sent)
            split.append({"row": int(rid), "total": sent - created, "statement": commit - created,
                          "reply": r - commit, "to_sqs": c["sent"] - r,
                          "sqs": c["answer"] - c["sent"], "to_stamp": sent - c["answer"]})
    if not split:
        sys.exit("b3-split: no row found both in the capture and in %s" % rows_csv)
    keys = ["total", "statement", "reply", "to_sqs", "sqs", "to_stamp"]
    out = {"bench": "b3-split", "rows": len(split)}
    for k in keys:
        a = sorted(s[k] * 1e3 for s in split)
        pct = lambda p: round(a[min(len(a) - 1, max(0, -(-len(a) * p // 100) - 1))], 3)
        out[k + "_ms"] = {"p50": pct(50), "p90": pct(90), "p99": pct(99), "max": round(a[-1], 3)}
    out["slowest"] = [{k: (round(v * 1e3, 2) if k != "row" else v) for k, v in s.items()}
                      for s in sorted(split, key=lambda s: -s["total"])[:10]]
    print(json.dumps(out))


main()
