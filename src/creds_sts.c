/*
 * creds_sts.c - the chain's role sources through AWS STS (AWS STS API
 * reference: AssumeRole, AssumeRoleWithWebIdentity; AWS SDKs and Tools
 * Reference Guide, "Assume role credential provider"), over the query
 * protocol through the worker's own httpc:
 *
 * AssumeRoleWithWebIdentity (EKS IRSA, a profile's
 * web_identity_token_file): the token file is read at every fetch, since
 * Kubernetes rotates the projected token, and the call is unsigned: the
 * token is the proof.
 *
 * AssumeRole (a profile's role_arn with source_profile or
 * credential_source, each role of a source_profile chain, aws.role_arn):
 * signed with SigV4 by the credentials the step before handed out (the
 * source profile's static keys, the environment's, instance metadata's,
 * the container's, a role's), in the region.  DurationSeconds is sent
 * when duration_seconds (aws.duration_seconds) is set.
 *
 * The form bodies and the XML replies are sts.c's.  The request body
 * holds the web identity token: it is wiped once httpc has copied it.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "outboxd.h"
#include "broker.h"
#include "creds.h"
#include "sts.h"

#define CREDS_STS_TIMEOUT	10000L	/* ms, one STS call */
#define CREDS_STS_TOKEN_MAX	16384	/* bytes of a web identity token */

struct creds_sts {
	creds_done_cb	*done;
	enum sts_action	 action;
};

static void
creds_sts_free(void *arg)
{
	free(arg);
}

char *
creds_sts_session_name(void)
{
	char	*s;

	/* RoleSessionName: 2 to 64 of [\w+=,.@-] (STS). */
	if (asprintf(&s, "outboxd-%lld", (long long)time(NULL)) == -1)
		return (NULL);
	return (s);
}

/* The web identity token of path (malloc'd, caller wipes), or NULL with
 * err; the token itself is never quoted. */
