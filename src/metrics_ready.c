/*
 * metrics_ready.c - the /readyz answer, from the shared region: the last
 * outbox query (metrics_db.c), the workers the master counts, and each
 * destination's sink as the relays report it (metrics_sink_outcome()).
 *
 * Readiness is about the default destination only: the rows of POST
 * /orders go there, and a load balancer that takes outboxd out of
 * service because one of several destinations is down would stop orders
 * that can still be taken and kept.  Another destination whose sink has
 * failed every publish for relay.unready_after is named in "warning"
 * and marked "failing" in "destinations", and the answer stays 200.  A
 * paused destination is "paused", never failing: its pause is the
 * operator's choice.
 *
 * "credentials" is "unavailable: why" while a running relay or consumer
 * has no valid AWS credentials (not fetched yet, or expired and not
 * renewed: its requests wait), and then outboxd is not ready; "ok" when
 * every one has them, "not used" when none talks to AWS.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <signal.h>

#include <cjson/cJSON.h>

#include "metrics.h"
#include "creds.h"

#define METRICS_WHY_MAX		2048

/* Append to why (size bytes) what fmt says, after "; " if it holds
 * something already. */
static void	metrics_why(char *why, size_t size, const char *fmt, ...)
		    OUTBOXD_PRINTF(3, 4);

