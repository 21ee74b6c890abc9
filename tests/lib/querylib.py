"""querylib.py -- the AWS query protocol (SNS) for the test proxies: the
action of a request, PublishBatch's form entries taken apart and put
back together, and the XML answers SNS gives.  Standard library only.

A query-protocol request is a POST with Content-Type
application/x-www-form-urlencoded whose body names the Action; SNS
answers XML (<ActionResponse>, or <ErrorResponse><Error><Type>, <Code>,
<Message>).
"""
import re
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

SNS_XMLNS = "http://sns.amazonaws.com/doc/2010-03-31/"
ENTRY_RE = re.compile(r"^PublishBatchRequestEntries\.member\.(\d+)\.(.*)$")


def is_query(req):
    return "x-www-form-urlencoded" in (req.header("Content-Type", "") or "").lower()


def form(req):
    """The body's (key, value) pairs, in order, decoded (UTF-8)."""
    return urllib.parse.parse_qsl(req.body.decode("utf-8"), keep_blank_values=True,
                                  strict_parsing=False)


def action(req):
    """X-Amz-Target's action (JSON protocol) or the form's Action.  The
    proxies make it proxylib.Request's action property."""
    t = req.amz_target
    if t:
        return t.split(".", 1)[1] if "." in t else t
    if is_query(req):
        for k, v in form(req):
            if k == "Action":
                return v
    return "-"


def encode(pairs):
    """A form body from (key, value) pairs, percent-encoded per RFC 3986."""
    return "&".join("%s=%s" % (urllib.parse.quote(k, safe="-._~"), urllib.parse.quote(v, safe="-._~"))
                    for k, v in pairs).encode("utf-8")


def batch_entries(pairs):
    """PublishBatch's entries: a list of {"n": member number, "Id",
    "Message", "fields": [(rest of key, value)]}, in member order, and
    the pairs that belong to no entry."""
    entries, other = {}, []
    for k, v in pairs:
        m = ENTRY_RE.match(k)
        if not m:
            other.append((k, v))
            continue
        e = entries.setdefault(int(m.group(1)), {"n": int(m.group(1)), "fields": []})
        e["fields"].append((m.group(2), v))
        if m.group(2) in ("Id", "Message"):
            e[m.group(2)] = v
    return [entries[n] for n in sorted(entries)], other


def batch_form(other, entries):
    """A PublishBatch body with only these entries, numbered from 1."""
    pairs = list(other)
    for i, e in enumerate(entries, 1):
        pairs += [("PublishBatchRequestEntries.member.%d.%s" % (i, k), v) for k, v in e["fields"]]
    return encode(pairs)


def local(tag):
    return tag.rsplit("}", 1)[-1]


def batch_result(xml_bytes):
    """(Successful, Failed) of a PublishBatchResponse: lists of dicts of
    the members' fields.  Raises ValueError if it is not one."""
    root = ET.fromstring(xml_bytes)
    if local(root.tag) != "PublishBatchResponse":
        raise ValueError("not a PublishBatchResponse: %s" % local(root.tag))
    ok, failed = [], []
    for res in root:
        if local(res.tag) != "PublishBatchResult":
            continue
        for lst in res:
            into = ok if local(lst.tag) == "Successful" else failed if local(lst.tag) == "Failed" else None
            if into is None:
                continue
            for m in lst:
                into.append({local(f.tag): (f.text or "") for f in m})
    return ok, failed


def batch_response(ok, failed):
    """A PublishBatchResponse as SNS writes it."""
    def member(d, keys):
        return "<member>%s</member>" % "".join(
            "<%s>%s</%s>" % (k, escape(str(d[k])), k) for k in keys if k in d)
    return ('<PublishBatchResponse xmlns="%s"><PublishBatchResult><Successful>%s</Successful>'
            '<Failed>%s</Failed></PublishBatchResult><ResponseMetadata><RequestId>%s</RequestId>'
            '</ResponseMetadata></PublishBatchResponse>' % (
                SNS_XMLNS, "".join(member(d, ("Id", "MessageId", "SequenceNumber")) for d in ok),
                "".join(member(d, ("Id", "Code", "Message", "SenderFault")) for d in failed),
                uuid.uuid4())).encode("utf-8")


def error_response(code, message, sender=True):
    return ('<ErrorResponse xmlns="%s"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message>'
            '</Error><RequestId>%s</RequestId></ErrorResponse>' % (
                SNS_XMLNS, "Sender" if sender else "Receiver", escape(code), escape(message),
                uuid.uuid4())).encode("utf-8")
