/*
 * gcp_external.c - the Application Default Credentials files other than
 * a service-account key, as Google's client libraries read them:
 *
 *   authorized_user (what `gcloud auth application-default login`
 *   writes): client_id, client_secret and refresh_token, exchanged at
 *   token_uri with grant_type=refresh_token (RFC 6749, 6; Google's
 *   "Using OAuth 2.0 for Web Server Applications", refreshing an access
 *   token).
 *
 *   external_account (workload identity federation; AIP-4117, external
 *   account credentials): a subject token read from credential_source
 *   (a file, or a URL with headers; text, or JSON with
 *   subject_token_field_name) is exchanged at token_url (Security Token
 *   Service API v1: token, RFC 8693 token exchange), and the federated
 *   token, when service_account_impersonation_url is set, for a service
 *   account's (IAM Service Account Credentials API v1:
 *   projects.serviceAccounts.generateAccessToken).  The AWS-sourced and
 *   executable-sourced kinds are refused by name.
 *
 * Also the error text of any token endpoint's reply, for gcp_auth.c too.
 *
 * The parsers and request bodies are pure (unit tests, fuzz_pubsub);
 * gcp_cred_fetch() runs the exchanges over the caller's httpc and hands
 * gcp_auth.c one access token and its lifetime.  No secret (client
 * secret, refresh token, subject token, token) is ever put in an error:
 * they name the file, the field and the endpoint only.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <openssl/evp.h>

#include "outboxd.h"
#include "broker.h"
#include "creds.h"

#define GCP_OAUTH_TOKEN_URI	"https://oauth2.googleapis.com/token"
#define GCP_STS_TOKEN_URL	"https://sts.googleapis.com/v1/token"
#define GCP_CLOUD_SCOPE		"https://www.googleapis.com/auth/cloud-platform"
#define GCP_GRANT_EXCHANGE	"urn:ietf:params:oauth:grant-type:token-exchange"
#define GCP_TOKEN_TYPE_ACCESS	"urn:ietf:params:oauth:token-type:access_token"
#define GCP_SUBJECT_MAX		(64 * 1024)	/* bytes of a subject token */
#define GCP_SOURCE_HEADERS_MAX	16

/* ---- the files ---------------------------------------------------------- */

void
gcp_cred_clear(struct gcp_cred *c)
{
	int	i;

	free(c->client_id);
	gcp_free_secret(c->client_secret);
	gcp_free_secret(c->refresh_token);
	free(c->token_uri);
	free(c->audience);
	free(c->subject_token_type);
	free(c->impersonation_url);
	free(c->user_project);
	free(c->src_file);
	free(c->src_url);
	free(c->src_field);
	for (i = 0; i < c->src_nheaders; i++)
		free(c->src_headers[i]);
	free(c->src_headers);
	memset(c, 0, sizeof(*c));
}

/* A non-empty string member's copy, or NULL. */
static char *
gcp_cred_str(const cJSON *o, const char *name)
{
	const cJSON	*v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) && v->valuestring[0] != '\0' ?
	    strdup(v->valuestring) : NULL;
}

static int
gcp_cred_is_url(const char *u)
{
	return u != NULL && (strncmp(u, "https://", 8) == 0 ||
	    strncmp(u, "http://", 7) == 0) && strpbrk(u, " \r\n\t") == NULL;
}

static const char *
gcp_cred_parse_user(const cJSON *root, struct gcp_cred *c)
{
	if ((c->client_id = gcp_cred_str(root, "client_id")) == NULL)
		return "no client_id";
	if ((c->client_secret = gcp_cred_str(root, "client_secret")) == NULL)
		return "no client_secret";
	if ((c->refresh_token = gcp_cred_str(root, "refresh_token")) == NULL)
		return "no refresh_token";
	/* gcloud writes no token_uri: Google's libraries use theirs. */
	if ((c->token_uri = gcp_cred_str(root, "token_uri")) == NULL &&
	    (c->token_uri = strdup(GCP_OAUTH_TOKEN_URI)) == NULL)
		return "out of memory";
	if (!gcp_cred_is_url(c->token_uri))
		return "token_uri is not an http:// or https:// URL";
	return NULL;
}

