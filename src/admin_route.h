/*
 * admin_route.h - the admin API's routes (admin_route.c), for
 * admin_http.c.
 */
#ifndef ADMIN_ROUTE_H
#define ADMIN_ROUTE_H

#include <stddef.h>
#include <stdint.h>

struct evhttp_uri;
struct evkeyvalq;

/*
 * The route (METRICS_ROUTE_*, metrics_api.h) of an admin request's path;
 * METRICS_ROUTE_OTHER for none.  For /destinations/NAME[/ACTION] the
 * percent-decoded name into *name (caller frees; NULL with *bad set if it
 * held a NUL byte or memory ran out); for /outbox/replays/ID[/cancel]
 * the id into *replay_id (0 otherwise).
 */
int		 admin_route(const char *path, char **name, int *bad,
		    int64_t *replay_id);
/*
 * uri's query parsed into q (initialised and, whatever the answer,
 * cleared by the caller with evhttp_clear_headers()), once for the
 * request: it may name only parameters route takes (GET /outbox/failed:
 * limit, after_id; GET /outbox/replays: limit; any other route: none).
 * 0, or -1 with the reason in err (the parameter's name is not in it: it
 * is the client's own text).
 */
int		 admin_route_query(const struct evhttp_uri *uri, int route,
		    int64_t replay_id, struct evkeyvalq *q, char *err,
		    size_t errlen);
/* Query parameter name of q as a decimal in [min, max] into *out; def
 * when absent.  0, or -1 if it is not such a number. */
int		 admin_route_query_int(const struct evkeyvalq *q,
		    const char *name, int64_t def, int64_t min, int64_t max,
		    int64_t *out);

#endif
