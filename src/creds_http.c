/*
 * creds_http.c - the two credential endpoints reached over HTTP, through
 * the worker's own httpc (libcurl multi on its event loop):
 *
 * Container credentials (AWS SDKs and Tools Reference Guide, "Container
 * credential provider"): GET the full URL, with the authorization token
 * (AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, re-read at every fetch since
 * EKS Pod Identity rotates it, else AWS_CONTAINER_AUTHORIZATION_TOKEN) as
 * the Authorization header; the answer is {AccessKeyId, SecretAccessKey,
 * Token, Expiration}.
 *
 * EC2 instance metadata, IMDSv2 only (EC2 User Guide, "Use the Instance
 * Metadata Service to access instance metadata" and "Retrieve security
 * credentials from instance metadata"): PUT /latest/api/token with
 * X-aws-ec2-metadata-token-ttl-seconds, then with X-aws-ec2-metadata-
 * token GET /latest/meta-data/iam/security-credentials/ (the role's
 * name) and .../ROLE (the credentials, with Code "Success"), or, for
 * the region, /latest/meta-data/placement/region.  A session
 * token is asked for at every renewal: renewals are minutes apart, and
 * no IMDSv1 fallback exists to hide a token problem.
 */
#include "config.h"

#include <arpa/inet.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "outboxd.h"
#include "broker.h"
#include "creds.h"

#define CREDS_CONTAINER_TIMEOUT	5000L	/* ms, as the SDKs' 2..5 s */
#define CREDS_IMDS_TIMEOUT	2000L	/* ms, per request */
#define CREDS_IMDS_TTL		21600	/* s, the session token's */
#define CREDS_TOKEN_MAX		16384	/* bytes of a token file */

enum creds_step { STEP_CONTAINER, STEP_TOKEN, STEP_ROLE, STEP_IMDS_CREDS,
	STEP_REGION };

struct creds_http {
	struct httpc	*hc;
	creds_done_cb	*done;
	creds_region_cb	*region_done;	/* the region, not credentials */
	enum creds_step	 step;
	char		*base;		/* IMDS endpoint */
	char		*token;		/* IMDS session token */
	char		 role[256];
};

static void	creds_http_reply(const struct httpc_response *, void *);

static void
creds_http_free(void *arg)
{
	struct creds_http	*ch = arg;

	if (ch->token != NULL) {
		explicit_bzero(ch->token, strlen(ch->token));
		free(ch->token);
	}
	free(ch->base);
	free(ch);
}

static int
creds_http_send(struct creds_http *ch, const char *method, const char *url,
    struct curl_slist *h, long timeout)
{
	struct httpc_request	r;

	memset(&r, 0, sizeof r);
	r.url = url;
	r.method = method;
	r.headers = h;
	r.body = "";
	r.timeout = timeout;
	r.arg_free = creds_http_free;
	return (httpc_post(ch->hc, &r, creds_http_reply, ch));
}

/* The next IMDS request after step; -1 if it could not be started. */
static int
creds_imds_next(struct creds_http *ch)
{
	struct curl_slist	*h = NULL;
	char			 url[1024];

	switch (ch->step) {
	case STEP_TOKEN:
		snprintf(url, sizeof url, "%s/latest/api/token", ch->base);
		if (httpc_header(&h, "X-aws-ec2-metadata-token-ttl-seconds: "
		    "%d", CREDS_IMDS_TTL) == -1)
			return (-1);
		return (creds_http_send(ch, "PUT", url, h,
		    CREDS_IMDS_TIMEOUT));
	case STEP_ROLE:
		snprintf(url, sizeof url,
		    "%s/latest/meta-data/iam/security-credentials/", ch->base);
		break;
	case STEP_REGION:
		snprintf(url, sizeof url, "%s/latest/meta-data/placement/region",
		    ch->base);
		break;
	default:
		snprintf(url, sizeof url,
		    "%s/latest/meta-data/iam/security-credentials/%s",
		    ch->base, ch->role);
		break;
	}
	if (httpc_header(&h, "X-aws-ec2-metadata-token: %s", ch->token) == -1)
		return (-1);
	return (creds_http_send(ch, "GET", url, h, CREDS_IMDS_TIMEOUT));
}