static char *
creds_sts_token(const char *path, char *err, size_t errlen)
{
	FILE	*f;
	char	*buf;
	size_t	 n;

	if ((buf = malloc(CREDS_STS_TOKEN_MAX + 2)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return (NULL);
	}
	if ((f = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "cannot open the web identity token file "
		    "%s: %s", path, strerror(errno));
		free(buf);
		return (NULL);
	}
	n = fread(buf, 1, CREDS_STS_TOKEN_MAX + 1, f);
	fclose(f);
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		n--;
	buf[n <= CREDS_STS_TOKEN_MAX ? n : CREDS_STS_TOKEN_MAX] = '\0';
	if (n == 0 || n > CREDS_STS_TOKEN_MAX || strlen(buf) != n) {
		snprintf(err, errlen, "the web identity token file %s is empty, "
		    "holds a NUL byte or is over %d bytes", path,
		    CREDS_STS_TOKEN_MAX);
		explicit_bzero(buf, CREDS_STS_TOKEN_MAX + 2);
		free(buf);
		return (NULL);
	}
	return (buf);
}

static void
creds_sts_reply(const struct httpc_response *resp, void *arg)
{
	struct creds_sts	*st = arg;
	struct sts_creds	 c;
	struct sts_error	 e;
	struct creds_got	 got;
	const char		*what = sts_action_name(st->action), *why;
	char			 err[700];

	if (resp->curl_code != 0) {
		snprintf(err, sizeof err, "STS %s: %s", what, resp->curl_error);
		st->done(NULL, err);
	} else if (resp->status != 200) {
		/* STS's own words: its codes and messages carry no secret
		 * (they name the role, never the token or keys). */
		if (sts_error_parse(resp->body, resp->body_len, &e) == 0)
			snprintf(err, sizeof err, "STS %s: HTTP %ld %s: %.200s",
			    what, resp->status, e.code, e.message);
		else
			snprintf(err, sizeof err, "STS %s: HTTP %ld", what,
			    resp->status);
		st->done(NULL, err);
	} else if (sts_creds_parse(st->action, resp->body, resp->body_len, &c,
	    &why) == -1) {
		snprintf(err, sizeof err, "STS %s: %s", what, why);
		st->done(NULL, err);
	} else {
		memset(&got, 0, sizeof got);
		got.access_key_id = c.access_key_id;
		got.secret_access_key = c.secret_access_key;
		got.session_token = c.session_token;
		if ((got.expiration = creds_time_parse(c.expiration)) <= 0) {
			snprintf(err, sizeof err, "STS %s: Expiration \"%.40s\" "
			    "is not an ISO 8601 time", what, c.expiration);
			st->done(NULL, err);
		} else
			st->done(&got, NULL);
		sts_creds_clear(&c);
	}
	free(st);
}

/* One STS call: AssumeRoleWithWebIdentity when token_file is set (the
 * file read now, unsigned), else AssumeRole signed with the keys. */
static int
creds_sts_call(struct httpc *hc, const struct creds_plan *p,
    const char *role_arn, const char *session_name, const char *external_id,
    long duration, const char *token_file, const struct creds_got *keys,
    creds_done_cb *done)
{
	struct httpc_request	 r;
	struct curl_slist	*h = NULL;
	struct creds_sts	*st;
	char			*token = NULL, *body, url[1024], sigv4[128];
	char			 err[300];
	int			 rv;

	if ((st = calloc(1, sizeof *st)) == NULL)
		return (-1);
	st->done = done;
	st->action = token_file != NULL ? STS_ASSUME_ROLE_WEB_IDENTITY :
	    STS_ASSUME_ROLE;
	if (p->sts_endpoint == NULL || p->region == NULL) {
		free(st);
		return (-1);	/* planned: the region is fetched first */
	}
	if (token_file != NULL &&
	    (token = creds_sts_token(token_file, err, sizeof err)) == NULL) {
		free(st);
		done(NULL, err);	/* retried with backoff, as a fetch */
		return (0);
	}
	body = sts_body(st->action, role_arn, session_name,
	    token != NULL ? token : external_id, duration);
	if (token != NULL) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (body == NULL || (size_t)snprintf(url, sizeof url, "%s/",
	    p->sts_endpoint) >= sizeof url || (size_t)snprintf(sigv4,
	    sizeof sigv4, "aws:amz:%s:sts", p->region) >= sizeof sigv4 ||
	    httpc_header(&h, "Content-Type: application/x-www-form-urlencoded;"
	    " charset=utf-8") == -1 || (st->action == STS_ASSUME_ROLE &&
	    keys->session_token != NULL && httpc_header(&h,
	    "X-Amz-Security-Token: %s", keys->session_token) == -1)) {
		if (body != NULL) {
			explicit_bzero(body, strlen(body));
			free(body);
		}
		curl_slist_free_all(h);
		free(st);
		return (-1);
	}
	memset(&r, 0, sizeof r);
	r.url = url;
	r.headers = h;
	r.body = body;
	r.body_len = strlen(body);
	if (st->action == STS_ASSUME_ROLE) {
		r.aws_sigv4 = sigv4;
		r.username = keys->access_key_id;
		r.password = keys->secret_access_key;
	}
	r.timeout = CREDS_STS_TIMEOUT;
	r.arg_free = creds_sts_free;
	rv = httpc_post(hc, &r, creds_sts_reply, st);
	explicit_bzero(body, strlen(body));
	free(body);
	if (rv == -1)
		free(st);
	return (rv);
}

int
creds_sts_fetch(struct httpc *hc, const struct creds_plan *p,
    creds_done_cb *done)
{
	struct creds_got	keys;

	memset(&keys, 0, sizeof keys);
	if (p->kind == CREDS_WEB_IDENTITY)
		return (creds_sts_call(hc, p, p->role_arn, p->session_name,
		    NULL, p->duration, p->token_file, &keys, done));
	if (p->src == CREDS_WEB_IDENTITY)
		return (creds_sts_call(hc, p, p->src_role_arn,
		    p->src_session_name, NULL, p->src_duration, p->token_file,
		    &keys, done));
	keys.access_key_id = p->access_key_id;
	keys.secret_access_key = p->secret_access_key;
	keys.session_token = p->session_token;
	return (creds_sts_call(hc, p, p->role_arn, p->session_name,
	    p->external_id, p->duration, NULL, &keys, done));
}

int
creds_sts_role_fetch(struct httpc *hc, const struct creds_plan *plan,
    const struct creds_role *role, const struct creds_got *src,
    creds_done_cb *done)
{
	/* libcurl copies the keys: creds_sts_call() keeps none of src. */
	return (creds_sts_call(hc, plan, role->role_arn, role->session_name,
	    role->external_id, role->duration, NULL, src, done));
}
