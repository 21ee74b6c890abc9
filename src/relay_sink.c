/*
 * relay_sink.c - the way from claimed rows to the sink and back: rows
 * into chunks the sink's size and batch limits allow, chunks to the
 * sink's free slots, the sink's answers to outcomes and metrics.
 *
 * Claimed rows wait in the relay for a free slot at the sink
 * (relay_sink_pump()); relay.c claims again while enough of them are
 * still waiting to keep the sink busy until the claim's answer comes.
 * The relay knows the sink only by its struct sink.
 *
 * Each destination has its own chunks, slots and cap on rows in hand:
 * one that is slow fills its own slots and reaches its cap, and then
 * the claims leave its rows (relay_sink_skip()) while the other
 * destinations' rows go on flowing.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "relay.h"
#include "metrics_api.h"

/* Rows a destination may have in hand per publish call it may have in
 * flight: enough to keep its calls busy while the next claim comes. */
#define RELAY_DEST_CAP_PER_SLOT	2

static void	relay_sink_answered(struct outbox_msg *, int, void *);

/*
 * Append the replay marker (SINK_REPLAY_HEADER: the replay's id) to a
 * replayed row's headers, after they passed the rules: the name is
 * reserved, so no row's own header can be it, and SINK_HEADERS_MAX
 * leaves the attribute it takes at SQS and SNS.  The consumer sees the
 * original id (the SQS MessageDeduplicationId, the webhook-id) and body,
 * and can tell the delivery is a replay.
 */
static void
relay_sink_mark_replay(struct outbox_header **hdr, int *n, int64_t replay)
{
	struct outbox_header	*h;

	if ((h = reallocarray(*hdr, (size_t)*n + 1, sizeof(*h))) == NULL)
		fatal("reallocarray");
	*hdr = h;
	h[*n].name = strdup(SINK_REPLAY_HEADER);
	if (h[*n].name == NULL ||
	    asprintf(&h[*n].value, "%lld", (long long)replay) == -1)
		fatal("strdup");
	(*n)++;
}

const struct sink *
relay_sink_limits(const struct conf_destination *cd, int *max_batch,
    int *slots)
{
	const struct sink	*sink = sink_of(cd->sink);

	if (sink->max_batch < 1 || sink->max_batch > SINK_MAX_BATCH)
		fatalx("sink %s: max_batch %d", sink->name, sink->max_batch);
	*max_batch = cd->batch_size > 0 && cd->batch_size < sink->max_batch ?
	    cd->batch_size : sink->max_batch;
	*slots = cd->concurrency > 0 && cd->concurrency < sink->slots ?
	    cd->concurrency : sink->slots;
	return sink;
}

void
relay_sink_open(struct relay *r)
{
	const struct conf	*c = r->conf;
	struct relay_dest	*d;
	int			 i;

	r->n_dests = c->n_destinations;
	if ((r->dests = calloc((size_t)r->n_dests + 1, sizeof(*r->dests))) ==
	    NULL)
		fatal("calloc");
	for (i = 0; i < r->n_dests; i++) {
		d = &r->dests[i];
		d->t.conf = c;
		d->t.dest = &c->destinations[i];
		d->sink = relay_sink_limits(d->t.dest, &d->max_batch,
		    &d->slots);
		d->cap = d->slots * d->max_batch * RELAY_DEST_CAP_PER_SLOT;
		if (d->cap < c->relay.batch_size)
			d->cap = c->relay.batch_size;
	}
	/* Rows naming a destination outbox.conf lacks: failed at once. */
	r->dests[r->n_dests].t.conf = c;
	r->dests[r->n_dests].max_batch = SINK_MAX_BATCH;
	r->dests[r->n_dests].cap = RELAY_MAX_INFLIGHT;
}

/* The relay_dest of a claimed row's destination column. */
static struct relay_dest *
relay_sink_dest(struct relay *r, const char *name)
{
	const struct conf_destination	*d;

	d = conf_destination_find(r->conf, name);
	return &r->dests[d != NULL ? d - r->conf->destinations : r->n_dests];
}