/* credential_source (AIP-4117): file or url (+ headers), format. */
static const char *
gcp_cred_parse_source(const cJSON *src, struct gcp_cred *c)
{
	const cJSON	*f, *t, *h, *v;
	int		 n = 0;

	if (!cJSON_IsObject(src))
		return "no credential_source object";
	if (cJSON_GetObjectItemCaseSensitive(src, "environment_id") != NULL)
		return "credential_source is AWS-sourced (environment_id): "
		    "not supported by outboxd; use a file- or URL-sourced "
		    "subject token";
	if (cJSON_GetObjectItemCaseSensitive(src, "executable") != NULL)
		return "credential_source is executable-sourced: not "
		    "supported by outboxd; use a file- or URL-sourced "
		    "subject token";
	c->src_file = gcp_cred_str(src, "file");
	c->src_url = gcp_cred_str(src, "url");
	if ((c->src_file == NULL) == (c->src_url == NULL))
		return "credential_source needs exactly one of file and url";
	if (c->src_url != NULL && !gcp_cred_is_url(c->src_url))
		return "credential_source.url is not an http:// or https:// URL";
	h = cJSON_GetObjectItemCaseSensitive(src, "headers");
	if (h != NULL && (c->src_url == NULL || !cJSON_IsObject(h)))
		return "credential_source.headers is not an object beside a url";
	if (h != NULL) {
		if (cJSON_GetArraySize(h) > GCP_SOURCE_HEADERS_MAX)
			return "credential_source.headers: more than 16";
		if ((c->src_headers = calloc(GCP_SOURCE_HEADERS_MAX,
		    sizeof(char *))) == NULL)
			return "out of memory";
		cJSON_ArrayForEach(v, h) {
			if (!cJSON_IsString(v) || v->string[0] == '\0' ||
			    strpbrk(v->string, ": \r\n\t") != NULL ||
			    strpbrk(v->valuestring, "\r\n") != NULL)
				return "credential_source.headers: a name or "
				    "value is not a header's";
			if (asprintf(&c->src_headers[n], "%s: %s", v->string,
			    v->valuestring) == -1) {
				c->src_headers[n] = NULL;
				return "out of memory";
			}
			c->src_nheaders = ++n;
		}
	}
	if ((f = cJSON_GetObjectItemCaseSensitive(src, "format")) == NULL)
		return NULL;
	t = cJSON_GetObjectItemCaseSensitive(f, "type");
	if (!cJSON_IsObject(f) || (t != NULL && !cJSON_IsString(t)))
		return "credential_source.format is not an object";
	if (t == NULL || strcmp(t->valuestring, "text") == 0)
		return NULL;
	if (strcmp(t->valuestring, "json") != 0)
		return "credential_source.format.type is neither \"text\" nor "
		    "\"json\"";
	if ((c->src_field = gcp_cred_str(f, "subject_token_field_name")) ==
	    NULL)
		return "credential_source.format is json without "
		    "subject_token_field_name";
	return NULL;
}

static const char *
gcp_cred_parse_external(const cJSON *root, struct gcp_cred *c)
{
	const cJSON	*imp, *v;
	const char	*why;

	if ((c->audience = gcp_cred_str(root, "audience")) == NULL)
		return "no audience";
	if ((c->subject_token_type = gcp_cred_str(root,
	    "subject_token_type")) == NULL)
		return "no subject_token_type";
	if ((c->token_uri = gcp_cred_str(root, "token_url")) == NULL &&
	    (c->token_uri = strdup(GCP_STS_TOKEN_URL)) == NULL)
		return "out of memory";
	if (!gcp_cred_is_url(c->token_uri))
		return "token_url is not an http:// or https:// URL";
	if ((why = gcp_cred_parse_source(cJSON_GetObjectItemCaseSensitive(root,
	    "credential_source"), c)) != NULL)
		return why;
	c->impersonation_url = gcp_cred_str(root,
	    "service_account_impersonation_url");
	if (c->impersonation_url != NULL &&
	    !gcp_cred_is_url(c->impersonation_url))
		return "service_account_impersonation_url is not an http:// "
		    "or https:// URL";
	c->lifetime_s = 3600;
	imp = cJSON_GetObjectItemCaseSensitive(root,
	    "service_account_impersonation");
	v = cJSON_GetObjectItemCaseSensitive(imp, "token_lifetime_seconds");
	if (v != NULL) {
		/* Google: 600 s to 43200 s (12 hours). */
		if (!cJSON_IsNumber(v) || v->valuedouble < 600 ||
		    v->valuedouble > 43200)
			return "service_account_impersonation."
			    "token_lifetime_seconds is not 600 to 43200";
		c->lifetime_s = (long)v->valuedouble;
	}
	/* The STS client authenticates with Basic when it has both. */
	c->client_id = gcp_cred_str(root, "client_id");
	c->client_secret = gcp_cred_str(root, "client_secret");
	if ((c->client_id == NULL) != (c->client_secret == NULL))
		return "client_id and client_secret go together";
	c->user_project = gcp_cred_str(root, "workforce_pool_user_project");
	return NULL;
}

