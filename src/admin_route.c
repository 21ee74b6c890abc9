/*
 * admin_route.c - which route of the admin API (admin_http.c) a request
 * path is, with the destination name or replay id it carries, and the
 * query parameters each route takes.  A parameter a route does not read
 * is refused, never ignored: POST /outbox/replay?dry_run=true would
 * otherwise replay for real.
 */
#include "config.h"

#include <sys/queue.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "outboxd.h"
#include "admin_route.h"
#include "metrics_api.h"

/*
 * The route of a path under /destinations/: NAME alone, or NAME/pause,
 * NAME/resume, NAME/redrive; METRICS_ROUTE_OTHER for anything else.  The
 * name, percent-decoded, into *name (caller frees; NULL if it held a
 * NUL byte or memory ran out: the name is then bad).
 */
static int
admin_dest_route(const char *path, char **name, int *bad)
{
	const char	*seg = path + strlen("/destinations/"), *slash;
	char		*raw;
	size_t		 n, len;
	int		 route;

	*name = NULL;
	*bad = 0;
	if ((slash = strchr(seg, '/')) == NULL) {
		route = METRICS_ROUTE_DESTINATION;
		n = strlen(seg);
	} else {
		n = (size_t)(slash - seg);
		if (strcmp(slash, "/pause") == 0)
			route = METRICS_ROUTE_DEST_PAUSE;
		else if (strcmp(slash, "/resume") == 0)
			route = METRICS_ROUTE_DEST_RESUME;
		else if (strcmp(slash, "/redrive") == 0)
			route = METRICS_ROUTE_DEST_REDRIVE;
		else
			return METRICS_ROUTE_OTHER;
	}
	if ((raw = strndup(seg, n)) == NULL) {
		*bad = 1;
		return route;
	}
	*name = evhttp_uridecode(raw, 0, &len);
	free(raw);
	if (*name == NULL || strlen(*name) != len) {
		free(*name);
		*name = NULL;
		*bad = 1;
	}
	return route;
}

/* The route of a path under /outbox/replays/: ID or ID/cancel, with the
 * id in *id (0: not a replay id, then the route answers 404). */
static int
admin_replay_route(const char *path, int64_t *id)
{
	const char	*seg = path + strlen("/outbox/replays/");
	char		*end;
	long long	 n;

	*id = 0;
	if (*seg < '1' || *seg > '9')
		return METRICS_ROUTE_OTHER;
	errno = 0;
	n = strtoll(seg, &end, 10);
	if (errno != 0)
		return METRICS_ROUTE_OTHER;
	*id = n;
	if (*end == '\0')
		return METRICS_ROUTE_REPLAYS;
	if (strcmp(end, "/cancel") == 0)
		return METRICS_ROUTE_REPLAY_CANCEL;
	*id = 0;
	return METRICS_ROUTE_OTHER;
}

int
admin_route(const char *path, char **name, int *bad, int64_t *replay_id)
{
	*name = NULL;
	*bad = 0;
	*replay_id = 0;
	if (strcmp(path, "/outbox") == 0)
		return METRICS_ROUTE_OUTBOX;
	if (strcmp(path, "/outbox/failed") == 0)
		return METRICS_ROUTE_FAILED;
	if (strcmp(path, "/outbox/redrive") == 0)
		return METRICS_ROUTE_REDRIVE;
	if (strcmp(path, "/relay/pause") == 0)
		return METRICS_ROUTE_PAUSE;
	if (strcmp(path, "/relay/resume") == 0)
		return METRICS_ROUTE_RESUME;
	if (strcmp(path, "/destinations") == 0)
		return METRICS_ROUTE_DESTINATIONS;
	if (strncmp(path, "/destinations/", 14) == 0)
		return admin_dest_route(path, name, bad);
	if (strcmp(path, "/outbox/replay") == 0)
		return METRICS_ROUTE_REPLAY;
	if (strcmp(path, "/outbox/replays") == 0)
		return METRICS_ROUTE_REPLAYS;
	if (strncmp(path, "/outbox/replays/", 16) == 0)
		return admin_replay_route(path, replay_id);
	return METRICS_ROUTE_OTHER;
}

int
admin_route_query_int(const struct evkeyvalq *q, const char *name,
    int64_t def, int64_t min, int64_t max, int64_t *out)
{
	const char	*v = evhttp_find_header(q, name);
	char		*end;
	long long	 n;

	*out = def;
	if (v == NULL)
		return 0;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (*v == '\0' || *end != '\0' || errno != 0 || n < min || n > max)
		return -1;
	*out = n;
	return 0;
}

int
admin_route_query(const struct evhttp_uri *uri, int route, int64_t replay_id,
    struct evkeyvalq *q, char *err, size_t errlen)
{
	static const char *const failed[] = { "limit", "after_id", NULL };
	static const char *const replays[] = { "limit", NULL };
	const char *const	*allowed = NULL, *const *p;
	const char		*qs = uri != NULL ? evhttp_uri_get_query(uri) :
				    NULL;
	struct evkeyval		*kv;
	int			 bad = 0;

	if (qs == NULL || *qs == '\0')
		return 0;
	if (route == METRICS_ROUTE_FAILED)
		allowed = failed;
	else if (route == METRICS_ROUTE_REPLAYS && replay_id == 0)
		allowed = replays;
	if (evhttp_parse_query_str(qs, q) == -1) {
		snprintf(err, errlen, "the query string cannot be read");
		return -1;
	}
	TAILQ_FOREACH(kv, q, next) {
		for (p = allowed; p != NULL && *p != NULL; p++)
			if (strcmp(kv->key, *p) == 0)
				break;
		if (p == NULL || *p == NULL)
			bad = 1;
	}
	if (!bad)
		return 0;
	if (allowed == NULL)
		snprintf(err, errlen, "this route takes no query "
		    "parameter%s", route == METRICS_ROUTE_REPLAY ?
		    " (dry_run goes in the JSON body)" : "");
	else
		snprintf(err, errlen, "unknown query parameter (this "
		    "route takes %s)", allowed == failed ? "limit and after_id" :
		    "limit");
	return -1;
}

