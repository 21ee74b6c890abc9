/*
 * fuzz_admin_route.c - libFuzzer target for the admin API's routing and
 * query checks (src/admin_route.c): the input, up to its first '?', is a
 * request path, the rest its query string.  admin_route() must answer
 * an admin route or METRICS_ROUTE_OTHER; a destination route's name is
 * the percent-decoded segment, NUL-free, or NULL with bad set; only the
 * replays routes carry an id, and it is positive.
 * admin_route_query() answers 0 or -1, and its reason is one of its
 * own fixed texts (a parameter's name is not echoed).  Built and run
 * by `make fuzz` (FUZZ_SECONDS); by hand, from the top of a configured
 * tree (config.h there):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc tests/fuzz/fuzz_admin_route.c src/admin_route.c -levent -o fuzz_admin_route && mkdir -p /tmp/fuzz-admin-route && ./fuzz_admin_route -max_total_time=300 /tmp/fuzz-admin-route tests/fuzz/corpus/admin_route
 */
#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "outboxd.h"
#include "admin_route.h"
#include "metrics_api.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct evhttp_uri	*uri;
	struct evkeyvalq	 kq;
	char			*path, *q, *name, err[256];
	int64_t			 id;
	int			 route, bad, rv;

	if ((path = malloc(size + 1)) == NULL)
		return 0;
	memcpy(path, data, size);
	path[size] = '\0';
	if ((q = strchr(path, '?')) != NULL)
		*q++ = '\0';

	route = admin_route(path, &name, &bad, &id);
	CHECK(route == METRICS_ROUTE_OTHER ||
	    (route >= METRICS_ROUTE_OUTBOX &&
	    route <= METRICS_ROUTE_REPLAY_CANCEL));
	if (route >= METRICS_ROUTE_DESTINATION &&
	    route <= METRICS_ROUTE_DEST_REDRIVE) {
		CHECK(strncmp(path, "/destinations/", 14) == 0);
		CHECK((name == NULL) == (bad != 0));
		if (name != NULL)
			CHECK(strlen(name) <= strlen(path + 14));
	} else
		CHECK(name == NULL && !bad);
	if (route == METRICS_ROUTE_REPLAY_CANCEL)
		CHECK(id > 0);
	else if (route != METRICS_ROUTE_REPLAYS)
		CHECK(id == 0);
	free(name);

	if (q != NULL && (uri = evhttp_uri_new()) != NULL) {
		if (evhttp_uri_set_query(uri, q) == 0) {
			err[0] = '\0';
			TAILQ_INIT(&kq);
			rv = admin_route_query(uri, route, id, &kq, err,
			    sizeof(err));
			evhttp_clear_headers(&kq);
			CHECK(rv == 0 || rv == -1);
			if (rv == -1)
				CHECK(strcmp(err, "the query string cannot "
				    "be read") == 0 ||
				    strcmp(err, "this route takes no query "
				    "parameter") == 0 ||
				    strcmp(err, "this route takes no query "
				    "parameter (dry_run goes in the JSON "
				    "body)") == 0 ||
				    strncmp(err, "unknown query parameter "
				    "(this route takes limit", 47) == 0);
		}
		evhttp_uri_free(uri);
	}
	free(path);
	return 0;
}