int
gcp_cred_parse(const char *json, size_t len, struct gcp_cred *c, char *err,
    size_t errlen)
{
	cJSON		*root;
	const cJSON	*t, *v;
	const char	*why;
	char		 buf[160];

	memset(c, 0, sizeof(*c));
	if ((root = cJSON_ParseWithLength(json, len)) == NULL ||
	    !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		snprintf(err, errlen, "not a JSON object");
		return -1;
	}
	t = cJSON_GetObjectItemCaseSensitive(root, "type");
	if (!cJSON_IsString(t))
		why = "no type";
	else if (strcmp(t->valuestring, "authorized_user") == 0) {
		c->type = GCP_CRED_USER;
		why = gcp_cred_parse_user(root, c);
	} else if (strcmp(t->valuestring, "external_account") == 0) {
		c->type = GCP_CRED_EXTERNAL;
		why = gcp_cred_parse_external(root, c);
	} else {
		snprintf(buf, sizeof(buf), "type \"%.40s\" is not supported "
		    "(outboxd takes service_account, authorized_user and "
		    "external_account)", t->valuestring);
		why = buf;
	}
	/* The secrets' text is in the tree: wipe it. */
	if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(root,
	    "client_secret")))
		explicit_bzero(v->valuestring, strlen(v->valuestring));
	if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(root,
	    "refresh_token")))
		explicit_bzero(v->valuestring, strlen(v->valuestring));
	if (why != NULL) {
		snprintf(err, errlen, "%s", why);
		gcp_cred_clear(c);
	}
	cJSON_Delete(root);
	return why != NULL ? -1 : 0;
}

void
gcp_cred_describe(const struct gcp_cred *c, char *buf, size_t len)
{
	if (c->type == GCP_CRED_USER)
		snprintf(buf, len, "authorized user (client_id %.80s), tokens "
		    "from %.120s", c->client_id, c->token_uri);
	else
		snprintf(buf, len, "external account (audience %.160s), "
		    "subject token from %s %.120s, exchanged at %.120s%s%.160s",
		    c->audience, c->src_file != NULL ? "file" : "URL",
		    c->src_file != NULL ? c->src_file : c->src_url,
		    c->token_uri, c->impersonation_url != NULL ?
		    ", impersonating with " : "", c->impersonation_url != NULL ?
		    c->impersonation_url : "");
}

/* ---- the pure request and reply parts ---------------------------------- */

/* Words longer than this end an error reply's text: a token, a key, a
 * secret or an echoed form body is one long word, Google's prose has
 * none. */
#define GCP_REPLY_WORD_MAX	32

/* Text of an endpoint's error reply fit for a log line and a row's
 * last_error: printable ASCII, at most 160 bytes, an OAuth error's
 * "error: error_description", cut before its first word longer than
 * GCP_REPLY_WORD_MAX ("[...]"): an endpoint (a wrong token_uri, a
 * proxy) may echo the request, and with it the secrets it carried. */
