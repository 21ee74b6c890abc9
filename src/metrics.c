/*
 * metrics.c - counters and histograms shared by every outboxd process:
 * the shared region, its destinations, and the updates.  The exposition
 * is metrics_text.c's, the outbox figures read from PostgreSQL
 * metrics_db.c's, /readyz metrics_ready.c's (their layout: metrics.h).
 *
 * The master maps one anonymous shared region (mmap MAP_SHARED |
 * MAP_ANONYMOUS) before it forks any worker, so every worker updates the
 * same slots: a scrape answered by any HTTP worker shows the sum over all
 * workers, a respawned worker goes on adding to the same totals, and
 * nothing is counted twice.  Updates are relaxed __atomic adds on
 * fixed slots (no lock, no system call, no allocation): a handful of
 * nanoseconds on the hot path.  A reader may see one counter of a pair
 * already moved and the other not yet; each value on its own is exact.
 *
 * Destinations: the region has room for METRICS_MAX_DESTS of them and
 * one more for everything else (METRICS_DEST_OTHER).  Only the master
 * gives out slots (metrics_destinations(), before each generation is
 * forked), so there is one writer and no race between workers; a slot
 * is keyed by name and sink and never reused, so a reload that removes
 * a destination leaves its counters where they were (frozen, never
 * going back) and one that brings it back goes on adding to them.
 *
 * Histograms keep one non-cumulative count per bucket plus a sum in
 * microseconds; the exposition adds the buckets up, and _count is the
 * +Inf bucket of that same sum, so the two always agree.
 *
 * In a process where metrics_init() was never called (outboxctl, unit
 * tests before it) every update is a no-op.
 */
#include "config.h"

#include <sys/mman.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"

/* Upper bounds of the buckets, in microseconds (metrics_text.c shows
 * them). */
const uint64_t metrics_http_bounds[] = {
	500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000
};
const size_t metrics_http_nbounds = NELEM(metrics_http_bounds);
/* Commit to acknowledgement: milliseconds when all is well, minutes or
 * hours while the broker is away or the destination is paused. */
const uint64_t metrics_publish_bounds[] = {
	5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000,
	5000000, 10000000, 30000000, 60000000, 300000000, 900000000,
	1800000000, 3600000000
};
const size_t metrics_publish_nbounds = NELEM(metrics_publish_bounds);
/* A batch at the sink: a fraction of a millisecond to a local broker,
 * tens of ms to a remote one, up to the request's timeout. */
const uint64_t metrics_sink_bounds[] = {
	250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,
	500000, 1000000, 2500000, 5000000, 10000000, 30000000
};
const size_t metrics_sink_nbounds = NELEM(metrics_sink_bounds);

const char *const metrics_role_names[4] = {
	"http", "relay", "consumer", "admin"
};

struct metrics_shm	*metrics_shm;
long			 metrics_sink_unready_ms;