void
relay_sink_skip(const struct relay *r, char *buf, size_t len)
{
	size_t	off = 0;
	int	i, n = 0;

	buf[0] = '\0';
	if (len < 3)
		return;
	buf[off++] = '{';
	for (i = 0; i < r->n_dests; i++) {
		const char	*p;
		size_t		 need;

		r->dests[i].skipped = r->dests[i].inflight >= r->dests[i].cap;
		if (!r->dests[i].skipped)
			continue;
		/* Quoted, with '"' and '\\' escaped: an array literal. */
		need = 2 + (n > 0);
		for (p = r->dests[i].t.dest->name; *p != '\0'; p++)
			need += (*p == '"' || *p == '\\') ? 2 : 1;
		if (off + need + 2 > len)
			break;
		if (n++ > 0)
			buf[off++] = ',';
		buf[off++] = '"';
		for (p = r->dests[i].t.dest->name; *p != '\0'; p++) {
			if (*p == '"' || *p == '\\')
				buf[off++] = '\\';
			buf[off++] = *p;
		}
		buf[off++] = '"';
	}
	buf[off++] = '}';
	buf[off] = '\0';
}

static void
relay_sink_chunk_free(struct relay_chunk *ch)
{
	int	i;

	for (i = 0; i < ch->n; i++) {
		free(ch->msgs[i].event_type);
		free(ch->msgs[i].key);
		free(ch->msgs[i].payload);
		free(ch->msgs[i].error);
		sink_headers_free(ch->msgs[i].headers, ch->msgs[i].nheaders);
	}
	free(ch);
}

static void	relay_sink_queue(struct relay *, struct relay_chunk *);


/*
 * Add a claimed row to the chunk being filled for its destination (a new
 * one when there is none or the row does not fit: the full one goes to
 * the sink).  The strings are copied.  claim and claimed_us: the row's
 * claim token and when its claim was sent (monotonic us); answered_us
 * when it came back.
 */
void
relay_sink_add(struct relay *r, const struct claimed_row *row, int attempts,
    int64_t answered_us)
{
	struct relay_dest	*d = relay_sink_dest(r, row->destination);
	struct relay_chunk	*ch = d->filling;
	struct outbox_msg	*m;
	size_t			 size, budget = r->conf->relay.max_message_size;
	int64_t			 lease_end = row->claimed_us +
				    row->lease_ms * 1000;
	struct outbox_header	*hdr = NULL;
	char			 why[512];
	int			 nhdr = 0, bad_headers, marked, i;

	bad_headers = sink_headers_parse(row->headers, row->headers_len, &hdr,
	    &nhdr) == -1;
	/* The marker after the row's own headers, once they are known to
	 * keep the rules (checked again below, to refuse the row if not). */
	marked = !bad_headers && row->replay > 0 &&
	    sink_headers_check(hdr, nhdr, why, sizeof(why)) == 0;
	if (marked)
		relay_sink_mark_replay(&hdr, &nhdr, row->replay);
	size = row->payload_len + row->type_len +
	    (d->sink != NULL ? d->sink->msg_overhead : 0);
	for (i = 0; i < nhdr; i++)
		size += sink_header_size(&hdr[i]);
	/* A batch may carry as much as one message may (SQS). */
	if (ch != NULL && (ch->n == d->max_batch ||
	    ch->bytes + size > budget || ch->claim != row->claim ||
	    ch->lease_end_us != lease_end)) {
		relay_sink_queue(r, ch);
		ch = NULL;
	}
	if (ch == NULL) {
		if ((ch = calloc(1, sizeof(*ch))) == NULL)
			fatal("calloc");
		ch->relay = r;
		ch->dest = d;
		ch->claim = row->claim;
		ch->claimed_us = row->claimed_us;
		ch->answered_us = answered_us;
		ch->lease_end_us = lease_end;
	}
	m = &ch->msgs[ch->n++];
	ch->bytes += size;
	m->id = row->id;
	m->event_type = strndup(row->type, row->type_len);
	m->key = strndup(row->key, row->key_len);
	m->payload = strndup(row->payload, row->payload_len);
	m->payload_len = row->payload_len;
	m->headers = hdr;
	m->nheaders = nhdr;
	m->attempts = attempts;
	m->created_ms = row->created_ms;
	m->replay = row->replay;
	m->retry_after = -1;
	m->reason = SINK_REASON_OTHER;	/* the sink says why, if it fails */
	if (m->event_type == NULL || m->key == NULL || m->payload == NULL)
		fatal("strndup");
	/* Retrying cannot help any of these.  The schema checks the header
	 * rules when a row is written; this is for rows it did not check. */
	if (d->sink == NULL && row->destination == NULL)
		sink_refuse(m, SINK_REASON_REJECTED, "no destination: "
		    "the row names none and outbox.conf has no default (set "
		    "relay.default_destination, then redrive the row)");
	else if (d->sink == NULL)
		sink_refuse(m, SINK_REASON_REJECTED, "destination "
		    "\"%s\" is not in outbox.conf (redrive the row once it is)",
		    row->destination);
	else if (bad_headers)
		sink_refuse(m, SINK_REASON_REJECTED, "headers: not a "
		    "JSON object whose values are strings");
	else if (sink_headers_check(hdr, nhdr - marked, why, sizeof(why)) ==
	    -1)
		sink_refuse(m, SINK_REASON_REJECTED, "headers: %s", why);
	else if (size > budget)
		sink_refuse(m, SINK_REASON_TOO_LARGE, "message of %zu "
		    "bytes exceeds relay.max_message_size (%zu bytes)", size,
		    budget);
	d->filling = ch;
}