static void
gcp_reply_text(const char *body, size_t len, char *buf, size_t size)
{
	cJSON		*root;
	const cJSON	*e, *d;
	size_t		 i, o = 0, w, word;

	buf[0] = '\0';
	if (body == NULL || len == 0)
		return;
	if ((root = cJSON_ParseWithLength(body, len)) != NULL) {
		e = cJSON_GetObjectItemCaseSensitive(root, "error");
		d = cJSON_GetObjectItemCaseSensitive(root,
		    "error_description");
		/* Google's error model (AIP-193): {"error": {"status",
		 * "message"}}, as the IAM Credentials API answers. */
		if (cJSON_IsObject(e)) {
			d = cJSON_GetObjectItemCaseSensitive(e, "message");
			e = cJSON_GetObjectItemCaseSensitive(e, "status");
		}
		if (cJSON_IsString(e)) {
			snprintf(buf, size, ": %.40s%s%.120s", e->valuestring,
			    cJSON_IsString(d) ? ": " : "", cJSON_IsString(d) ?
			    d->valuestring : "");
			body = buf;
			len = strlen(buf);
		}
		cJSON_Delete(root);
		if (body == buf)
			goto clean;
	}
	snprintf(buf, size, ": %.*s", (int)(len < 160 ? len : 160), body);
clean:
	for (i = 0, w = 0, word = 0; buf[i] != '\0'; i++) {
		if (buf[i] < ' ' || buf[i] > '~')
			continue;
		if (buf[i] == ' ') {
			w = 0;
			word = o + 1;
		} else if (++w > GCP_REPLY_WORD_MAX) {
			o = word;
			snprintf(buf + o, size - o, "[...]");
			return;
		}
		buf[o++] = buf[i];
	}
	buf[o] = '\0';
}

int
gcp_reply_error(const struct httpc_response *res, const char *what,
    int quote, char *err, size_t errlen)
{
	char	text[200];

	if (res->curl_code != 0) {
		snprintf(err, errlen, "Google credentials: %s: %s", what,
		    res->curl_error != NULL ? res->curl_error : "no answer");
		return SINK_REASON_TRANSPORT;
	}
	text[0] = '\0';
	if (quote)
		gcp_reply_text(res->body, res->body_len, text, sizeof(text));
	snprintf(err, errlen, "Google credentials: %s HTTP %ld%s", what,
	    res->status, res->status == 200 ? ": not a token reply" : text);
	return res->status == 429 ? SINK_REASON_THROTTLED : res->status >= 500 ?
	    SINK_REASON_SERVER : SINK_REASON_CLIENT;
}


char *
gcp_subject_parse(const char *text, size_t len, const char *field, char *err,
    size_t errlen)
{
	cJSON		*root;
	const cJSON	*v;
	char		*tok = NULL;

	if (field == NULL) {
		/* A file written with echo ends in a newline. */
		while (len > 0 && (text[len - 1] == '\n' || text[len - 1] ==
		    '\r' || text[len - 1] == ' ' || text[len - 1] == '\t'))
			len--;
		if (len == 0 || len > GCP_SUBJECT_MAX || memchr(text, '\0',
		    len) != NULL) {
			snprintf(err, errlen, len == 0 ? "empty" :
			    len > GCP_SUBJECT_MAX ? "larger than 64 KiB" :
			    "holds a NUL byte");
			return NULL;
		}
		if ((tok = strndup(text, len)) == NULL)
			snprintf(err, errlen, "out of memory");
		return tok;
	}
	if ((root = cJSON_ParseWithLength(text, len)) == NULL ||
	    !cJSON_IsObject(root)) {
		snprintf(err, errlen, "not a JSON object (format json)");
		cJSON_Delete(root);
		return NULL;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, field);
	if (!cJSON_IsString(v) || v->valuestring[0] == '\0' ||
	    strlen(v->valuestring) > GCP_SUBJECT_MAX)
		snprintf(err, errlen, "no string member \"%.64s\" "
		    "(subject_token_field_name)", field);
	else if ((tok = strdup(v->valuestring)) == NULL)
		snprintf(err, errlen, "out of memory");
	if (cJSON_IsString(v))
		explicit_bzero(v->valuestring, strlen(v->valuestring));
	cJSON_Delete(root);
	return tok;
}

