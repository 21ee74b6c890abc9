// report.mjs OUTDIR -- the side-by-side table of a bench/run.sh run, with the ratios against
// the targets of issue 7.  Reads OUTDIR/{meta,outboxd,reference-node,graphile-worker,pg-transactional-outbox,
// emulators}.jsonl (missing files are fine), prints Markdown on stdout and writes
// OUTDIR/summary.jsonl (one JSON line per table row).  Each figure is the median of the
// repetitions; [min-max] follows when they differ.
import fs from "node:fs";
import path from "node:path";

const dir = process.argv[2];
if (!dir) { console.error("usage: node report.mjs OUTDIR"); process.exit(2); }
const load = (f) => {
  const p = path.join(dir, f);
  if (!fs.existsSync(p)) return [];
  return fs.readFileSync(p, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
};
const meta = load("meta.jsonl")[0] || {};
const ob = load("outboxd.jsonl"), ref = load("reference-node.jsonl"), gw = load("graphile-worker.jsonl");
const emu = load("emulators.jsonl");
const pto = load("pg-transactional-outbox.jsonl");

const med = (a) => { a = a.filter((x) => typeof x === "number").sort((x, y) => x - y); return a.length ? a[Math.floor((a.length - 1) / 2)] : null; };
const sel = (rs, q) => rs.filter((r) => Object.entries(q).every(([k, v]) => r[k] === v));
// {v: median, min, max, n} of field f over the rows matching q
const stat = (rs, q, f) => {
  const v = sel(rs, q).map((r) => r[f]).filter((x) => typeof x === "number");
  if (!v.length) return null;
  return { v: med(v), min: Math.min(...v), max: Math.max(...v), n: v.length };
};
const num = (x) => (x == null ? "–" : Math.abs(x) >= 100 ? Math.round(x).toLocaleString("en-US") : String(Math.round(x * 10) / 10));
const fmt = (s) => (s == null ? "–" : s.n > 1 && s.min !== s.max ? `${num(s.v)} [${num(s.min)}–${num(s.max)}]` : num(s.v));
const val = (s) => (s == null ? null : s.v);
const ratio = (a, b) => (a == null || b == null || b === 0 ? null : a / b);
const rfmt = (r) => (r == null ? "–" : `${Math.round(r * 100) / 100}×`);
const pct = (r) => (r == null ? "–" : `${Math.round(r * 1000) / 10}%`);

const rows = [];
// row: section, metric, outboxd cell, peer cell, ratio text, target text, met (true/false/null), raw
const row = (section, metric, o, p, r, target, met, raw = {}) => rows.push({ section, metric, outboxd: o, peer: p, ratio: r, target, met, ...raw });

// ---- B1 -------------------------------------------------------------------------------------
const b1 = (rs, lbl, f) => stat(rs, { bench: "b1", label: lbl }, f);
const refB1 = b1(ref, "full-chain", "rps");
const ceilOff = stat(ob, { bench: "ceiling", label: "notify-off" }, "tps");
const ceilTrig = stat(ob, { bench: "ceiling", label: "notify-trigger" }, "tps");
for (const [lbl, what] of [["full-chain", "default configuration (2 HTTP, 2 relays, 1 consumer, all busy)"], ["ingest-only", "HTTP workers only (2), relays and consumers off"]]) {
  const rps = b1(ob, lbl, "rps");
  const r = ratio(val(rps), val(refB1));
  row("B1 ingest", `req/s, c=32 — outboxd ${what} vs reference-node (server + relay + consumer)`, fmt(rps), fmt(refB1), rfmt(r), "≥ 3×", r == null ? null : r >= 3, { key: `b1_${lbl}_rps`, value: val(rps), peer_value: val(refB1), ratio_value: r });
}
{
  const rps = b1(ob, "ingest-only", "rps"), r = ratio(val(rps), val(ceilOff));
  row("B1 ingest", "req/s (HTTP workers only) vs pgbench ceiling (same statement, 32 clients, no NOTIFY)", fmt(rps), `${fmt(ceilOff)} tx/s`, pct(r), "≥ 75%", r == null ? null : r >= 0.75, { key: "b1_vs_ceiling", value: val(rps), peer_value: val(ceilOff), ratio_value: r });
  const rf = b1(ob, "full-chain", "rps"), r2 = ratio(val(rf), val(ceilOff));
  row("B1 ingest", "req/s (default configuration, relays and consumer busy) vs pgbench ceiling", fmt(rf), `${fmt(ceilOff)} tx/s`, pct(r2), "(info)", null, { key: "b1_fullchain_vs_ceiling", value: val(rf), peer_value: val(ceilOff), ratio_value: r2 });
}
for (const lbl of ["ingest-only", "full-chain"]) {
  const p50 = b1(ob, lbl, "p50_ms"), p99 = b1(ob, lbl, "p99_ms");
  const rp99 = b1(ref, "full-chain", "p99_ms");
  row("B1 ingest", `p50 / p99 latency ms (${lbl})`, `${fmt(p50)} / ${fmt(p99)}`, `${fmt(b1(ref, "full-chain", "p50_ms"))} / ${fmt(rp99)}`, "", "p99 ≤ 10 ms", val(p99) == null ? null : val(p99) <= 10, { key: `b1_${lbl}_p99_ms`, value: val(p99), peer_value: val(rp99) });
}
{
  // the full chain publishing to the nginx 204 sink instead of SQS: a broker that costs these
  // cores little, as AWS's would cost them nothing; and how far publishing kept up in both
  const lbl = "full-chain-webhook", rps = b1(ob, lbl, "rps"), p50 = b1(ob, lbl, "p50_ms"), p99 = b1(ob, lbl, "p99_ms");
  if (rps) row("B1 ingest", "req/s; p50 / p99 latency ms (full chain publishing to the nginx 204 sink, `relay.sink = \"http\"`, instead of SQS; the consumer idle)", `${fmt(rps)}; ${fmt(p50)} / ${fmt(p99)}`, "", "", "(info)", null, { key: "b1_full-chain-webhook", value: val(p99), rps: val(rps) });
  const bl = (l) => stat(ob, { bench: "b1-backlog", label: l }, "pending"), rowsOf = (l) => stat(ob, { bench: "b1-backlog", label: l }, "rows");
  const bs = bl("full-chain"), bw = bl(lbl);
  if (bs || bw) row("B1 ingest", "outbox rows still pending ~1 s after the run, of all written: full chain to SQS; to the HTTP sink (consumer idle)", `${fmt(bs)} of ${fmt(rowsOf("full-chain"))}; ${fmt(bw)} of ${fmt(rowsOf(lbl))}`, "", "", "(info)", null, { key: "b1_backlog", value: val(bs), webhook: val(bw) });
}
{
  const b1s = sel(ob, { bench: "b1" }).filter((r) => r.label !== "growth");
  const non2xx = b1s.reduce((s, r) => s + r.non2xx + r.err_connect + r.err_read + r.err_write + r.err_timeout, 0);
  const eq = b1s.length > 0 && b1s.every((r) => r.orders_eq_outbox);
  row("B1 ingest", "non-2xx + socket errors (all B1 runs); orders = outbox rows", `${non2xx}; ${b1s.length ? eq : "–"}`, "", "", "0; true", b1s.length ? non2xx === 0 && eq : null, { key: "b1_errors", value: non2xx, orders_eq_outbox: eq });
}
{
  // Idempotency-Key: ingest only, a unique key per request (bench/b1-keys.sh) vs none, run back
  // to back in each repetition; the cost is the median of the pairs' own.
  const rpsOf = (lbl) => sel(ob, { bench: "b1", label: lbl }).map((r) => r.rps);
  const kR = rpsOf("ingest-only-keyed"), nR = rpsOf("ingest-only-nokeys");
  const costs = kR.slice(0, nR.length).map((x, i) => 1 - x / nR[i]);
  const c = costs.length ? med(costs) : null;
  const spread = costs.length > 1 ? ` [${pct(Math.min(...costs))}–${pct(Math.max(...costs))}]` : "";
  const k = b1(ob, "ingest-only-keyed", "rps"), n = b1(ob, "ingest-only-nokeys", "rps");
  const kp = b1(ob, "ingest-only-keyed", "p99_ms");
  const keysOk = sel(ob, { bench: "b1", label: "ingest-only-keyed" }).every((r) => r.orders_eq_keys);
  if (k) row("B1 ingest", "req/s (HTTP workers only): a unique Idempotency-Key per request vs none, paired by repetition; keyed p99 ms; every keyed order has its key", `${fmt(k)}; p99 ${fmt(kp)}; ${keysOk}`, `none: ${fmt(n)}`, `cost ${pct(c)}${spread}`, "(info)", null, { key: "b1_idempotency_key_cost", value: val(k), peer_value: val(n), ratio_value: c, pair_costs: costs, orders_eq_keys: keysOk });
}
// ---- NOTIFY cost --------------------------------------------------------------------------
{
  const self = b1(ob, "ingest-only", "rps"), off = b1(ob, "ingest-wake-off", "rps"), trig = b1(ob, "ingest-wake-trigger", "rps");
  // Paired by repetition: on and off run back to back in each one, so a drift of the machine
  // over the run (its B1 spreads by ±10%) falls on both; the cost is the median of the pairs'.
  const rpsOf = (lbl) => sel(ob, { bench: "b1", label: lbl }).map((r) => r.rps);
  const onR = rpsOf("ingest-only"), offR = rpsOf("ingest-wake-off");
  const costs = onR.slice(0, offR.length).map((x, i) => 1 - x / offR[i]);
  const c = costs.length ? med(costs) : null;
  const spread = costs.length > 1 ? ` [${pct(Math.min(...costs))}–${pct(Math.max(...costs))}]` : "";
  row("NOTIFY cost", "B1 req/s: wake-up on (debounced NOTIFY per HTTP worker, shipped) vs off (poll only), paired by repetition", fmt(self), `off: ${fmt(off)}`, `cost ${pct(c)}${spread}`, "≤ 10%", c == null ? null : c <= 0.10, { key: "notify_cost", value: val(self), peer_value: val(off), ratio_value: c, pair_costs: costs });
  const c2 = val(trig) == null || val(off) == null ? null : 1 - val(trig) / val(off);
  row("NOTIFY cost", "B1 req/s: naive trigger (NOTIFY in every order transaction) vs off", fmt(trig), `off: ${fmt(off)}`, `cost ${pct(c2)}`, "(info)", null, { key: "notify_cost_trigger", value: val(trig), peer_value: val(off), ratio_value: c2 });
  const c3 = val(ceilTrig) == null || val(ceilOff) == null ? null : 1 - val(ceilTrig) / val(ceilOff);
  row("NOTIFY cost", "pgbench tx/s: statement trigger NOTIFY per transaction vs none", fmt(ceilTrig), `none: ${fmt(ceilOff)}`, `cost ${pct(c3)}`, "(info; issue: ~28%)", null, { key: "ceiling_notify_cost", value: val(ceilTrig), peer_value: val(ceilOff), ratio_value: c3 });
}
// ---- B2 -------------------------------------------------------------------------------------
const gwNoop = stat(gw, { bench: "b2", label: "noop" }, "events_per_s");
const gwPost = stat(gw, { bench: "b2", label: "http-post" }, "events_per_s");
for (const [sink, peer, target, label] of [["sqs", gwNoop, 1, "graphile-worker no-op"], ["http", gwPost, 2, "graphile-worker HTTP POST"]]) {
  for (const n of [1, 4]) {
    const e = stat(ob, { bench: "b2", label: sink, relays: n }, "events_per_s");
    const done = sel(ob, { bench: "b2", label: sink, relays: n }).map((r) => r.complete);
    const r = ratio(val(e), val(peer));
    row("B2 drain", `events/s, 20,000 rows → ${sink === "sqs" ? "SQS (fauxqs)" : "HTTP 204 sink (nginx)"}, ${n} relay${n > 1 ? "s" : ""} vs ${label}`, fmt(e) + (done.length && !done.every(Boolean) ? " (incomplete)" : ""), fmt(peer), rfmt(r), `≥ ${target}×`, r == null ? null : r >= target, { key: `b2_${sink}_${n}`, value: val(e), peer_value: val(peer), ratio_value: r });
  }
}
for (const n of [1, 4]) {
  const e = stat(ob, { bench: "b2", label: "sqs", relays: n }, "events_per_s");
  const rr = sel(ref, { bench: "b2", relays: n });
  const p = stat(rr, {}, "events_per_s");
  row("B2 drain", `events/s → SQS, ${n} relay${n > 1 ? "s" : ""}: outboxd vs reference-node relay (30 s cap)`, fmt(e), fmt(p), rfmt(ratio(val(e), val(p))), "(info)", null, { key: `b2_sqs_${n}_vs_ref`, value: val(e), peer_value: val(p) });
}
{
  const e = stat(ob, { bench: "b2", label: "pubsub", relays: 1 }, "events_per_s");
  const single = stat(ob, { bench: "b2", label: "sqs", relays: 1 }, "events_per_s");
  if (val(e) != null)
    row("B2 drain", "events/s, 20,000 rows → the Pub/Sub stand-in (Python, emulator mode), 1 relay vs SQS (fauxqs)", fmt(e), fmt(single), rfmt(ratio(val(e), val(single))), "(info)", null, { key: "b2_pubsub_1", value: val(e), peer_value: val(single) });
}
// Routing (issue 26): the same 20,000 rows spread over three destinations, against the
// single-destination SQS drain of the same run (2 relays: the default configuration).
// run.sh drains the two back to back in each repetition: the ratio is the median of the
// pairs' ratios (the k-th SQS drain of n relays with the k-th spread one).
for (const n of [1, 2, 4]) {
  const e = stat(ob, { bench: "b2", label: "multi", relays: n }, "events_per_s");
  if (val(e) == null) continue;
  const single = stat(ob, { bench: "b2", label: "sqs", relays: n }, "events_per_s");
  const m = sel(ob, { bench: "b2", label: "multi", relays: n }).map((x) => x.events_per_s);
  const q = sel(ob, { bench: "b2", label: "sqs", relays: n }).map((x) => x.events_per_s);
  const pairs = m.length === q.length ? m.map((x, i) => ratio(x, q[i])).filter((x) => x != null) : [];
  const r = pairs.length ? med(pairs) : ratio(val(e), val(single));
  const rtext = pairs.length > 1 ? `${rfmt(r)} [${rfmt(Math.min(...pairs))}–${rfmt(Math.max(...pairs))}] paired` : rfmt(r);
  row("B2 drain", `events/s, 20,000 rows → SQS + SNS + HTTP 204 sink in turn, ${n} relay${n > 1 ? "s" : ""} vs the SQS-only drain`, fmt(e), fmt(single), rtext, "≥ 0.9×", r == null ? null : r >= 0.9, { key: `b2_multi_${n}`, value: val(e), peer_value: val(single), ratio_value: r });
  // What an even spread could reach on cores the sinks share: a third of the rows at each
  // sink's own rate of the same repetition, 3 / (1/sqs + 1/sns + 1/http).
  const s = sel(ob, { bench: "b2", label: "sns", relays: n }).map((x) => x.events_per_s);
  const h = sel(ob, { bench: "b2", label: "http", relays: n }).map((x) => x.events_per_s);
  if (s.length === m.length && h.length === m.length && q.length === m.length) {
    const bound = m.map((_, i) => 3 / (1 / q[i] + 1 / s[i] + 1 / h[i]));
    const br = med(m.map((x, i) => x / bound[i]));
    row("B2 drain", `events/s, the same spread vs its sinks' own rates combined (3 / (1/SQS + 1/SNS + 1/HTTP) of each repetition), ${n} relay${n > 1 ? "s" : ""}; SNS alone ${fmt(stat(ob, { bench: "b2", label: "sns", relays: n }, "events_per_s"))}`, fmt(e), num(med(bound)), rfmt(br), "(info)", null, { key: `b2_multi_${n}_vs_sinks`, value: val(e), peer_value: med(bound), ratio_value: br });
  }
}
// pg-transactional-outbox (npm), each of its two outbox listeners publishing to the same
// SQS emulator, against outboxd's B2 to SQS with 1 relay of the same run.
for (const l of ["polling", "replication"]) {
  const impl = `pg-transactional-outbox-${l}`;
  const p = stat(pto, { bench: "b2", impl }, "events_per_s");
  if (p == null) continue;
  const done = sel(pto, { bench: "b2", impl }).map((r) => r.complete);
  const e = stat(ob, { bench: "b2", label: "sqs", relays: 1 }, "events_per_s");
  const r = ratio(val(e), val(p));
  row("B2 drain", `events/s, 20,000 rows → SQS (fauxqs), 1 relay vs pg-transactional-outbox ${l} listener`, fmt(e), fmt(p) + (done.every(Boolean) ? "" : " (incomplete)"), rfmt(r), "≥ 5×", r == null ? null : r >= 5, { key: `b2_sqs_1_vs_pto_${l}`, value: val(e), peer_value: val(p), ratio_value: r });
}
// ---- B5 (issue 32) --------------------------------------------------------------------------
// The consumer's drain of 20,000 queued messages against dynalite's raw conditional-PutItem
// ceiling (wrk, 16 connections), taken before and after the drains: the higher of the two,
// so that a ceiling measured while something else loaded the cores flatters nothing.
{
  const ceil = sel(ob, { bench: "ddb-ceiling" }).map((r) => r.per_s).filter((x) => typeof x === "number");
  const c = ceil.length ? Math.max(...ceil) : null;
  for (const [lbl, what, target] of [["workers-1", "default configuration (1 worker, 4 batches at once)", "≥ 70%"],
    ["workers-2", "consumer.workers = 2", "≥ 70%"], ["workers-1-one-batch", "1 worker, consumer.concurrency = 1 (one batch at a time, as before)", "(info)"]]) {
    const e = stat(ob, { bench: "b5", label: lbl }, "items_per_s");
    if (val(e) == null) continue;
    const r = ratio(val(e), c);
    row("B5 consumer", `items/s, 20,000 queued messages → DynamoDB, ${what} vs dynalite's raw conditional-PutItem ceiling`, fmt(e), c == null ? "–" : `${num(c)} PutItem/s (${ceil.map(num).join(", ")})`, pct(r), target, target === "(info)" || r == null ? null : r >= 0.7, { key: `b5_${lbl}`, value: val(e), peer_value: c, ratio_value: r });
  }
}
// ---- B6 (issue 32) --------------------------------------------------------------------------
{
  const none = stat(ob, { bench: "b6", label: "none" }, "events_per_s");
  const noneClaim = stat(ob, { bench: "b6", label: "none" }, "claim_us_per_row");
  for (const [lbl, how] of [["hot", "written in one statement"], ["hot-stream", "written a transaction each"]]) {
    const hot = stat(ob, { bench: "b6", label: lbl }, "events_per_s");
    if (val(hot) == null) continue;
    const r = ratio(val(hot), val(none));
    const held = sel(ob, { bench: "b6", label: lbl }).map((x) => x.held);
    row("B6 hot key", `events/s, 20,000 rows on fresh keys, 1 relay, behind 100,000 rows of one key (${how}) whose head is dead-lettered (held: ${held.map(num).join(", ")}) vs without them`, fmt(hot), fmt(none), pct(r), "≥ 90%", r == null ? null : r >= 0.9, { key: `b6_${lbl}`, value: val(hot), peer_value: val(none), ratio_value: r });
    const claim = stat(ob, { bench: "b6", label: lbl }, "claim_us_per_row");
    if (val(claim) == null) continue;
    const c = ratio(val(claim), val(noneClaim));
    row("B6 hot key", `outbox_claim() µs per claimed row (pg_stat_user_functions), hot key ${how} vs without it`, fmt(claim), fmt(noneClaim), c == null ? "–" : `${num(c)}×`, "≤ 1.5×", c == null ? null : c <= 1.5, { key: `b6_${lbl}_claim_us`, value: val(claim), peer_value: val(noneClaim), ratio_value: c });
  }
}
// ---- B3 -------------------------------------------------------------------------------------
{
  const q = { bench: "b3-ack", label: "rate50" };
  const a = ["ack_p50_ms", "ack_p95_ms", "ack_p99_ms", "ack_max_ms"].map((f) => stat(ob, q, f));
  row("B3 latency", "commit → broker ack ms, p50 / p95 / p99 / max (outbox created_at → sent_at), 50 orders/s", a.map(fmt).join(" / "), "", "", "p99 ≤ 5 ms", val(a[2]) == null ? null : val(a[2]) <= 5, { key: "b3_ack_p99_ms", value: val(a[2]) });
  const k = ["commit_ack_p50_ms", "commit_ack_p95_ms", "commit_ack_p99_ms", "commit_ack_max_ms"].map((f) => stat(ob, q, f));
  row("B3 latency", "commit → broker ack ms from the commit itself (PostgreSQL's commit timestamp of the order's transaction → sent_at), p50 / p95 / p99 / max", k.map(fmt).join(" / "), "", "", "(info)", null, { key: "b3_commit_ack_p99_ms", value: val(k[2]) });
  const fs_ = ["ts_p50_ms", "ts_p95_ms", "ts_p99_ms", "ts_max_ms"];
  const t = fs_.map((f) => stat(ob, { bench: "b3", label: "rate50" }, f));
  const rt = fs_.map((f) => stat(ref, { bench: "b3", label: "rate50" }, f));
  row("B3 latency", "201 → fulfillment item ms, p50 / p95 / p99 / max (item createdAt), vs reference-node", t.map(fmt).join(" / "), rt.map(fmt).join(" / "), "", "p99 ≤ 50 ms", val(t[2]) == null ? null : val(t[2]) <= 50, { key: "b3_fulfil_p99_ms", value: val(t[2]), peer_value: val(rt[2]) });
  const pl = ["poll_p50_ms", "poll_p99_ms"].map((f) => stat(ob, { bench: "b3", label: "rate50" }, f));
  row("B3 latency", "201 → item seen by the 20 ms poller ms, p50 / p99 (coarser upper bound)", pl.map(fmt).join(" / "), ["poll_p50_ms", "poll_p99_ms"].map((f) => fmt(stat(ref, { bench: "b3", label: "rate50" }, f))).join(" / "), "", "(info)", null, { key: "b3_poll_p99_ms", value: val(pl[1]) });
  const m = sel(ob, { bench: "b3", label: "rate50" }).reduce((s, r) => s + r.missing_after_grace + r.non201, 0);
  const mr = sel(ref, { bench: "b3", label: "rate50" }).map((r) => r.missing_after_grace);
  const runs = sel(ob, { bench: "b3", label: "rate50" }).length;
  row("B3 latency", "orders missing after the grace period + non-201 (all runs); reference: missing per run", runs ? String(m) : "–", mr.length ? mr.join(", ") : "–", "", "0", runs ? m === 0 : null, { key: "b3_missing", value: m });
  const off = ["ack_p50_ms", "ack_p99_ms"].map((f) => stat(ob, { bench: "b3-ack", label: "rate50-wake-off" }, f));
  const offt = ["ts_p50_ms", "ts_p99_ms"].map((f) => stat(ob, { bench: "b3", label: "rate50-wake-off" }, f));
  row("B3 latency", "wake-up off (poll only): commit → ack p50 / p99; 201 → fulfillment p50 / p99", `${off.map(fmt).join(" / ")}; ${offt.map(fmt).join(" / ")}`, "", "", "(info)", null, { key: "b3_wake_off_ack_p99_ms", value: val(off[1]) });
  const ho = ["ack_p50_ms", "ack_p99_ms"].map((f) => stat(ob, { bench: "b3-ack", label: "rate50-handoff-off" }, f));
  const hot = ["ts_p50_ms", "ts_p99_ms"].map((f) => stat(ob, { bench: "b3", label: "rate50-handoff-off" }, f));
  row("B3 latency", "handoff off (NOTIFY and a claim per order): commit → ack p50 / p99; 201 → fulfillment p50 / p99", `${ho.map(fmt).join(" / ")}; ${hot.map(fmt).join(" / ")}`, "", "", "(info)", null, { key: "b3_handoff_off_ack_p99_ms", value: val(ho[1]) });
  const gl = ["p50_ms", "p99_ms"].map((f) => stat(gw, { bench: "gw-lat", label: "rate50" }, f));
  row("B3 latency", "graphile-worker add_job → task start ms, p50 / p99, 50 jobs/s (its nearest figure)", "", gl.map(fmt).join(" / "), "", "(info)", null, { key: "gw_lat_p99_ms", peer_value: val(gl[1]) });
}
// ---- B4 -------------------------------------------------------------------------------------
const mem = (rs, phase) => {
  const ps = sel(rs, { bench: "b4", phase });
  const byProc = new Map();
  for (const r of ps) { if (!byProc.has(r.proc)) byProc.set(r.proc, []); byProc.get(r.proc).push(r.rss_kb); }
  const procs = [...byProc.entries()].map(([p, v]) => [p, med(v) / 1024]);
  return { procs, total: procs.reduce((s, [, v]) => s + v, 0), workerMax: Math.max(0, ...procs.filter(([p]) => p !== "master").map(([, v]) => v)) };
};
{
  const i = mem(ob, "idle"), a = mem(ob, "after-b1"), ri = mem(ref, "idle"), gi = mem(gw, "idle");
  // "–", not 0, for a peer that was not measured (--outboxd-only)
  const mib = (m) => (m.procs.length ? num(m.total) : "–");
  const peerTxt = `reference ${mib(ri)}${ri.procs.length ? ` (${ri.procs.length} procs)` : ""}; graphile-worker ${mib(gi)}`;
  row("B4 memory", `RSS MiB idle, default configuration: total (${i.procs.map(([p, v]) => `${p} ${num(v)}`).join(", ")})`, i.procs.length ? num(i.total) : "–", peerTxt, "", "≤ 40 MiB", i.procs.length ? i.total <= 40 : null, { key: "b4_idle_total_mib", value: i.total, peer_value: ri.total });
  row("B4 memory", "RSS MiB idle: largest worker", i.procs.length ? num(i.workerMax) : "–", "", "", "≤ 8 MiB", i.procs.length ? i.workerMax <= 8 : null, { key: "b4_idle_worker_max_mib", value: i.workerMax });
  row("B4 memory", `RSS MiB after B1: total (${a.procs.map(([p, v]) => `${p} ${num(v)}`).join(", ")})`, a.procs.length ? num(a.total) : "–", `reference ${mib(mem(ref, "after-b1"))}; graphile-worker after drain ${mib(mem(gw, "after-drain"))}`, "", "(info)", null, { key: "b4_after_b1_total_mib", value: a.total });
  const phases = [...new Set(sel(ob, { bench: "b4" }).map((r) => r.phase).filter((p) => p.startsWith("growth-")))].sort((x, y) => +x.split("-")[1] - +y.split("-")[1]);
  if (phases.length >= 3) {
    const first = mem(ob, phases[1]), last = mem(ob, phases[phases.length - 1]);
    const growth = last.procs.map(([p, v]) => [p, v - (first.procs.find(([q]) => q === p)?.[1] ?? v)]);
    const worst = growth.reduce((m, g) => (g[1] > m[1] ? g : m), ["", -Infinity]);
    const series = phases.map((ph) => num(mem(ob, ph).total)).join(" → ");
    row("B4 memory", `RSS growth MiB over ${phases.length - 1} back-to-back B1 runs, after the 1st → after the last (total ${series})`, `${num(last.total - first.total)} total; worst ${worst[0]} ${num(worst[1])}`, "", "", "no growth (≤ 0.5 MiB/process)", worst[1] <= 0.5, { key: "b4_growth_mib", value: last.total - first.total, worst_proc: worst[0], worst_mib: worst[1] });
  }
}
// ---- emulators --------------------------------------------------------------------------------
{
  const sb = stat(emu, { bench: "emu", client: "wrk", test: "sqs-batch" }, "per_s");
  const dp = stat(emu, { bench: "emu", client: "wrk", test: "ddb-put" }, "per_s");
  if (sb || dp) row("emulators", "raw ceilings, lean C client (wrk, 16 conns): fauxqs SendMessageBatch msgs/s; dynalite PutItem/s", "", `${fmt(sb)}; ${fmt(dp)}`, "", "(info)", null, { key: "emu", sqs_batch_per_s: val(sb), ddb_put_per_s: val(dp) });
}

// ---- print ------------------------------------------------------------------------------------
const ok = (m) => (m == null ? "" : m ? "yes" : "**no**");
const out = [];
out.push(`# outboxd bench — ${meta.date || "?"}`);
out.push("");
out.push(`commit \`${meta.commit || "?"}\`${meta.modified_files ? ` + ${meta.modified_files} modified tracked file(s) in the work tree` : ""}; ` +
  `${meta.cpus || "?"} CPUs; kernel.sched_autogroup_enabled ${meta.sched_autogroup ?? "?"}; load average at start ${meta.loadavg_start || "?"}, at end ${meta.loadavg_end || "?"}; ` +
  `PostgreSQL ${meta.postgresql || "?"}; ${meta.reps || "?"} repetition(s)${meta.quick ? " (QUICK: not for reporting)" : ""}; ` +
  `figures are medians [min–max].`);
let sec = "";
out.push("");
out.push("| workload | measure | outboxd | peer / ceiling | ratio | target | met |");
out.push("|---|---|---|---|---|---|---|");
for (const r of rows) {
  out.push(`| ${r.section === sec ? "" : r.section} | ${r.metric} | ${r.outboxd} | ${r.peer} | ${r.ratio} | ${r.target} | ${ok(r.met)} |`);
  sec = r.section;
}
console.log(out.join("\n"));
fs.writeFileSync(path.join(dir, "summary.jsonl"), rows.map((r) => JSON.stringify({ bench: "summary", date: meta.date, commit: meta.commit, ...r })).join("\n") + "\n");
