/*
 * metrics_db.c - the outbox figures of the metrics and /readyz, read from
 * PostgreSQL: rows pending and failed and the age of the oldest pending
 * one by destination, the paused destinations, the pause switch.
 *
 * The HTTP worker answering a scrape (or /readyz) runs metrics_outbox_sql
 * when the cached figures are older than METRICS_CACHE_MS and stores the
 * answer in the shared region for every worker.  Rows are grouped by
 * their destination column as written; here a NULL becomes the default
 * destination's, and every name the current configuration lacks (a typo
 * in an application's INSERT, a destination a reload removed) is added
 * to METRICS_DEST_OTHER's, so that one series per distinct name in the
 * table can never appear.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "metrics.h"

/*
 * Columns: kind (0 rows of one destination column value, 1 a paused
 * destination, 2 the pause switch), destination, pending, failed, the
 * age of the oldest pending row in ms.  The unsent rows are those of
 * outbox_key_idx's predicate: an index scan however many sent rows the
 * table keeps.
 */
const char metrics_outbox_sql[] =
	"SELECT 0, destination, count(*) FILTER (WHERE status = 'pending'), "
	"count(*) FILTER (WHERE status = 'failed'), "
	"(1000 * extract(epoch FROM clock_timestamp() - min(created_at) "
	"FILTER (WHERE status = 'pending')))::bigint "
	"FROM outbox WHERE status <> 'sent' GROUP BY destination "
	"UNION ALL SELECT 1, destination, NULL, NULL, NULL "
	"FROM outbox_paused_destinations "
	"UNION ALL SELECT 2, NULL, (SELECT paused::int FROM outbox_control "
	"WHERE id = 1), NULL, NULL";

/* What one answer says, by slot. */
struct metrics_db_figures {
	int64_t	pending[METRICS_MAX_DESTS + 1];
	int64_t	failed[METRICS_MAX_DESTS + 1];
	int64_t	oldest[METRICS_MAX_DESTS + 1];	/* -1: none pending */
	int64_t	paused[METRICS_MAX_DESTS + 1];
	int64_t	switch_paused;
};

static void
metrics_outbox_put(int state, const struct metrics_db_figures *f,
    const char *error)
{
	struct metrics_outbox	*o;
	struct metrics_dest	*d;
	size_t			 i;
	int			 n, k;

	if (metrics_shm == NULL)
		return;
	o = &metrics_shm->outbox;
	STORE(&o->state, (int64_t)state);
	if (state == METRICS_DB_OK) {
		n = metrics_dest_count();
		for (k = 0; k <= METRICS_DEST_OTHER; k++) {
			if (k >= n && k != METRICS_DEST_OTHER)
				continue;
			d = &metrics_shm->dests[k];
			STORE(&d->db_pending, f->pending[k]);
			STORE(&d->db_failed, f->failed[k]);
			STORE(&d->db_oldest_ms, f->oldest[k]);
			STORE(&d->db_paused, f->paused[k]);
		}
		STORE(&o->paused, f->switch_paused);
		STORE(&o->known, 1);
	}
	/* Byte by byte: a reader never sees a string without its NUL. */
	for (i = 0; i + 1 < sizeof(o->error) && error != NULL &&
	    error[i] != '\0'; i++)
		STORE(&o->error[i], error[i]);
	STORE(&o->error[i], '\0');
	__atomic_store_n(&o->at_ms, (clock_mono_us() / 1000), __ATOMIC_RELEASE);
}

int
metrics_outbox_fresh(void)
{
	int64_t	at;

	if (metrics_shm == NULL)
		return 0;
	at = __atomic_load_n(&metrics_shm->outbox.at_ms, __ATOMIC_ACQUIRE);
	return at != 0 && (clock_mono_us() / 1000) - at < METRICS_CACHE_MS;
}

void
metrics_outbox_down(const char *why)
{
	metrics_outbox_put(METRICS_DB_ERROR, NULL, why);
}

/* The figures of a result of metrics_outbox_sql into f. */
static void
metrics_outbox_read(const struct pg_result *res, struct metrics_db_figures *f)
{
	const char	*name;
	int64_t		 age;
	int		 i, k;

	memset(f, 0, sizeof(*f));
	for (k = 0; k <= METRICS_DEST_OTHER; k++)
		f->oldest[k] = -1;
	for (i = 0; i < PQntuples(res); i++) {
		name = PQgetisnull(res, i, 1) ? NULL : PQgetvalue(res, i, 1);
		switch (atoi(PQgetvalue(res, i, 0))) {
		case 0:
			/* The default's NULL rows and those naming it add
			 * up; so do all the other's. */
			k = metrics_dest_by_name(name);
			f->pending[k] += strtoll(PQgetvalue(res, i, 2), NULL,
			    10);
			f->failed[k] += strtoll(PQgetvalue(res, i, 3), NULL,
			    10);
			if (!PQgetisnull(res, i, 4) && (age = strtoll(
			    PQgetvalue(res, i, 4), NULL, 10)) > f->oldest[k])
				f->oldest[k] = age;
			break;
		case 1:
			/* Only a destination of ours is shown paused. */
			if (name != NULL && (k = metrics_dest_by_name(name)) !=
			    METRICS_DEST_OTHER)
				f->paused[k] = 1;
			break;
		case 2:
			f->switch_paused = !PQgetisnull(res, i, 2) &&
			    strcmp(PQgetvalue(res, i, 2), "1") == 0;
			break;
		}
	}
}

void
metrics_outbox_store(const struct pg_result *res)
{
	struct metrics_db_figures	 f;
	const char			*state;
	char				 buf[METRICS_ERROR_MAX];

	if (metrics_shm == NULL)
		return;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQnfields(res) == 5) {
		metrics_outbox_read(res, &f);
		metrics_outbox_put(METRICS_DB_OK, &f, "");
		return;
	}
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	db_result_error(buf, sizeof(buf), res, NULL);
	/* undefined table, column or function: sql/schema.sql not applied */
	if (state != NULL && (strcmp(state, "42P01") == 0 ||
	    strcmp(state, "42703") == 0 || strcmp(state, "42883") == 0))
		metrics_outbox_put(METRICS_DB_NO_SCHEMA, NULL, buf);
	else
		metrics_outbox_put(METRICS_DB_ERROR, NULL, buf);
}