int
metrics_init(void)
{
	void	*p;

	if (metrics_shm != NULL)
		return 0;
	p = mmap(NULL, sizeof(struct metrics_shm), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	/* Fresh anonymous pages are zero: every counter starts at 0. */
	metrics_shm = p;
	metrics_shm->start_time = (int64_t)time(NULL);
	metrics_shm->default_dest = -1;
	metrics_shm->dests[METRICS_DEST_OTHER].sink = -1;
	snprintf(metrics_shm->dests[METRICS_DEST_OTHER].name,
	    sizeof(metrics_shm->dests[METRICS_DEST_OTHER].name), "%s",
	    METRICS_DEST_OTHER_LABEL);
	return 0;
}

/* ---- destinations ---------------------------------------------------- */

int
metrics_dest_count(void)
{
	if (metrics_shm == NULL)
		return 0;
	return (int)__atomic_load_n(&metrics_shm->n_dests, __ATOMIC_ACQUIRE);
}

/* The slot of name and sink among the first n, or -1. */
static int
metrics_dest_find(const char *name, int sink, int n)
{
	int	i;

	for (i = 0; i < n; i++)
		if (metrics_shm->dests[i].sink == sink &&
		    strcmp(metrics_shm->dests[i].name, name) == 0)
			return i;
	return -1;
}

void
metrics_destinations(const struct conf *c)
{
	struct metrics_dest	*d;
	int			 n, i, slot, def = -1;
	int			 cur[METRICS_MAX_DESTS];

	if (metrics_shm == NULL)
		return;
	n = metrics_dest_count();
	memset(cur, 0, sizeof(cur));
	for (i = 0; i < c->n_destinations; i++) {
		const struct conf_destination	*cd = &c->destinations[i];

		if ((slot = metrics_dest_find(cd->name, cd->sink, n)) == -1) {
			/* Longer names, and names past the table, are the
			 * other's. */
			if (n == METRICS_MAX_DESTS ||
			    strlen(cd->name) >= METRICS_DEST_NAME_MAX)
				continue;
			d = &metrics_shm->dests[n];
			memcpy(d->name, cd->name, strlen(cd->name) + 1);
			d->sink = cd->sink;
			d->db_oldest_ms = -1;
			slot = n++;
			/* Readers see the name once they see the count. */
			__atomic_store_n(&metrics_shm->n_dests, (int64_t)n,
			    __ATOMIC_RELEASE);
		}
		cur[slot] = 1;
		if (i == c->default_destination)
			def = slot;
	}
	for (i = 0; i < n; i++)
		STORE(&metrics_shm->dests[i].configured, (int64_t)cur[i]);
	STORE(&metrics_shm->default_dest, (int64_t)def);
}

int
metrics_dest(const struct conf_destination *d)
{
	int	slot;

	if (metrics_shm == NULL || d == NULL)
		return METRICS_DEST_OTHER;
	slot = metrics_dest_find(d->name, d->sink, metrics_dest_count());
	return slot == -1 ? METRICS_DEST_OTHER : slot;
}

int
metrics_dest_by_name(const char *name)
{
	int	i, n = metrics_dest_count();

	if (metrics_shm == NULL)
		return METRICS_DEST_OTHER;
	if (name == NULL) {
		i = (int)LOAD(&metrics_shm->default_dest);
		return i >= 0 && i < n ? i : METRICS_DEST_OTHER;
	}
	for (i = 0; i < n; i++)
		if (LOAD(&metrics_shm->dests[i].configured) &&
		    strcmp(metrics_shm->dests[i].name, name) == 0)
			return i;
	return METRICS_DEST_OTHER;
}

const char *
metrics_dest_label(int i)
{
	return metrics_shm->dests[i].name;
}

const char *
metrics_dest_sink(int i)
{
	int64_t	s = metrics_shm->dests[i].sink;

	return s >= 0 && s <= CONF_SINK_PUBSUB ? metrics_sink_names[s] : "none";
}

/* The slot dest, or NULL if it is not one. */
static struct metrics_dest *
metrics_slot(int dest)
{
	if (metrics_shm == NULL || dest < 0 || dest > METRICS_DEST_OTHER ||
	    (dest != METRICS_DEST_OTHER && dest >= metrics_dest_count()))
		return NULL;
	return &metrics_shm->dests[dest];
}

/* ---- updates --------------------------------------------------------- */

void
metrics_hist_observe(struct metrics_hist *h, const uint64_t *bounds,
    size_t nb, uint64_t us)
{
	size_t	i;

	for (i = 0; i < nb && us > bounds[i]; i++)
		;
	ADD(&h->bucket[i], 1);
	ADD(&h->sum_us, us);
}

void
metrics_http_request(int route, int status, uint64_t us)
{
	int	cls = status / 100 - 1;

	if (metrics_shm == NULL || route < 0 || route >= METRICS_NROUTES)
		return;
	if (cls < 0 || cls > 4)
		cls = 4;
	ADD(&metrics_shm->http_requests[route][cls], 1);
	metrics_hist_observe(&metrics_shm->http_duration[route],
	    metrics_http_bounds, metrics_http_nbounds, us);
}

void
metrics_published(int dest, int outcome, int n)
{
	struct metrics_dest	*d = metrics_slot(dest);

	if (d == NULL || outcome < 0 || outcome >= METRICS_NOUTCOMES ||
	    n <= 0)
		return;
	ADD(&d->published[outcome], (uint64_t)n);
}

void
metrics_replayed(int dest, int n)
{
	struct metrics_dest	*d = metrics_slot(dest);

	if (d != NULL && n > 0)
		ADD(&d->replayed, (uint64_t)n);
}

void
metrics_publish_failure(int dest, int reason)
{
	struct metrics_dest	*d = metrics_slot(dest);

	if (d == NULL || reason < 0 || reason >= SINK_NREASONS)
		return;
	ADD(&d->failures[reason], 1);
}

void
metrics_publish_latency(int dest, uint64_t us)
{
	struct metrics_dest	*d = metrics_slot(dest);

	if (d == NULL)
		return;
	metrics_hist_observe(&d->publish_latency, metrics_publish_bounds,
	    metrics_publish_nbounds, us);
}

void
metrics_sink_duration(int dest, uint64_t us)
{
	struct metrics_dest	*d = metrics_slot(dest);

	if (d == NULL)
		return;
	metrics_hist_observe(&d->sink_duration, metrics_sink_bounds,
	    metrics_sink_nbounds, us);
}

void
metrics_consumer(int outcome)
{
	if (metrics_shm == NULL || outcome < 0 || outcome >= METRICS_NCONSUMER)
		return;
	ADD(&metrics_shm->consumer[outcome], 1);
}

void
metrics_worker_restart(const char *role)
{
	size_t	i;

	if (metrics_shm == NULL || role == NULL)
		return;
	for (i = 0; i < NELEM(metrics_role_names); i++)
		if (strcmp(role, metrics_role_names[i]) == 0)
			ADD(&metrics_shm->restarts[i], 1);
}

void
metrics_reload(int ok)
{
	if (metrics_shm != NULL)
		ADD(&metrics_shm->reloads[ok ? 0 : 1], 1);
}

void
metrics_retention(int failed, long n)
{
	if (metrics_shm == NULL)
		return;
	if (failed)
		ADD(&metrics_shm->retention_errors, 1);
	else if (n > 0)
		ADD(&metrics_shm->retention_rows, (uint64_t)n);
}

void
metrics_handoff(int taken, int failed)
{
	if (metrics_shm == NULL)
		return;
	if (taken > 0)
		ADD(&metrics_shm->handoff_rows, (uint64_t)taken);
	if (failed > 0)
		ADD(&metrics_shm->handoff_failed, (uint64_t)failed);
}

void
metrics_wal_bad_message(void)
{
	if (metrics_shm != NULL)
		ADD(&metrics_shm->wal_bad_messages, 1);
}

/* A pid per streaming relay, not a count: a relay killed or retired
 * while streaming never says it stopped, and metrics_wal_streamers()
 * counts only pids still alive. */
void
metrics_wal_streaming(int up)
{
	int32_t	pid = (int32_t)getpid(), none;
	int	i;

	if (metrics_shm == NULL)
		return;
	for (i = 0; i < METRICS_WAL_PIDS; i++) {
		if (!up) {
			if (LOAD(&metrics_shm->wal_streaming[i]) == pid) {
				STORE(&metrics_shm->wal_streaming[i], 0);
				return;
			}
			continue;
		}
		none = 0;	/* a free slot takes the pid */
		if (__atomic_compare_exchange_n(&metrics_shm->wal_streaming[i],
		    &none, pid, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return;
	}
}

int64_t
metrics_wal_streamers(const struct metrics_shm *m)
{
	int64_t	n = 0;
	int32_t	pid;
	int	i;

	for (i = 0; i < METRICS_WAL_PIDS; i++)
		if ((pid = LOAD(&m->wal_streaming[i])) != 0 &&
		    (kill(pid, 0) == 0 || errno == EPERM))
			n++;
	return n;
}

void
metrics_wal_lag(int64_t bytes, int64_t oldest_ms)
{
	if (metrics_shm == NULL)
		return;
	STORE(&metrics_shm->wal_lag_bytes, bytes);
	STORE(&metrics_shm->wal_oldest_ms, oldest_ms);
}

void
metrics_set_workers(int up, int desired)
{
	if (metrics_shm == NULL)
		return;
	STORE(&metrics_shm->workers_up, (int64_t)up);
	STORE(&metrics_shm->workers_desired, (int64_t)desired);
}

void
metrics_accept_paused(int why)
{
	if (metrics_shm == NULL || why < 0 || why >= METRICS_NPAUSE)
		return;
	ADD(&metrics_shm->accept_paused[why], 1);
}

void
metrics_sink_outcome(int dest, int ok, int reason)
{
	struct metrics_dest	*d = metrics_slot(dest);
	int64_t			 now = clock_mono_us() / 1000, zero = 0;

	if (d == NULL)
		return;
	if (ok) {
		STORE(&d->sink_ok_ms, now);
		STORE(&d->sink_failing_ms, 0);
		return;
	}
	STORE(&d->sink_reason, (int64_t)reason);
	/* The first failure since the last success starts the clock; a
	 * relay that succeeds meanwhile stops it again. */
	(void)__atomic_compare_exchange_n(&d->sink_failing_ms, &zero, now, 0,
	    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

void
metrics_set_sink_unready(long ms)
{
	metrics_sink_unready_ms = ms > 0 ? ms : 0;
}