void
relay_sink_flush(struct relay *r)
{
	int	i;

	for (i = 0; i <= r->n_dests; i++)
		if (r->dests[i].filling != NULL) {
			relay_sink_queue(r, r->dests[i].filling);
			r->dests[i].filling = NULL;
		}
}

/* Queue a claimed chunk for the sink (relay_sink_pump() hands it on); one
 * whose messages are all decided already (too large) is recorded at
 * once. */
static void
relay_sink_queue(struct relay *r, struct relay_chunk *ch)
{
	int	i;

	if (ch->dest->filling == ch)
		ch->dest->filling = NULL;
	r->inflight += ch->n;
	ch->dest->inflight += ch->n;
	for (i = 0; i < ch->n; i++)
		if (ch->msgs[i].outcome != SINK_REJECTED)
			break;
	if (i == ch->n) {
		relay_sink_answered(ch->msgs, ch->n, ch);
		return;
	}
	TAILQ_INSERT_TAIL(&r->ready, ch, entry);
}

/*
 * Give the rows of every chunk still waiting for the sink back at once
 * (stopping: publishing them could take longer than shutdown_timeout, and
 * a relay killed then leaves them to the lease).
 */
static void
relay_sink_release(struct relay *r)
{
	struct relay_chunk	*ch;
	int64_t			*ids, *claims;
	int			 n = 0;

	if (TAILQ_EMPTY(&r->ready))
		return;
	if ((ids = reallocarray(NULL, r->inflight, sizeof(*ids))) == NULL ||
	    (claims = reallocarray(NULL, r->inflight, sizeof(*claims))) == NULL)
		fatal("reallocarray");
	while ((ch = TAILQ_FIRST(&r->ready)) != NULL) {
		int	i;

		TAILQ_REMOVE(&r->ready, ch, entry);
		for (i = 0; i < ch->n; i++) {
			ids[n] = ch->msgs[i].id;
			claims[n++] = ch->claim;
		}
		r->inflight -= ch->n;
		ch->dest->inflight -= ch->n;
		relay_sink_chunk_free(ch);
	}
	if ((n = relay_claim_give_back(r, ids, claims, n)) >= 0)
		log_info("gave back %d claimed row(s) not yet published", n);
	free(ids);
	free(claims);
}

/*
 * Hand ready chunks to their sinks while these have free slots, oldest
 * first for each destination.  A chunk that waited so long that its
 * publish could outlast the claim's lease (a sink that answers in
 * seconds) is not published: its rows come back when the lease ends,
 * where another relay could take them while this one was still
 * publishing them.
 */