static void
metrics_why(char *why, size_t size, const char *fmt, ...)
{
	va_list	ap;
	size_t	n = strlen(why);

	if (n + 3 >= size)
		return;
	if (n > 0) {
		memcpy(why + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(why + n, size - n, fmt, ap);
	va_end(ap);
}

/*
 * The state of slot i: "paused", "failing" (its sink has failed every
 * publish for metrics_sink_unready_ms; then also said in why) or "ok".
 * Only the reason class is named: a broker's own text may carry a URL.
 */
static const char *
metrics_dest_state(int i, int is_default, char *why, size_t size)
{
	struct metrics_dest	*d = &metrics_shm->dests[i];
	int64_t			 since, now, reason;

	if (LOAD(&metrics_shm->outbox.known) && (LOAD(&d->db_paused) ||
	    LOAD(&metrics_shm->outbox.paused)))
		return "paused";
	if (metrics_sink_unready_ms == 0 ||
	    (since = LOAD(&d->sink_failing_ms)) == 0 ||
	    (now = clock_mono_us() / 1000) - since < metrics_sink_unready_ms)
		return "ok";
	reason = LOAD(&d->sink_reason);
	metrics_why(why, size, "%sdestination \"%s\" (%s) is failing: every "
	    "publish for %" PRId64 " s has failed, the last with a %s error, "
	    "and none was sent (relay.unready_after %ld ms)",
	    is_default ? "the default " : "", d->name, metrics_dest_sink(i),
	    (now - since) / 1000, reason >= 0 && reason < SINK_NREASONS ?
	    metrics_reason_names[reason] : "other", metrics_sink_unready_ms);
	return "failing";
}

/* The current destinations into arr with their states; the default's
 * state in *sink, failures in why (the default's) and warn (others'). */
static int
metrics_ready_dests(cJSON *arr, const char **sink, char *why, size_t wsize,
    char *warn, size_t nsize)
{
	const char	*state;
	cJSON		*o;
	int		 i, n = metrics_dest_count(), def;

	def = (int)LOAD(&metrics_shm->default_dest);
	*sink = "none";
	for (i = 0; i < n; i++) {
		if (!LOAD(&metrics_shm->dests[i].configured))
			continue;
		state = metrics_dest_state(i, i == def, i == def ? why : warn,
		    i == def ? wsize : nsize);
		if (i == def)
			*sink = state;
		if ((o = cJSON_CreateObject()) == NULL ||
		    !cJSON_AddItemToArray(arr, o) ||
		    cJSON_AddStringToObject(o, "name",
		    metrics_dest_label(i)) == NULL ||
		    cJSON_AddStringToObject(o, "sink",
		    metrics_dest_sink(i)) == NULL ||
		    cJSON_AddStringToObject(o, "state", state) == NULL ||
		    cJSON_AddBoolToObject(o, "default", i == def) == NULL)
			return -1;
	}
	return 0;
}

void
metrics_creds_set(int slot, const char *why)
{
	struct metrics_creds	*m;
	size_t			 i;

	if (metrics_shm == NULL || slot < 0 || slot >= METRICS_CREDS_SLOTS)
		return;
	m = &metrics_shm->creds[slot];
	STORE(&m->pid, (int64_t)getpid());
	for (i = 0; why != NULL && i + 1 < sizeof m->why && why[i]; i++)
		STORE(&m->why[i], why[i]);
	STORE(&m->why[why != NULL ? i : 0], '\0');
	__atomic_store_n(&m->state, why != NULL ? 2 : 1, __ATOMIC_RELEASE);
}

/* "ok", "not used" or "unavailable: why" (a live worker's) into buf. */
static const char *
metrics_creds_state(char *buf, size_t size)
{
	struct metrics_creds	*m;
	int64_t			 state;
	size_t			 i, j, k;
	int			 used = 0;

	for (i = 0; i < METRICS_CREDS_SLOTS; i++) {
		m = &metrics_shm->creds[i];
		if ((state = __atomic_load_n(&m->state, __ATOMIC_ACQUIRE)) ==
		    0)
			continue;
		/* A slot outlives a worker that exited; its successor
		 * writes it again. */
		if (kill((pid_t)LOAD(&m->pid), 0) == -1 && errno == ESRCH)
			continue;
		used = 1;
		if (state != 2)
			continue;
		j = (size_t)snprintf(buf, size, "unavailable: ");
		for (k = 0; k + 1 < sizeof m->why && j + k + 1 < size; k++)
			if ((buf[j + k] = LOAD(&m->why[k])) == '\0')
				break;
		buf[j + k] = '\0';
		return (buf);
	}
	snprintf(buf, size, "%s", used ? "ok" : "not used");
	return (buf);
}

int
metrics_ready(char *buf, size_t size, const char *db_down, size_t *len)
{
	struct metrics_outbox	*o;
	const char		*db = "ok", *schema = "ok", *sink = "ok";
	char			 err[METRICS_ERROR_MAX], why[METRICS_WHY_MAX];
	char			 warn[METRICS_WHY_MAX];
	char			 creds[METRICS_ERROR_MAX + 20];
	cJSON			*j, *arr;
	int64_t			 at, state, up = 0, want = 0;
	size_t			 i;
	int			 ready = 1, ok;

	err[0] = '\0';
	why[0] = '\0';
	warn[0] = '\0';
	snprintf(creds, sizeof creds, "unknown");
	if ((j = cJSON_CreateObject()) == NULL)
		return -1;
	arr = cJSON_CreateArray();
	if (metrics_shm == NULL) {
		db = "unknown";
		ready = 0;
		snprintf(why, sizeof(why), "no shared metrics region");
	} else {
		o = &metrics_shm->outbox;
		at = __atomic_load_n(&o->at_ms, __ATOMIC_ACQUIRE);
		state = at != 0 ? LOAD(&o->state) : METRICS_DB_ERROR;
		for (i = 0; i + 1 < sizeof(err); i++)
			if ((err[i] = LOAD(&o->error[i])) == '\0')
				break;
		err[i] = '\0';
		up = LOAD(&metrics_shm->workers_up);
		want = LOAD(&metrics_shm->workers_desired);
		if (db_down != NULL) {
			db = "unreachable";
			schema = "unknown";
			snprintf(err, sizeof(err), "%s", db_down);
		} else if (at == 0) {
			db = "unknown";
			schema = "unknown";
			snprintf(err, sizeof(err), "not checked yet");
		} else if (state == METRICS_DB_NO_SCHEMA) {
			schema = "missing";
		} else if (state != METRICS_DB_OK) {
			db = "error";
			schema = "unknown";
		}
		if (strcmp(db, "ok") != 0) {
			ready = 0;
			metrics_why(why, sizeof(why), "PostgreSQL: %s", err);
		} else if (strcmp(schema, "ok") != 0) {
			ready = 0;
			metrics_why(why, sizeof(why), "the outboxd schema is "
			    "missing (apply sql/schema.sql): %s", err);
		}
		if (arr == NULL || metrics_ready_dests(arr, &sink, why,
		    sizeof(why), warn, sizeof(warn)) == -1) {
			cJSON_Delete(arr);
			cJSON_Delete(j);
			return -1;
		}
		if (strcmp(sink, "failing") == 0)
			ready = 0;
		if (strncmp(metrics_creds_state(creds, sizeof creds),
		    "unavailable", 11) == 0) {
			metrics_why(why, sizeof(why), "AWS credentials %s",
			    creds);
			ready = 0;
		}
		if (up < want) {
			metrics_why(why, sizeof(why), "%" PRId64 " of %" PRId64
			    " workers are not running", want - up, want);
			ready = 0;
		}
	}
	if (!ready && warn[0] != '\0')
		metrics_why(why, sizeof(why), "%s", warn);
	ok = cJSON_AddStringToObject(j, "status", ready ? "ready" :
	    "not_ready") != NULL &&
	    (ready || (cJSON_AddStringToObject(j, "error", "not_ready") !=
	    NULL && cJSON_AddStringToObject(j, "message", why) != NULL)) &&
	    (!ready || warn[0] == '\0' ||
	    cJSON_AddStringToObject(j, "warning", warn) != NULL) &&
	    cJSON_AddStringToObject(j, "database", db) != NULL &&
	    cJSON_AddStringToObject(j, "schema", schema) != NULL &&
	    cJSON_AddStringToObject(j, "sink", sink) != NULL &&
	    cJSON_AddStringToObject(j, "credentials", creds) != NULL &&
	    arr != NULL && cJSON_AddItemToObject(j, "destinations", arr) &&
	    cJSON_AddNumberToObject(j, "workers_up", (double)up) != NULL &&
	    cJSON_AddNumberToObject(j, "workers_desired", (double)want) !=
	    NULL && size <= INT_MAX &&
	    cJSON_PrintPreallocated(j, buf, (int)size, 0);
	if (arr != NULL && cJSON_GetObjectItem(j, "destinations") == NULL)
		cJSON_Delete(arr);
	cJSON_Delete(j);
	if (!ok)
		return -1;
	*len = strlen(buf);
	return ready ? 200 : 503;
}
