#!/usr/bin/python3
"""sqs-drain.py -- read a queue of the SQS emulator to the end: receive,
record, delete, until N messages were read or the queue stayed empty for
--idle seconds.  Prints one line per message, in the order received:

    MessageGroupId <TAB> SequenceNumber <TAB> MessageDeduplicationId <TAB> Body

(empty fields on a standard queue).  Exit status 0 when N messages were
read (or, without --count, when the queue went idle), 1 otherwise.

    /usr/bin/python3 tests/lib/sqs-drain.py --endpoint http://127.0.0.1:P \
        --queue-url URL [--count N] [--idle 3]

On a FIFO queue a message group gives its next message only after the one
before was deleted, so a reader that does not delete sees each group
stall; this one deletes every batch before the next receive.  Like
tests/lib/aws.sh it sends a dummy Authorization header: the emulator does
not check signatures.
"""
import argparse
import http.client
import json
import sys
import time
import urllib.parse

AUTH = ("AWS4-HMAC-SHA256 Credential=AKIDOUTBOXDTEST/20250101/us-east-1/sqs/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + "0" * 64)


def call(conn, action, body):
    conn.request("POST", "/", body=json.dumps(body), headers={
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "AmazonSQS." + action,
        "X-Amz-Date": "20250101T000000Z",
        "Authorization": AUTH})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError("%s -> HTTP %d: %s" % (action, r.status, data[:300]))
    return json.loads(data or b"{}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--queue-url", required=True)
    ap.add_argument("--count", type=int, default=None)
    ap.add_argument("--idle", type=float, default=3.0)
    a = ap.parse_args()
    u = urllib.parse.urlsplit(a.endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
    got, last = 0, time.time()
    while a.count is None or got < a.count:
        r = call(conn, "ReceiveMessage", {"QueueUrl": a.queue_url, "MaxNumberOfMessages": 10,
                                          "WaitTimeSeconds": 1, "AttributeNames": ["All"]})
        msgs = r.get("Messages") or []
        if not msgs:
            if time.time() - last >= a.idle:
                break
            continue
        last = time.time()
        for m in msgs:
            at = m.get("Attributes") or {}
            sys.stdout.write("%s\t%s\t%s\t%s\n" % (at.get("MessageGroupId", ""), at.get("SequenceNumber", ""),
                                                   at.get("MessageDeduplicationId", ""),
                                                   m.get("Body", "").replace("\t", " ").replace("\n", " ")))
        sys.stdout.flush()
        got += len(msgs)
        d = call(conn, "DeleteMessageBatch", {"QueueUrl": a.queue_url, "Entries": [
            {"Id": "m%d" % i, "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)]})
        if d.get("Failed"):
            sys.stderr.write("sqs-drain: DeleteMessageBatch failed: %s\n" % json.dumps(d["Failed"]))
            return 1
    if a.count is not None and got < a.count:
        sys.stderr.write("sqs-drain: read %d of %d messages\n" % (got, a.count))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