void
relay_sink_pump(struct relay *r)
{
	struct relay_chunk	*ch, *next;
	struct relay_dest	*d;
	int64_t			 now;

	if (r->stopping) {
		relay_sink_release(r);
		return;
	}
	for (ch = TAILQ_FIRST(&r->ready); ch != NULL; ch = next) {
		long	wait_max;

		next = TAILQ_NEXT(ch, entry);
		d = ch->dest;
		if (d->at_sink >= d->slots)
			continue;
		/* The lease must cover the wait for a slot and the request
		 * (the configuration check makes it at least twice the
		 * request's timeout). */
		wait_max = (ch->lease_end_us - ch->claimed_us) / 1000 -
		    d->t.dest->timeout;
		TAILQ_REMOVE(&r->ready, ch, entry);
		now = clock_mono_us();
		if ((now - ch->claimed_us) / 1000 >= wait_max) {
			long long	took = (ch->answered_us -
					    ch->claimed_us) / 1000;

			/* A claim that alone uses up the time the lease
			 * leaves it publishes nothing, however idle the sink:
			 * say what to change. */
			if (took >= wait_max)
				log_limited(&r->stale_limit, LOG_LEVEL_WARN,
				    "too late to publish within the lease: %d "
				    "claimed row(s) are left to its end, the "
				    "claim took %lld ms and relay.lease leaves "
				    "%ld ms (lease less the sink's timeout); "
				    "find why claims are slow, or raise "
				    "relay.lease", ch->n, took, wait_max);
			else
				log_limited(&r->stale_limit, LOG_LEVEL_WARN,
				    "too late to publish within the lease: %d "
				    "claimed row(s) are left to its end (the "
				    "claim took %lld ms, the wait for a free "
				    "request to the sink %lld ms)", ch->n, took,
				    (long long)(now - ch->answered_us) / 1000);
			r->inflight -= ch->n;
			d->inflight -= ch->n;
			relay_sink_chunk_free(ch);
			continue;
		}
		ch->at_sink = 1;
		ch->sink_us = now;
		r->at_sink++;
		d->at_sink++;
		TAILQ_INSERT_TAIL(&r->at_sinkq, ch, entry);
		if (d->sink->publish(r->httpc, &d->t, ch->msgs, ch->n,
		    relay_sink_answered, ch) == -1) {
			/* Not started (no AWS credentials yet, say: creds.c
			 * says why): the lease brings the rows back.  One
			 * line per LOG_LIMIT_MS, not one per chunk. */
			log_limited(&d->t.call_limit, LOG_LEVEL_WARN,
			    "destination %s: could not start a publish of %d "
			    "message(s); their lease brings them back",
			    d->t.dest->name, ch->n);
			TAILQ_REMOVE(&r->at_sinkq, ch, entry);
			r->at_sink--;
			d->at_sink--;
			r->inflight -= ch->n;
			d->inflight -= ch->n;
			relay_sink_chunk_free(ch);
		}
	}
}

/* Count a chunk's outcomes under its destination (rows naming none of
 * ours under the metrics' other): sent with their latency (a replayed
 * message apart, as replayed, without a latency: its created_at is the
 * original's), failed
 * attempts by reason, and whether each will be retried or was given up.
 * Then tell /readyz whether the destination's sink works: a message
 * sent, or a failure of the sink's own (a message it refuses, or one
 * too large, says nothing about the sink). */
void
relay_sink_count_msgs(const struct conf *c, int dest,
    const struct outbox_msg *msgs, int n, int64_t now)
{
	int64_t		lat;
	int		i, nsent = 0, nreplayed = 0, why = -1;

	for (i = 0; i < n; i++) {
		const struct outbox_msg	*m = &msgs[i];

		if (m->outcome == SINK_SENT && m->replay > 0) {
			nreplayed++;
			continue;
		}
		if (m->outcome == SINK_SENT) {
			nsent++;
			/* Clocks of two hosts: never below zero. */
			lat = now - m->created_ms;
			metrics_publish_latency(dest, lat > 0 ?
			    (uint64_t)lat * 1000 : 0);
			continue;
		}
		metrics_publish_failure(dest, m->reason);
		metrics_published(dest, m->outcome == SINK_REJECTED ||
		    m->attempts + 1 >= c->relay.max_attempts ?
		    METRICS_PUBLISH_FAILED : METRICS_PUBLISH_RETRY, 1);
		if (m->reason != SINK_REASON_REJECTED &&
		    m->reason != SINK_REASON_TOO_LARGE)
			why = m->reason;
	}
	metrics_published(dest, METRICS_PUBLISH_SENT, nsent);
	metrics_replayed(dest, nreplayed);
	nsent += nreplayed;
	if (nsent > 0)
		metrics_sink_outcome(dest, 1, 0);
	else if (why != -1)
		metrics_sink_outcome(dest, 0, why);
}

static void
relay_sink_count(struct relay *r, const struct relay_chunk *ch)
{
	relay_sink_count_msgs(r->conf, metrics_dest(ch->dest->t.dest),
	    ch->msgs, ch->n, ch->acked_us / 1000);
}

