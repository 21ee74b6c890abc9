#!/usr/bin/python3
"""sns-setup.py -- SNS topics and their SQS subscriptions on the emulator
(fauxqs) for tests, and a reader of what the subscribed queues got.

    /usr/bin/python3 tests/lib/sns-setup.py --endpoint http://127.0.0.1:P CMD ...

  topic NAME                      CreateTopic (a NAME ending in .fifo is a
                                  FIFO topic); prints the TopicArn
  queue NAME                      CreateQueue (.fifo: a FIFO queue); prints
                                  the QueueUrl
  subscribe TOPIC_ARN QUEUE_URL [--raw] [--filter-policy JSON]
                                  Subscribe the queue (protocol sqs) with
                                  RawMessageDelivery and FilterPolicy as
                                  given; prints the SubscriptionArn
  drain QUEUE_URL [--count N] [--idle S]
                                  receive and delete until N messages were
                                  read or the queue stayed empty for S
                                  seconds (default 3); prints one JSON
                                  object a line: {"Body", "MessageAttributes":
                                  {name: StringValue}, "Attributes"}, in the
                                  order received; exit 1 if fewer than N

SNS is called through botocore (python3-botocore), which speaks SNS's
query protocol as real clients do.  SQS through its JSON protocol by hand:
Debian 12's botocore speaks the query protocol to SQS, which the emulator
does not.  The emulator checks no signature; dummy credentials are used.
"""
import argparse
import http.client
import json
import sys
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

try:
    import botocore.session
    from botocore.config import Config
except ImportError as e:  # loud: a test must not pass without it
    sys.exit("sns-setup: cannot import botocore (%s): apt-get install python3-botocore "
             "and run with /usr/bin/python3" % e)

REGION = "us-east-1"
AUTH = ("AWS4-HMAC-SHA256 Credential=AKIDOUTBOXDTEST/20250101/us-east-1/sqs/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + "0" * 64)


def sns_client(endpoint):
    s = botocore.session.get_session()
    return s.create_client("sns", region_name=REGION, endpoint_url=endpoint,
                           aws_access_key_id="AKIDOUTBOXDTEST", aws_secret_access_key="test",
                           config=Config(retries={"max_attempts": 1}))


class Sqs:
    def __init__(self, endpoint):
        u = urllib.parse.urlsplit(endpoint)
        self.conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)

    def call(self, action, body):
        self.conn.request("POST", "/", body=json.dumps(body), headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "AmazonSQS." + action,
            "X-Amz-Date": "20250101T000000Z",
            "Authorization": AUTH})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError("SQS %s -> HTTP %d: %s" % (action, r.status, data[:300]))
        return json.loads(data or b"{}")


def cmd_topic(a):
    attrs = {"FifoTopic": "true"} if a.name.endswith(".fifo") else {}
    r = sns_client(a.endpoint).create_topic(Name=a.name, Attributes=attrs)
    print(r["TopicArn"])


def cmd_queue(a):
    attrs = {"VisibilityTimeout": "30"}
    if a.name.endswith(".fifo"):
        attrs["FifoQueue"] = "true"
    r = Sqs(a.endpoint).call("CreateQueue", {"QueueName": a.name, "Attributes": attrs})
    print(r["QueueUrl"])


def cmd_subscribe(a):
    arn = Sqs(a.endpoint).call("GetQueueAttributes", {
        "QueueUrl": a.queue_url, "AttributeNames": ["QueueArn"]})["Attributes"]["QueueArn"]
    attrs = {"RawMessageDelivery": "true" if a.raw else "false"}
    if a.filter_policy:
        json.loads(a.filter_policy)  # a typo must fail here, not filter nothing
        attrs["FilterPolicy"] = a.filter_policy
    r = sns_client(a.endpoint).subscribe(TopicArn=a.topic_arn, Protocol="sqs", Endpoint=arn,
                                         Attributes=attrs, ReturnSubscriptionArn=True)
    print(r["SubscriptionArn"])


def cmd_drain(a):
    sqs = Sqs(a.endpoint)
    got, last = 0, time.time()
    while a.count is None or got < a.count:
        r = sqs.call("ReceiveMessage", {"QueueUrl": a.queue_url, "MaxNumberOfMessages": 10,
                                        "WaitTimeSeconds": 1, "AttributeNames": ["All"],
                                        "MessageAttributeNames": ["All"]})
        msgs = r.get("Messages") or []
        if not msgs:
            if time.time() - last >= a.idle:
                break
            continue
        last = time.time()
        for m in msgs:
            attrs = {k: v.get("StringValue") for k, v in (m.get("MessageAttributes") or {}).items()}
            sys.stdout.write(json.dumps({"Body": m.get("Body"), "MessageAttributes": attrs,
                                         "Attributes": m.get("Attributes") or {}},
                                        ensure_ascii=False) + "\n")
        sys.stdout.flush()
        got += len(msgs)
        d = sqs.call("DeleteMessageBatch", {"QueueUrl": a.queue_url, "Entries": [
            {"Id": "m%d" % i, "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)]})
        if d.get("Failed"):
            sys.stderr.write("sns-setup: DeleteMessageBatch failed: %s\n" % json.dumps(d["Failed"]))
            return 1
    if a.count is not None and got < a.count:
        sys.stderr.write("sns-setup: read %d of %d messages\n" % (got, a.count))
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("topic")
    p.add_argument("name")
    p.set_defaults(fn=cmd_topic)
    p = sub.add_parser("queue")
    p.add_argument("name")
    p.set_defaults(fn=cmd_queue)
    p = sub.add_parser("subscribe")
    p.add_argument("topic_arn")
    p.add_argument("queue_url")
    p.add_argument("--raw", action="store_true")
    p.add_argument("--filter-policy", default=None)
    p.set_defaults(fn=cmd_subscribe)
    p = sub.add_parser("drain")
    p.add_argument("queue_url")
    p.add_argument("--count", type=int, default=None)
    p.add_argument("--idle", type=float, default=3.0)
    p.set_defaults(fn=cmd_drain)
    a = ap.parse_args()
    return a.fn(a) or 0


if __name__ == "__main__":
    sys.exit(main())