/* Append "&name=value" (value percent-encoded, RFC 3986) to *s. */
static int
gcp_form_add(char **s, const char *name, const char *value)
{
	char	*e, *n;
	int	 r;

	if (*s == NULL || (e = curl_easy_escape(NULL, value,
	    (int)strlen(value))) == NULL)
		goto fail;
	r = asprintf(&n, "%s%s%s=%s", *s, **s != '\0' ? "&" : "", name, e);
	explicit_bzero(e, strlen(e));
	curl_free(e);
	if (r == -1)
		goto fail;
	gcp_free_secret(*s);
	*s = n;
	return 0;
fail:
	gcp_free_secret(*s);
	*s = NULL;
	return -1;
}

char *
gcp_refresh_body(const struct gcp_cred *c)
{
	char	*s = strdup("");

	gcp_form_add(&s, "grant_type", "refresh_token");
	gcp_form_add(&s, "client_id", c->client_id);
	gcp_form_add(&s, "client_secret", c->client_secret);
	gcp_form_add(&s, "refresh_token", c->refresh_token);
	return s;
}

char *
gcp_sts_body(const struct gcp_cred *c, const char *subject)
{
	char	*s = strdup(""), *opt = NULL;

	gcp_form_add(&s, "grant_type", GCP_GRANT_EXCHANGE);
	gcp_form_add(&s, "audience", c->audience);
	/* Impersonation needs a token the IAM Credentials API takes. */
	gcp_form_add(&s, "scope", c->impersonation_url != NULL ?
	    GCP_CLOUD_SCOPE : GCP_AUTH_SCOPE);
	gcp_form_add(&s, "requested_token_type", GCP_TOKEN_TYPE_ACCESS);
	gcp_form_add(&s, "subject_token", subject);
	gcp_form_add(&s, "subject_token_type", c->subject_token_type);
	/* Workforce pools bill the user project, unless a client pays. */
	if (c->user_project != NULL && c->client_id == NULL) {
		if (asprintf(&opt, "{\"userProject\":\"%s\"}",
		    c->user_project) == -1 || strpbrk(c->user_project,
		    "\"\\") != NULL) {
			free(s);
			s = NULL;
		} else
			gcp_form_add(&s, "options", opt);
		free(opt);
	}
	return s;
}

char *
gcp_iam_body(const struct gcp_cred *c)
{
	char	*s;

	if (asprintf(&s, "{\"scope\":[\"%s\"],\"lifetime\":\"%lds\"}",
	    GCP_AUTH_SCOPE, c->lifetime_s) == -1)
		return NULL;
	return s;
}

char *
gcp_iam_parse(const char *body, size_t len, int64_t now_s, long *life)
{
	cJSON		*root;
	const cJSON	*t, *e;
	char		*tok = NULL;
	int64_t		 exp;

	if (body == NULL || (root = cJSON_ParseWithLength(body, len)) == NULL)
		return NULL;
	t = cJSON_GetObjectItemCaseSensitive(root, "accessToken");
	e = cJSON_GetObjectItemCaseSensitive(root, "expireTime");
	if (cJSON_IsString(t) && gcp_token_valid(t->valuestring) &&
	    cJSON_IsString(e) && (exp = creds_time_parse(e->valuestring)) >
	    now_s && exp - now_s <= 86400 * 7) {
		tok = strdup(t->valuestring);
		*life = (long)(exp - now_s);
	}
	if (cJSON_IsString(t))
		explicit_bzero(t->valuestring, strlen(t->valuestring));
	cJSON_Delete(root);
	return tok;
}

/* ---- the exchanges ------------------------------------------------------- */

struct gcp_ext_call {
	const struct gcp_cred	*c;
	struct httpc		*hc;
	long			 timeout;
	gcp_fetched_cb		*done;
	void			(*aborted)(void);
	char			 err[300];	/* a failure before a request */
};

static void
gcp_ext_free(struct gcp_ext_call *x)
{
	free(x);
}

/* httpc_free() aborted a step: so is the fetch. */
static void
gcp_ext_aborted(void *arg)
{
	struct gcp_ext_call	*x = arg;

	x->aborted();
	gcp_ext_free(x);
}

