// Start fauxqs 1.9.2 (npm, in-memory SQS/SNS/S3 emulator) for tests.
// Three small patches, all test-harness only:
//  1. bind loopback only: fauxqs hard-codes app.listen({host: "0.0.0.0"});
//     we rewrite that host before the socket is bound (BIND_HOST, default 127.0.0.1).
//  2. queue URLs: fauxqs returns http://sqs.<region>.localhost:PORT/000000000000/NAME
//     (glibc does not resolve *.localhost here) and looks queues up by exact URL
//     string.  We return http://BIND_HOST:PORT/000000000000/NAME instead, and
//     accept any QueueUrl whose path is /<account>/<NAME> (as AWS does for its
//     legacy/new URL forms).  Set FAUXQS_STRICT_URLS=1 to disable patch 2.
//  3. message body characters: AWS SQS allows #x9 | #xA | #xD | #x20-#xD7FF |
//     #xE000-#xFFFD | #x10000-#x10FFFF, but fauxqs 1.9.2 tests its regex on
//     UTF-16 code units without the "u" flag, so any character outside the
//     BMP (an emoji) is rejected with InvalidMessageContents.  We test the
//     same set as AWS, by code point.  Set FAUXQS_STRICT_CHARS=1 to disable.
// Env: FAUXQS_PORT (default 4566), FAUXQS_LOGGER=true for request logs.
import net from "node:net";

const bindHost = process.env.BIND_HOST || "127.0.0.1";
const port = parseInt(process.env.FAUXQS_PORT || "4566", 10);

const origListen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (args[0] && typeof args[0] === "object" && (args[0].host === "0.0.0.0" || args[0].host === "::")) {
    args[0] = { ...args[0], host: bindHost };
  }
  return origListen.apply(this, args);
};

if (!process.env.FAUXQS_STRICT_URLS) {
  // same module instance as the one fauxqs' app.js imports
  const { SqsStore } = await import(new URL("./sqs/sqsStore.js", import.meta.resolve("fauxqs")).href);
  SqsStore.prototype.buildQueueUrl = function (name, _port, _reqHost, _region) {
    return `http://${bindHost}:${port}/000000000000/${name}`;
  };
  const origGetQueue = SqsStore.prototype.getQueue;
  SqsStore.prototype.getQueue = function (url) {
    const q = origGetQueue.call(this, url);
    if (q || typeof url !== "string") return q;
    const m = url.match(/^(?:https?:\/\/[^/]+)?\/[^/]+\/([^/?#]+)\/?$/);
    return m ? this.getQueueByName(m[1]) : undefined;
  };
}

if (!process.env.FAUXQS_STRICT_CHARS) {
  // the RegExp object both SendMessage and SendMessageBatch import
  const types = await import(new URL("./sqs/sqsTypes.js", import.meta.resolve("fauxqs")).href);
  const awsInvalid = /[^\x09\x0A\x0D\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
  types.INVALID_MESSAGE_BODY_CHAR.test = (s) => awsInvalid.test(s);
}

const { startFauxqs } = await import("fauxqs");
const server = await startFauxqs({ port, logger: process.env.FAUXQS_LOGGER === "true" });
console.log(`fauxqs listening on http://${bindHost}:${server.port} (pid ${process.pid})`);
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, async () => { await server.stop(); process.exit(0); });