static const char *
creds_step_name(enum creds_step s)
{
	switch (s) {
	case STEP_CONTAINER:
		return ("container credentials endpoint");
	case STEP_TOKEN:
		return ("instance metadata session token (PUT /latest/api/"
		    "token)");
	case STEP_ROLE:
		return ("instance metadata role listing");
	case STEP_REGION:
		return ("instance metadata region (placement/region)");
	default:
		return ("instance metadata credentials");
	}
}

static void
creds_http_reply(const struct httpc_response *resp, void *arg)
{
	struct creds_http	*ch = arg;
	creds_done_cb		*done = ch->done;
	creds_region_cb		*region_done = ch->region_done;
	const char		*what = creds_step_name(ch->step);
	char			 err[300], region[64];
	size_t			 n;

	if (resp->curl_code != 0) {
		snprintf(err, sizeof err, "%s: %s", what, resp->curl_error);
		goto fail;
	}
	if (resp->status != 200) {
		/* The body is not quoted: it is the server's to fill. */
		snprintf(err, sizeof err, "%s: HTTP %ld%s", what, resp->status,
		    ch->step == STEP_ROLE && resp->status == 404 ?
		    " (no IAM role is attached to the instance)" : "");
		goto fail;
	}
	switch (ch->step) {
	case STEP_CONTAINER:
	case STEP_IMDS_CREDS:
		creds_json_done(resp->body, resp->body_len, what, done);
		creds_http_free(ch);
		return;
	case STEP_TOKEN:
		n = strcspn(resp->body, "\r\n");
		if (n == 0 || (ch->token = strndup(resp->body, n)) == NULL) {
			snprintf(err, sizeof err, "%s: empty answer", what);
			goto fail;
		}
		ch->step = region_done != NULL ? STEP_REGION : STEP_ROLE;
		break;
	case STEP_REGION:
		/* A region code: "us-east-1", "ap-southeast-2". */
		n = strcspn(resp->body, "\r\n");
		if (!creds_region_ok(resp->body, n) || n >= sizeof region) {
			snprintf(err, sizeof err, "%s: the answer is no region "
			    "name", what);
			goto fail;
		}
		memcpy(region, resp->body, n);
		region[n] = '\0';
		creds_http_free(ch);
		region_done(region, NULL);
		return;
	case STEP_ROLE:
		/* One role per instance profile: the first line. */
		n = strcspn(resp->body, "\r\n");
		if (n == 0 || n >= sizeof ch->role ||
		    strcspn(resp->body, "/?#% ") < n) {
			snprintf(err, sizeof err, "%s: no role name in the "
			    "answer", what);
			goto fail;
		}
		memcpy(ch->role, resp->body, n);
		ch->role[n] = '\0';
		ch->step = STEP_IMDS_CREDS;
		break;
	}
	if (creds_imds_next(ch) == -1) {
		snprintf(err, sizeof err, "%s: the request could not be "
		    "started", creds_step_name(ch->step));
		goto fail;
	}
	return;
fail:
	creds_http_free(ch);
	if (region_done != NULL)
		region_done(NULL, err);
	else
		done(NULL, err);
}

