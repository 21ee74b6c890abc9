#!/usr/bin/env python3
"""b3-split.py -- where B3's commit -> ack time goes, hop by hop.

    b3-split.py PCAP SQS_PORT PG_PORT ROWS_CSV

PCAP is a loopback capture (tcpdump -i lo -w, classic pcap) of one B3 run; ROWS_CSV has one
line per outbox row: id, created_at, the order's commit timestamp, sent_at (epoch seconds) and
the order id.  All the clocks are this machine's, so the capture's timestamps and PostgreSQL's
line up.

Per row, from the capture:
  statement   created_at (the statement's now()) -> its commit timestamp    PostgreSQL
  reply       commit -> the first packet carrying the order id back to the
              HTTP worker (a connection that sent outboxd_order_insert*)    PostgreSQL
  to_sqs      that packet -> the SendMessageBatch carrying the row on the   outboxd: the HTTP
              wire (the last one answered before sent_at)                   worker, then relay 1
                                                                            (a handed-off row)
                                                                            or any relay
  sqs         that request -> the first byte of SQS's answer                the emulator
  to_stamp    the answer -> sent_at                                         outboxd (the relay)
Prints one JSON line: p50/p90/p99/max (ms) of each and of the total (created_at -> sent_at),
how many rows of ROWS_CSV the capture did not show (warned on stderr too), and the ten
slowest rows with their split.
"""
import csv
import json
import re
import struct
import sys

UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TARGET = re.compile(rb"x-amz-target: *AmazonSQS\.(\w+)", re.I)
ENTRY_ID = re.compile(rb'"Id":"(\d+)"')
# The HTTP workers' order statements (src/http.c), named in their Bind messages.
ORDER_STMT = b"outboxd_order_insert"
LINK_HEADER = {1: 14, 113: 16, 276: 20}     # Ethernet (lo), Linux cooked v1, v2


def die(msg):
    sys.exit("b3-split: " + msg)


def packets(path):
    """(time s, src port, dst port, TCP payload) of each IPv4 TCP packet with a payload."""
    try:
        f = open(path, "rb")
    except OSError as e:
        die("%s: %s" % (path, e.strerror))
    with f:
        head = f.read(24)
        if 0 < len(head) < 24:
            die("%s: truncated pcap header" % path)
        magic = struct.unpack("<I", head[:4])[0] if len(head) == 24 else 0
        if magic == 0x0A0D0D0A:
            die("%s is pcapng: capture with tcpdump -w, or convert with "
                "tcpdump -r IN -w OUT" % path)
        if magic not in (0xA1B2C3D4, 0xA1B23C4D):
            die("%s is not a little-endian pcap file" % path)
        frac = 1e9 if magic == 0xA1B23C4D else 1e6
        link = struct.unpack("<I", head[20:24])[0]
        skip = LINK_HEADER.get(link)
        if skip is None:
            die("link type %d not handled (capture with -i lo)" % link)
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, sub, incl, _ = struct.unpack("<IIII", rec)
            data = f.read(incl)
            if len(data) < incl:
                return                          # a truncated last record
            ip = data[skip:]
            if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
                continue
            ip = ip[:struct.unpack(">H", ip[2:4])[0]]   # no link-layer padding
            tcp = ip[(ip[0] & 15) * 4:]
            if len(tcp) < 20:
                continue
            sport, dport = struct.unpack(">HH", tcp[:4])
            payload = tcp[(tcp[12] >> 4) * 4:]
            if payload:
                yield sec + sub / frac, sport, dport, payload


def read_rows(path):
    """(row id, created_at, commit, sent_at, order id) of each line of ROWS_CSV."""
    rows = []
    try:
        with open(path, newline="") as f:
            for n, line in enumerate(csv.reader(f), 1):
                if not line:
                    continue
                try:
                    rid, created, commit, sent, order = line
                    rows.append((int(rid), float(created), float(commit), float(sent), order))
                except ValueError:
                    die("%s:%d: expected id,created_at,commit,sent_at,order_id" % (path, n))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        die("%s: %s" % (path, getattr(e, "strerror", None) or "not a text CSV file"))
    return rows


def main():
    if len(sys.argv) != 5:
        die("usage: b3-split.py PCAP SQS_PORT PG_PORT ROWS_CSV (see the comment at its top)")
    pcap, rows_csv = sys.argv[1], sys.argv[4]
    try:
        sqs, pg = int(sys.argv[2]), int(sys.argv[3])
    except ValueError:
        sqs = pg = 0
    if not (0 < sqs < 65536 and 0 < pg < 65536):
        die("SQS_PORT and PG_PORT are port numbers (1-65535)")
    rows = read_rows(rows_csv)
    seen = set()                    # the ports that showed up at all
    calls, open_call = [], {}       # SQS calls; the one in progress per client port
    http_ports = set()              # client ports of the HTTP workers' connections
    pg_reply = {}                   # order id -> its first packet back to an HTTP worker
    for t, sport, dport, payload in packets(pcap):
        seen.update((sport, dport))
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
        elif dport == pg:
            if ORDER_STMT in payload:
                http_ports.add(sport)
        elif sport == pg and dport in http_ports:
            for u in UUID.findall(payload):
                pg_reply.setdefault(u.decode(), t)
    by_row = {}                     # row id -> its answered SendMessageBatch calls
    for c in calls:
        m = TARGET.search(c["body"])
        if m and m.group(1) == b"SendMessageBatch" and c["answer"] is not None:
            for i in ENTRY_ID.findall(c["body"]):
                by_row.setdefault(int(i), []).append(c)
    for name, port in (("SQS_PORT", sqs), ("PG_PORT", pg)):
        if port not in seen:
            die("no packet on %s %d in %s: a wrong port?" % (name, port, pcap))
    split, n_csv, no_call, no_reply = [], len(rows), 0, 0
    for rid, created, commit, sent, order in rows:
        # a retried row: the call whose answer the relay stamped
        c = [c for c in by_row.get(rid, []) if c["answer"] <= sent]
        r = pg_reply.get(order)
        if not c:
            no_call += 1
        if r is None:
            no_reply += 1
        if not c or r is None:
            continue
        c = c[-1]
        split.append({"row": rid, "total": sent - created, "statement": commit - created,
                      "reply": r - commit, "to_sqs": c["sent"] - r,
                      "sqs": c["answer"] - c["sent"], "to_stamp": sent - c["answer"]})
    if no_call or no_reply:
        print("b3-split: of %d rows, %d without a SendMessageBatch in the capture and %d without "
              "PostgreSQL's reply to an HTTP worker (a capture that dropped packets, or rows "
              "not written by POST /orders)" % (n_csv, no_call, no_reply), file=sys.stderr)
    if not split:
        die("no row found both in the capture and in %s" % rows_csv)
    out = {"bench": "b3-split", "rows": len(split), "rows_csv": n_csv,
           "rows_without_call": no_call, "rows_without_reply": no_reply}
    for k in ["total", "statement", "reply", "to_sqs", "sqs", "to_stamp"]:
        a = sorted(s[k] * 1e3 for s in split)
        # nearest rank, as b3-ack.sh's percentile_disc and b3-driver.mjs
        pct = lambda p: round(a[min(len(a) - 1, max(0, -(-len(a) * p // 100) - 1))], 3)
        out[k + "_ms"] = {"p50": pct(50), "p90": pct(90), "p99": pct(99), "max": round(a[-1], 3)}
    out["slowest"] = [{k: (round(v * 1e3, 2) if k != "row" else v) for k, v in s.items()}
                      for s in sorted(split, key=lambda s: -s["total"])[:10]]
    print(json.dumps(out))


main()
