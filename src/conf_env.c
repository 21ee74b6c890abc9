/*
 * conf_env.c - what the configuration takes from the process it runs in:
 * the AWS settings left out of the file, from the standard environment
 * variables as the AWS SDKs read them, and the limit on open files that
 * http.max_connections must fit in.
 */
#include "config.h"

#include <sys/resource.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboxd.h"
#include "conf.h"

/* First non-empty of a config value and environment variables. */
const char *
conf_pick(const char *file_value, const char *env1, const char *env2)
{
	const char	*v;

	if (file_value != NULL && *file_value != '\0')
		return file_value;
	if (env1 != NULL && (v = getenv(env1)) != NULL && *v != '\0')
		return v;
	if (env2 != NULL && (v = getenv(env2)) != NULL && *v != '\0')
		return v;
	return NULL;
}

/* Endpoint base URL without a trailing '/'; caller frees. */
char *
conf_endpoint(const char *svc_file, const char *aws_file, const char *svc_env,
    const char *service, const char *region)
{
	const char	*v;
	char		*s;
	size_t		 n;

	/* Explicit file settings win over the environment; the
	 * per-service ones over the global one, as in the AWS SDKs. */
	if ((v = conf_pick(svc_file, NULL, NULL)) == NULL &&
	    (v = conf_pick(aws_file, NULL, NULL)) == NULL)
		v = conf_pick(NULL, svc_env, "AWS_ENDPOINT_URL");
	if (v != NULL) {
		if ((s = strdup(v)) == NULL)
			return NULL;
		n = strlen(s);
		while (n > 0 && s[n - 1] == '/')
			s[--n] = '\0';
		return s;
	}
	if (region == NULL)
		return NULL;
	if (asprintf(&s, "https://%s.%s.amazonaws.com", service, region) == -1)
		return NULL;
	return s;
}

/*
 * An HTTP worker's client connections, database connections and its own
 * HTTP_FD_RESERVE must fit in the limit on open files this process (and
 * so every worker) has: else accept() would take the descriptors a
 * reconnect to the database needs.  http.max_connections 0 takes what is
 * left (http.c), which must be at least one.
 */
int
conf_check_nofile(const struct conf *c, char *err, size_t errlen)
{
	struct rlimit	rl;
	long long	need, own = HTTP_FD_RESERVE + c->http.db_connections;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	need = own + (c->http.max_connections > 0 ?
	    c->http.max_connections : 1);
	if (need <= (long long)rl.rlim_cur)
		return 0;
	snprintf(err, errlen, "%s: http.max_connections = %d needs %lld open "
	    "files per HTTP worker (with http.db_connections and %d of its "
	    "own), but the limit on open files (RLIMIT_NOFILE) is %lld: lower "
	    "http.max_connections or raise the limit (LimitNOFILE= of the "
	    "systemd unit, ulimit -n)", c->path, c->http.max_connections,
	    need, HTTP_FD_RESERVE, (long long)rl.rlim_cur);
	return -1;
}