/* The token file's text, trailing white space cut; NULL with err. */
static char *
creds_token_file(const char *path, char *err, size_t errlen)
{
	FILE	*f;
	char	*buf;
	size_t	 n;

	if ((buf = malloc(CREDS_TOKEN_MAX + 1)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return (NULL);
	}
	/* A small local file (a projected volume): read at once. */
	if ((f = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "cannot open AWS_CONTAINER_AUTHORIZATION"
		    "_TOKEN_FILE %s: %m", path);
		free(buf);
		return (NULL);
	}
	n = fread(buf, 1, CREDS_TOKEN_MAX + 1, f);
	fclose(f);
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		n--;
	buf[n < CREDS_TOKEN_MAX ? n : CREDS_TOKEN_MAX] = '\0';
	if (n == 0 || n > CREDS_TOKEN_MAX || strlen(buf) != n ||
	    strpbrk(buf, "\r\n") != NULL) {
		snprintf(err, errlen, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE "
		    "%s is empty, too long or holds a line break", path);
		explicit_bzero(buf, CREDS_TOKEN_MAX + 1);
		free(buf);
		return (NULL);
	}
	return (buf);
}

int
creds_container_fetch(struct httpc *hc, const struct creds_plan *p,
    creds_done_cb *done)
{
	struct creds_http	*ch;
	struct curl_slist	*h = NULL;
	char			*tok = NULL, err[512];
	int			 rv;

	if (p->auth_token_file != NULL &&
	    (tok = creds_token_file(p->auth_token_file, err, sizeof err)) ==
	    NULL) {
		done(NULL, err);
		return (0);
	}
	if ((ch = calloc(1, sizeof *ch)) == NULL) {
		free(tok);
		return (-1);
	}
	ch->hc = hc;
	ch->done = done;
	ch->step = STEP_CONTAINER;
	rv = 0;
	if (tok != NULL || p->auth_token != NULL)
		rv = httpc_header(&h, "Authorization: %s",
		    tok != NULL ? tok : p->auth_token);
	if (tok != NULL) {
		explicit_bzero(tok, strlen(tok));
		free(tok);
	}
	if (rv == -1 || creds_http_send(ch, "GET", p->url, h,
	    CREDS_CONTAINER_TIMEOUT) == -1) {
		creds_http_free(ch);
		return (-1);
	}
	return (0);
}

/* An IMDSv2 exchange at base: the session token, then the credentials
 * (done) or the region (region_done). */
static int
creds_imds_start(struct httpc *hc, const char *base, creds_done_cb *done,
    creds_region_cb *region_done)
{
	struct creds_http	*ch;

	if ((ch = calloc(1, sizeof *ch)) == NULL)
		return (-1);
	ch->hc = hc;
	ch->done = done;
	ch->region_done = region_done;
	ch->step = STEP_TOKEN;
	if ((ch->base = strdup(base)) == NULL || creds_imds_next(ch) == -1) {
		creds_http_free(ch);
		return (-1);
	}
	return (0);
}

int
creds_imds_fetch(struct httpc *hc, const struct creds_plan *p,
    creds_done_cb *done)
{
	return (creds_imds_start(hc, p->url, done, NULL));
}

int
creds_imds_region_fetch(struct httpc *hc, const char *base,
    creds_region_cb *done)
{
	return (creds_imds_start(hc, base, NULL, done));
}

int
creds_container_url_ok(const char *url)
{
	static const char *const hosts[] = { "localhost", "169.254.170.2",
	    "169.254.170.23", "[fd00:ec2::23]", "[::1]" };
	struct in_addr	 a4;
	const char	*h;
	char		 host[256];
	size_t		 n, i;

	if (strncasecmp(url, "https://", 8) == 0)
		return (url[8] != '\0' ? 0 : -1);
	if (strncasecmp(url, "http://", 7) != 0)
		return (-1);
	h = url + 7;
	n = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/?#");
	if (n == 0 || n >= sizeof host || strcspn(h, "@/") < n)
		return (-1);
	memcpy(host, h, n);
	host[n] = '\0';
	for (i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
		if (strcasecmp(host, hosts[i]) == 0)
			return (0);
	/* All of 127.0.0.0/8 is loopback. */
	if (inet_pton(AF_INET, host, &a4) == 1 &&
	    (ntohl(a4.s_addr) >> 24) == 127)
		return (0);
	return (-1);
}