static void
gcp_ext_fail(struct gcp_ext_call *x, const char *err, int reason)
{
	x->done(NULL, 0, err, reason);
	gcp_ext_free(x);
}

/* POST body (wiped, freed) to url; -1 if it could not start. */
static int
gcp_ext_post(struct gcp_ext_call *x, const char *url, const char *method,
    struct curl_slist *h, char *body, httpc_cb *cb)
{
	struct httpc_request	r;
	int			rv;

	memset(&r, 0, sizeof(r));
	r.url = url;
	r.method = method;
	r.headers = h;
	r.body = body;
	r.body_len = body != NULL ? strlen(body) : 0;
	r.timeout = x->timeout;
	r.arg_free = gcp_ext_aborted;
	rv = h == NULL || (method == NULL && body == NULL) ? -1 :
	    httpc_post(x->hc, &r, cb, x);
	if (h != NULL && rv == -1)
		curl_slist_free_all(h);
	gcp_free_secret(body);
	return rv;
}

static void
gcp_ext_iam_reply(const struct httpc_response *res, void *arg)
{
	struct gcp_ext_call	*x = arg;
	char			 err[300], *tok = NULL;
	long			 life = 0;
	int			 reason;

	if (res->curl_code == 0 && res->status == 200)
		tok = gcp_iam_parse(res->body, res->body_len,
		    clock_wall_us() / 1000000, &life);
	if (tok != NULL) {
		x->done(tok, life, NULL, 0);
		gcp_ext_free(x);
		return;
	}
	reason = gcp_reply_error(res, "IAM Credentials generateAccessToken",
	    1, err, sizeof(err));
	gcp_ext_fail(x, err, reason);
}

static void
gcp_ext_sts_reply(const struct httpc_response *res, void *arg)
{
	struct gcp_ext_call	*x = arg;
	struct curl_slist	*h = NULL;
	char			 err[300], *tok = NULL;
	long			 life = 0;
	int			 reason;

	if (res->curl_code == 0 && res->status == 200)
		tok = gcp_token_parse(res->body, res->body_len, &life);
	if (tok == NULL) {
		reason = gcp_reply_error(res, x->c->type == GCP_CRED_USER ?
		    "token endpoint (refresh_token)" : "STS token exchange", 1,
		    err, sizeof(err));
		gcp_ext_fail(x, err, reason);
		return;
	}
	if (x->c->impersonation_url == NULL) {
		x->done(tok, life, NULL, 0);
		gcp_ext_free(x);
		return;
	}
	httpc_header(&h, "Content-Type: application/json");
	httpc_header(&h, "Authorization: Bearer %s", tok);
	gcp_free_secret(tok);
	if (gcp_ext_post(x, x->c->impersonation_url, NULL, h,
	    gcp_iam_body(x->c), gcp_ext_iam_reply) == -1)
		gcp_ext_fail(x, "Google credentials: cannot start the IAM "
		    "Credentials request", SINK_REASON_OTHER);
}

/* The subject token is had (wiped, freed): exchange it at the STS.  -1
 * if the request could not start. */
static int
gcp_ext_exchange(struct gcp_ext_call *x, char *subject)
{
	int			 rv;
	struct curl_slist	*h = NULL;
	char			*basic, *b64 = NULL;
	size_t			 n;

	httpc_header(&h, "Content-Type: application/x-www-form-urlencoded");
	if (x->c->client_id != NULL && asprintf(&basic, "%s:%s",
	    x->c->client_id, x->c->client_secret) != -1) {
		n = strlen(basic);
		if ((b64 = malloc((n + 2) / 3 * 4 + 1)) != NULL) {
			EVP_EncodeBlock((unsigned char *)b64,
			    (unsigned char *)basic, (int)n);
			httpc_header(&h, "Authorization: Basic %s", b64);
			gcp_free_secret(b64);
		}
		explicit_bzero(basic, n);
		free(basic);
	}
	rv = gcp_ext_post(x, x->c->token_uri, NULL, h, gcp_sts_body(x->c,
	    subject), gcp_ext_sts_reply);
	gcp_free_secret(subject);
	return rv;
}