static void
relay_sink_answered(struct outbox_msg *msgs, int n, void *arg)
{
	struct relay_chunk	*ch = arg;
	struct relay		*r = ch->relay;

	(void)msgs;
	(void)n;
	ch->acked_us = clock_wall_us();
	if (ch->at_sink) {
		metrics_sink_duration(metrics_dest(ch->dest->t.dest),
		    (uint64_t)(clock_mono_us() - ch->sink_us));
		TAILQ_REMOVE(&r->at_sinkq, ch, entry);
		r->at_sink--;
		ch->dest->at_sink--;
	}
	relay_sink_count(r, ch);
	relay_record_outcomes(r, ch);
	r->inflight -= ch->n;
	ch->dest->inflight -= ch->n;
	/* The last claim left this destination's rows because it had its
	 * fill: now it has room, there may be rows for it again.  (During a
	 * claim, relay_claim_done() asks.) */
	if (r->pg_query != RELAY_PG_CLAIM && relay_sink_room_again(r))
		r->backlog = 1;
	relay_sink_chunk_free(ch);
	relay_sink_pump(r);
	relay_schedule_record(r);
}

int
relay_sink_room_again(struct relay *r)
{
	int	i, again = 0;

	for (i = 0; i < r->n_dests; i++)
		if (r->dests[i].skipped &&
		    r->dests[i].inflight < r->dests[i].cap) {
			r->dests[i].skipped = 0;
			again = 1;
		}
	return again;
}

int
relay_sink_full(const struct relay *r)
{
	int	i;

	for (i = 0; i < r->n_dests; i++)
		if (r->dests[i].inflight < r->dests[i].cap)
			return 0;
	return r->n_dests > 0;
}

/* Rows of the chunks at the sink. */
int
relay_sink_rows(const struct relay *r)
{
	const struct relay_chunk	*ch;
	int				 n = 0;

	TAILQ_FOREACH(ch, &r->at_sinkq, entry)
		n += ch->n;
	return n;
}

/* Giving up at a stop: what the sink answered of its chunks so far is
 * recorded like any answer (sent_at is now, a little late); the rest is
 * left to the lease.  One warning says which is which. */
void
relay_sink_give_up(struct relay *r)
{
	struct relay_chunk	*ch;
	int			 i, hung = 0, answered = 0;

	TAILQ_FOREACH(ch, &r->at_sinkq, entry) {
		/* A sink that answers message by message may have answered
		 * some of the chunk already (outbox_msg.answered): those
		 * answers are recorded like any other (sent_at is now, a
		 * little late). */
		ch->acked_us = clock_wall_us();
		for (i = 0; i < ch->n; i++) {
			const struct outbox_msg	*m = &ch->msgs[i];

			if (!m->answered)
				hung++;
			else if (m->outcome == SINK_SENT) {
				relay_mark_queue(r, ch, i);
				answered++;
			} else {
				relay_fail_record(r, ch, i);
				answered++;
			}
		}
	}
	ch = TAILQ_FIRST(&r->at_sinkq);
	if (answered > 0)
		log_warnx("stopping with %d %s still unanswered "
		    "%ld ms after the stop signal: their rows are published "
		    "again when their lease ends (relay.lease %ld ms); the %d "
		    "answered row(s) of the same requests are recorded", hung,
		    ch != NULL ? ch->dest->sink->unanswered : "messages",
		    proc_give_up_ms(r->conf), r->conf->relay.lease, answered);
	else
		log_warnx("stopping with %d row(s) given to %s still "
		    "unanswered %ld ms after the stop signal: they are "
		    "published again when their lease ends (relay.lease %ld "
		    "ms)", hung,
		    ch != NULL ? ch->dest->sink->target : "the sink",
		    proc_give_up_ms(r->conf), r->conf->relay.lease);
}

void
relay_sink_free(struct relay *r)
{
	struct relay_chunk	*ch;
	int			 i;

	while ((ch = TAILQ_FIRST(&r->ready)) != NULL) {
		TAILQ_REMOVE(&r->ready, ch, entry);
		relay_sink_chunk_free(ch);
	}
	while ((ch = TAILQ_FIRST(&r->at_sinkq)) != NULL) {
		TAILQ_REMOVE(&r->at_sinkq, ch, entry);
		relay_sink_chunk_free(ch);
	}
	for (i = 0; i <= r->n_dests; i++)
		if (r->dests[i].filling != NULL)
			relay_sink_chunk_free(r->dests[i].filling);
	free(r->dests);
	r->dests = NULL;
}