static void
gcp_ext_subject_reply(const struct httpc_response *res, void *arg)
{
	struct gcp_ext_call	*x = arg;
	char			 why[160], err[300], *sub = NULL;
	int			 reason;

	if (res->curl_code == 0 && res->status == 200) {
		if ((sub = gcp_subject_parse(res->body, res->body_len,
		    x->c->src_field, why, sizeof(why))) != NULL) {
			if (gcp_ext_exchange(x, sub) == -1)
				gcp_ext_fail(x, "Google credentials: cannot "
				    "start the STS token exchange",
				    SINK_REASON_OTHER);
			return;
		}
		snprintf(err, sizeof(err), "Google credentials: subject token "
		    "URL %.120s: %.120s", x->c->src_url, why);
		gcp_ext_fail(x, err, SINK_REASON_SERVER);
		return;
	}
	/* Not quoted: whatever that server says may hold a credential. */
	reason = gcp_reply_error(res, "subject token URL", 0, err,
	    sizeof(err));
	gcp_ext_fail(x, err, reason);
}

/* A failure found before any request, told from the loop. */
static void
gcp_ext_later(const struct httpc_response *res, void *arg)
{
	struct gcp_ext_call	*x = arg;

	(void)res;
	gcp_ext_fail(x, x->err, SINK_REASON_OTHER);
}

/* The subject token file's text (GCP_SUBJECT_MAX bytes at most), read
 * each time: the platform rotates it.  -1 with why. */
static char *
gcp_ext_read_subject(const struct gcp_cred *c, char *err, size_t errlen)
{
	char	 why[160], *buf, *tok = NULL;
	ssize_t	 n;
	size_t	 len = 0;
	int	 fd;

	if ((fd = open(c->src_file, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) ==
	    -1) {
		snprintf(err, errlen, "Google credentials: subject token file "
		    "%.160s: %s", c->src_file, strerror(errno));
		return NULL;
	}
	if ((buf = malloc(GCP_SUBJECT_MAX + 2)) == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	while (len <= GCP_SUBJECT_MAX && (n = read(fd, buf + len,
	    GCP_SUBJECT_MAX + 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	if ((tok = gcp_subject_parse(buf, len, c->src_field, why,
	    sizeof(why))) == NULL)
		snprintf(err, errlen, "Google credentials: subject token file "
		    "%.120s: %.100s", c->src_file, why);
	explicit_bzero(buf, len);
	free(buf);
	return tok;
}

int
gcp_cred_fetch(const struct gcp_cred *c, struct httpc *hc, long timeout,
    gcp_fetched_cb *done, void (*aborted)(void))
{
	struct gcp_ext_call	*x;
	struct curl_slist	*h = NULL;
	char			*sub;
	int			 i;

	if ((x = calloc(1, sizeof(*x))) == NULL)
		return -1;
	x->c = c;
	x->hc = hc;
	x->timeout = timeout;
	x->done = done;
	x->aborted = aborted;
	if (c->type == GCP_CRED_USER) {
		/* A refresh answers as a token endpoint does. */
		httpc_header(&h, "Content-Type: "
		    "application/x-www-form-urlencoded");
		if (gcp_ext_post(x, c->token_uri, NULL, h, gcp_refresh_body(c),
		    gcp_ext_sts_reply) == -1)
			goto fail;
		return 0;
	}
	if (c->src_url != NULL) {
		for (i = 0; i < c->src_nheaders; i++)
			httpc_header(&h, "%s", c->src_headers[i]);
		if (c->src_nheaders == 0)
			httpc_header(&h, "Accept: */*");
		if (gcp_ext_post(x, c->src_url, "GET", h, NULL,
		    gcp_ext_subject_reply) == -1)
			goto fail;
		return 0;
	}
	if ((sub = gcp_ext_read_subject(c, x->err, sizeof(x->err))) == NULL) {
		if (httpc_later(hc, gcp_ext_later, x, gcp_ext_aborted) == -1)
			goto fail;
		return 0;
	}
	if (gcp_ext_exchange(x, sub) == -1)
		goto fail;
	return 0;
fail:
	gcp_ext_free(x);
	return -1;
}
