/*
 * gcp_auth.c - access tokens for Google APIs the way Google's client
 * libraries find them (Application Default Credentials, google-auth's
 * order): the file named by GOOGLE_APPLICATION_CREDENTIALS, else the
 * well-known file gcloud writes, else the metadata server of GCE and
 * GKE (Compute Engine: "Access tokens" from
 * instance/service-accounts/default/token).  A file is a service-account
 * key, whose RS256-signed JWT is exchanged at its token_uri (Google
 * OAuth 2.0 for Server to Server Applications; RFC 7523), or an
 * authorized_user or external_account file (gcp_external.c).
 *
 * One token per process (each relay its own, after fork), fetched over
 * the caller's httpc so that the loop never waits.  A token is refreshed
 * while it still serves, well before it expires, as google-auth does
 * (it refreshes 3 min 45 s early; a short-lived token early by half its
 * life); publishes wait for a token only when none is usable.  A timer
 * does the early refresh of an idle relay too, so that its first
 * publish after a long quiet spell finds a fresh token.
 *
 * No key, assertion or token is ever logged or put in an error: the
 * errors name the file and the endpoint only.
 */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/event.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "outboxd.h"
#include "broker.h"
#include "creds.h"

#define GCP_KEY_FILE_MAX	(64 * 1024)	/* bytes of a key file */
#define GCP_DEFAULT_TOKEN_URI	"https://oauth2.googleapis.com/token"
#define GCP_METADATA_HOST	"metadata.google.internal"
#define GCP_METADATA_PATH	\
	"/computeMetadata/v1/instance/service-accounts/default/token"
#define GCP_REFRESH_EARLY_MS	(225 * 1000L)	/* google-auth's threshold */
#define GCP_STALE_MS		(30 * 1000L)	/* not sent closer to expiry */
#define GCP_RETRY_MS		1000L	/* after a failed early refresh */
#define GCP_TIMER_RETRY_MS	(5 * 1000L)	/* the timer's, idle */
#define GCP_TOKEN_MAX		4096	/* bytes of an access token */
#define GCP_WELL_KNOWN		"application_default_credentials.json"

struct gcp_waiter {
	gcp_token_cb		*cb;
	void			*arg;
	void			(*arg_free)(void *);
	struct gcp_waiter	*next;
};

enum gcp_source { GCP_NONE, GCP_KEY, GCP_METADATA, GCP_CRED };

static struct gcp_auth {
	pid_t			 pid;
	enum gcp_source		 source;
	struct gcp_sa_key	 key;
	struct gcp_cred		 cred;		/* GCP_CRED's */
	char			*metadata_url;
	char			*token;
	int64_t			 refresh_ms;	/* monotonic: fetch again */
	int64_t			 stale_ms;	/* monotonic: no longer sent */
	int64_t			 retry_ms;	/* monotonic: early refresh */
	int			 fetching;
	struct gcp_waiter	*waiters;
	struct httpc		*hc;		/* the last caller's */
	long			 timeout;	/* its ms for a fetch */
	struct event		*timer;		/* early refresh when idle */
} ga;

/* A key file that cannot be read fails every call: one line a while. */
static struct log_limit	gcp_load_limit;

static int64_t
gcp_now_ms(void)
{
	return clock_mono_us() / 1000;
}

/* ---- the pure parts ---------------------------------------------------- */

static char *
gcp_strdup_json(const cJSON *o, const char *name)
{
	const cJSON	*v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) && v->valuestring[0] != '\0' ?
	    strdup(v->valuestring) : NULL;
}

void
gcp_sa_key_clear(struct gcp_sa_key *k)
{
	free(k->client_email);
	free(k->private_key_id);
	free(k->token_uri);
	EVP_PKEY_free(k->pkey);
	memset(k, 0, sizeof(*k));
}

/* Google's key files are never encrypted; without this callback
 * OpenSSL would ask for a pass phrase on the terminal, blocking the
 * loop. */
static int
gcp_no_passphrase(char *buf, int size, int rwflag, void *arg)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)arg;
	return -1;
}

int
gcp_sa_key_parse(const char *json, size_t len, struct gcp_sa_key *k,
    char *err, size_t errlen)
{
	cJSON		*root;
	const cJSON	*v;
	BIO		*bio;
	const char	*why = NULL;

	memset(k, 0, sizeof(*k));
	if ((root = cJSON_ParseWithLength(json, len)) == NULL ||
	    !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		snprintf(err, errlen, "not a JSON object");
		return -1;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "type");
	if (!cJSON_IsString(v) || strcmp(v->valuestring, "service_account")
	    != 0)
		why = "type is not \"service_account\" (outboxd takes only "
		    "service-account keys)";
	else if ((k->client_email = gcp_strdup_json(root, "client_email")) ==
	    NULL)
		why = "no client_email";
	else if (!cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(root,
	    "private_key")))
		why = "no private_key";
	else if (strstr(v->valuestring, "ENCRYPTED") != NULL)
		why = "private_key is encrypted (Google's key files never are)";
	else if ((bio = BIO_new_mem_buf(v->valuestring, -1)) == NULL)
		why = "out of memory";
	else {
		k->pkey = PEM_read_bio_PrivateKey(bio, NULL,
		    gcp_no_passphrase, NULL);
		BIO_free(bio);
		if (k->pkey == NULL)
			why = "private_key is not a PEM private key";
		else if (EVP_PKEY_base_id(k->pkey) != EVP_PKEY_RSA)
			why = "private_key is not an RSA key";
	}
	if (why == NULL) {
		k->private_key_id = gcp_strdup_json(root, "private_key_id");
		k->token_uri = gcp_strdup_json(root, "token_uri");
		if (k->token_uri == NULL &&
		    (k->token_uri = strdup(GCP_DEFAULT_TOKEN_URI)) == NULL)
			why = "out of memory";
		else if (strncmp(k->token_uri, "https://", 8) != 0 &&
		    strncmp(k->token_uri, "http://", 7) != 0)
			why = "token_uri is not an http:// or https:// URL";
	}
	/* The private key's text is in the tree: wipe it. */
	if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(root,
	    "private_key")))
		explicit_bzero(v->valuestring, strlen(v->valuestring));
	cJSON_Delete(root);
	if (why != NULL) {
		gcp_sa_key_clear(k);
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	return 0;
}

/* len bytes as base64url without padding (RFC 7515, 2): caller frees. */
static char *
gcp_b64url(const unsigned char *p, size_t len)
{
	char	*out;
	size_t	 n, i;

	if ((out = malloc((len + 2) / 3 * 4 + 1)) == NULL)
		return NULL;
	EVP_EncodeBlock((unsigned char *)out, p, (int)len);
	n = strlen(out);
	while (n > 0 && out[n - 1] == '=')
		out[--n] = '\0';
	for (i = 0; i < n; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	return out;
}

/* A JSON object as base64url of its compact text; root is freed. */
static char *
gcp_b64url_json(cJSON *root)
{
	char	*text, *out;

	text = root != NULL ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	if (text == NULL)
		return NULL;
	out = gcp_b64url((unsigned char *)text, strlen(text));
	free(text);
	return out;
}

char *
gcp_jwt_assertion(const struct gcp_sa_key *k, int64_t now_s)
{
	cJSON		*h, *c;
	char		*hb = NULL, *cb = NULL, *input = NULL, *sb = NULL;
	char		*jwt = NULL;
	unsigned char	*sig = NULL;
	size_t		 siglen = 0;
	EVP_MD_CTX	*ctx = NULL;

	if (k->pkey == NULL || k->client_email == NULL || k->token_uri == NULL)
		return NULL;
	h = cJSON_CreateObject();
	c = cJSON_CreateObject();
	if (h == NULL || c == NULL ||
	    cJSON_AddStringToObject(h, "alg", "RS256") == NULL ||
	    cJSON_AddStringToObject(h, "typ", "JWT") == NULL ||
	    (k->private_key_id != NULL && cJSON_AddStringToObject(h, "kid",
	    k->private_key_id) == NULL) ||
	    cJSON_AddStringToObject(c, "iss", k->client_email) == NULL ||
	    cJSON_AddStringToObject(c, "scope", GCP_AUTH_SCOPE) == NULL ||
	    cJSON_AddStringToObject(c, "aud", k->token_uri) == NULL ||
	    cJSON_AddNumberToObject(c, "iat", (double)now_s) == NULL ||
	    cJSON_AddNumberToObject(c, "exp", (double)(now_s +
	    GCP_AUTH_JWT_LIFETIME_S)) == NULL) {
		cJSON_Delete(h);
		cJSON_Delete(c);
		return NULL;
	}
	hb = gcp_b64url_json(h);
	cb = gcp_b64url_json(c);
	if (hb == NULL || cb == NULL || asprintf(&input, "%s.%s", hb, cb) ==
	    -1) {
		input = NULL;
		goto done;
	}
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k->pkey) != 1 ||
	    EVP_DigestSign(ctx, NULL, &siglen, (unsigned char *)input,
	    strlen(input)) != 1 || (sig = malloc(siglen)) == NULL ||
	    EVP_DigestSign(ctx, sig, &siglen, (unsigned char *)input,
	    strlen(input)) != 1)
		goto done;
	if ((sb = gcp_b64url(sig, siglen)) == NULL ||
	    asprintf(&jwt, "%s.%s", input, sb) == -1)
		jwt = NULL;
done:
	EVP_MD_CTX_free(ctx);
	free(hb);
	free(cb);
	free(input);
	free(sig);
	free(sb);
	return jwt;
}

void
gcp_free_secret(char *s)
{
	if (s != NULL) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

int
gcp_token_valid(const char *t)
{
	/* A token goes into an HTTP header: visible ASCII only. */
	return t[0] != '\0' && strlen(t) <= GCP_TOKEN_MAX && strspn(t,
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	    "-._~+/=") == strlen(t);
}

char *
gcp_token_parse(const char *body, size_t len, long *expires_in)
{
	cJSON		*root;
	const cJSON	*t, *e, *ty;
	char		*tok = NULL;

	if (body == NULL || (root = cJSON_ParseWithLength(body, len)) == NULL)
		return NULL;
	t = cJSON_GetObjectItemCaseSensitive(root, "access_token");
	e = cJSON_GetObjectItemCaseSensitive(root, "expires_in");
	ty = cJSON_GetObjectItemCaseSensitive(root, "token_type");
	if (cJSON_IsString(t) && cJSON_IsNumber(e) && e->valuedouble >= 1 &&
	    e->valuedouble <= 86400 * 7 && (ty == NULL || (cJSON_IsString(ty) &&
	    strcasecmp(ty->valuestring, "Bearer") == 0)) &&
	    gcp_token_valid(t->valuestring)) {
		tok = strdup(t->valuestring);
		*expires_in = (long)e->valuedouble;
	}
	if (cJSON_IsString(t))
		explicit_bzero(t->valuestring, strlen(t->valuestring));
	cJSON_Delete(root);
	return tok;
}

/* ---- one process's token ----------------------------------------------- */

static void
gcp_forget_token(void)
{
	gcp_free_secret(ga.token);
	ga.token = NULL;
}

/* Read the ADC file path into ga's key or cred (by its type), setting
 * ga.source; -1 with "path: why" in err. */
static int
gcp_adc_read(const char *path, char *err, size_t errlen)
{
	char		 why[200], *buf;
	cJSON		*root;
	const cJSON	*t;
	ssize_t		 n;
	size_t		 len = 0;
	int		 fd, sa, rv;

	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if ((buf = malloc(GCP_KEY_FILE_MAX + 1)) == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	while (len <= GCP_KEY_FILE_MAX && (n = read(fd, buf + len,
	    GCP_KEY_FILE_MAX + 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	/* The type decides the parser; each refuses what is not its. */
	root = len <= GCP_KEY_FILE_MAX ? cJSON_ParseWithLength(buf, len) :
	    NULL;
	t = cJSON_GetObjectItemCaseSensitive(root, "type");
	sa = !cJSON_IsString(t) || strcmp(t->valuestring,
	    "service_account") == 0;
	cJSON_Delete(root);
	if (len > GCP_KEY_FILE_MAX) {
		snprintf(why, sizeof(why), "larger than %d bytes",
		    GCP_KEY_FILE_MAX);
		rv = -1;
	} else if (sa)
		rv = gcp_sa_key_parse(buf, len, &ga.key, why, sizeof(why));
	else
		rv = gcp_cred_parse(buf, len, &ga.cred, why, sizeof(why));
	explicit_bzero(buf, len);
	free(buf);
	if (rv == -1) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -1;
	}
	ga.source = sa ? GCP_KEY : GCP_CRED;
	return 0;
}

/* Forget what gcp_adc_read() read. */
static void
gcp_adc_clear(void)
{
	gcp_sa_key_clear(&ga.key);
	gcp_cred_clear(&ga.cred);
	ga.source = GCP_NONE;
}

/* ADC's well-known file for user, if it exists (caller frees). */
static char *
gcp_adc_well_known(const char *user)
{
	const char	*v = getenv("CLOUDSDK_CONFIG"), *home;
	struct stat	 st;
	char		*s;

	if (v != NULL && *v != '\0') {
		if (asprintf(&s, "%s/%s", v, GCP_WELL_KNOWN) == -1)
			return NULL;
	} else {
		if ((home = creds_home(user)) == NULL || asprintf(&s, "%s/.config/gcloud/%s", home,
		    GCP_WELL_KNOWN) == -1)
			return NULL;
	}
	if (stat(s, &st) == -1 && errno == ENOENT) {
		free(s);
		return NULL;
	}
	return s;
}

int
gcp_adc_find(const char *user, char **file, char *desc, size_t desclen,
    char *err, size_t errlen)
{
	const char	*env = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	const char	*host = getenv("GCE_METADATA_HOST");
	const char	*how;
	char		 what[600];
	struct gcp_auth	 saved;
	int		 rv;

	*file = NULL;
	if (env != NULL && *env != '\0') {
		how = "GOOGLE_APPLICATION_CREDENTIALS=";
		*file = strdup(env);
	} else {
		how = "the well-known file ";
		*file = gcp_adc_well_known(user);
	}
	if (*file == NULL) {
		snprintf(desc, desclen, "the metadata server (%s)",
		    host != NULL && *host != '\0' ? host : GCP_METADATA_HOST);
		return 0;
	}
	/* Parsed into a scratch ga: this process's own stays as it is. */
	saved = ga;
	memset(&ga, 0, sizeof(ga));
	if ((rv = gcp_adc_read(*file, what, sizeof(what))) == -1)
		snprintf(err, errlen, "Google credentials: %s%s", how, what);
	else {
		if (ga.source == GCP_KEY)
			snprintf(what, sizeof(what), "service account %s, "
			    "tokens from %s", ga.key.client_email,
			    ga.key.token_uri);
		else
			gcp_cred_describe(&ga.cred, what, sizeof(what));
		snprintf(desc, desclen, "%s (%s%s)", what, how, *file);
	}
	gcp_adc_clear();
	ga = saved;
	if (rv == -1) {
		free(*file);
		*file = NULL;
	}
	return rv;
}

/* Decide where tokens come from, once a process, from file (NULL: the
 * metadata server); -1 with why in err (tried again at the next call: a
 * file may be fixed). */
static int
gcp_auth_load(const char *file, char *err, size_t errlen)
{
	const char	*host = getenv("GCE_METADATA_HOST");
	char		 what[600];

	if (ga.pid != getpid()) {
		/* A child: nothing of its parent's (which has none). */
		memset(&ga, 0, sizeof(ga));
		ga.pid = getpid();
	}
	if (ga.source != GCP_NONE)
		return 0;
	if (file == NULL) {
		if (asprintf(&ga.metadata_url, "http://%s%s", host != NULL &&
		    *host != '\0' ? host : GCP_METADATA_HOST,
		    GCP_METADATA_PATH) == -1) {
			ga.metadata_url = NULL;
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		ga.source = GCP_METADATA;
		return 0;
	}
	if (gcp_adc_read(file, what, sizeof(what)) == -1) {
		snprintf(err, errlen, "Google credentials: %.260s", what);
		return -1;
	}
	if (ga.source == GCP_KEY)
		log_info("Google credentials: service account %s, tokens from "
		    "%s", ga.key.client_email, ga.key.token_uri);
	else {
		gcp_cred_describe(&ga.cred, what, sizeof(what));
		log_info("Google credentials: %s", what);
	}
	return 0;
}

static int	gcp_auth_fetch(struct httpc *, long, char *, size_t);
static void	gcp_auth_arm(int64_t);

/* The timer: fetch the next token while this one serves, as a publish
 * would, if none is coming; a token gone stale waits for a publish. */
static void
gcp_auth_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	char	err[300];

	(void)fd;
	(void)what;
	(void)arg;
	if (ga.fetching || ga.token == NULL || ga.hc == NULL)
		return;
	if (gcp_auth_fetch(ga.hc, ga.timeout, err, sizeof(err)) == -1) {
		log_limited(&gcp_load_limit, LOG_LEVEL_WARN, "%s", err);
		ga.retry_ms = gcp_now_ms() + GCP_RETRY_MS;
		if (gcp_now_ms() + GCP_TIMER_RETRY_MS < ga.stale_ms)
			gcp_auth_arm(gcp_now_ms() + GCP_TIMER_RETRY_MS);
	}
}

/* Run the timer at at_ms (monotonic), on the caller's loop. */
static void
gcp_auth_arm(int64_t at_ms)
{
	struct timeval	tv;
	int64_t		d = at_ms - gcp_now_ms();

	if (ga.hc == NULL || (ga.timer == NULL && (ga.timer =
	    evtimer_new(httpc_base(ga.hc), gcp_auth_timer_cb, NULL)) == NULL))
		return;		/* the next publish refreshes instead */
	if (d < 0)
		d = 0;
	tv.tv_sec = (time_t)(d / 1000);
	tv.tv_usec = (suseconds_t)(d % 1000 * 1000);
	evtimer_add(ga.timer, &tv);
}

/* Tell every waiter (a new list may grow meanwhile: they publish). */
static void
gcp_auth_wake(const char *token, const char *error, int reason)
{
	struct gcp_waiter	*w = ga.waiters, *next;

	ga.waiters = NULL;
	for (; w != NULL; w = next) {
		next = w->next;
		w->cb(token, error, reason, w->arg);
		free(w);
	}
}


/* A fetch ended: the token (taken over) and its life in s, or why not. */
static void
gcp_auth_got(char *tok, long life, const char *err, int reason)
{
	int64_t		 now = gcp_now_ms();
	long		 early, stale;

	ga.fetching = 0;
	if (tok != NULL) {
		gcp_forget_token();
		ga.token = tok;
		life *= 1000;
		early = life / 2 < GCP_REFRESH_EARLY_MS ? life / 2 :
		    GCP_REFRESH_EARLY_MS;
		stale = life / 4 < GCP_STALE_MS ? life / 4 : GCP_STALE_MS;
		ga.refresh_ms = now + life - early;
		ga.stale_ms = now + life - stale;
		log_debug("Google access token for %ld s", life / 1000);
		gcp_auth_arm(ga.refresh_ms);
		gcp_auth_wake(ga.token, NULL, 0);
		return;
	}
	ga.retry_ms = now + GCP_RETRY_MS;
	/* An early refresh failed: the timer tries again while the token
	 * serves (the next publish may come first). */
	if (ga.token != NULL && now + GCP_TIMER_RETRY_MS < ga.stale_ms)
		gcp_auth_arm(now + GCP_TIMER_RETRY_MS);
	gcp_auth_wake(NULL, err, reason);
}

static void
gcp_auth_fetched(const struct httpc_response *res, void *arg)
{
	char	 err[300];
	char	*tok = NULL;
	long	 life = 0;
	int	 reason = 0;

	(void)arg;
	if (res->curl_code == 0 && res->status == 200)
		tok = gcp_token_parse(res->body, res->body_len, &life);
	if (tok == NULL)
		reason = gcp_reply_error(res, ga.source == GCP_KEY ?
		    "token endpoint" : "metadata server", 1, err, sizeof(err));
	gcp_auth_got(tok, life, err, reason);
}

/* httpc_free() aborted the fetch: the waiters' args go with it. */
static void
gcp_auth_aborted(void *arg)
{
	struct gcp_waiter	*w = ga.waiters, *next;

	(void)arg;
	ga.fetching = 0;
	ga.waiters = NULL;
	for (; w != NULL; w = next) {
		next = w->next;
		if (w->arg_free != NULL)
			w->arg_free(w->arg);
		free(w);
	}
}

static void
gcp_auth_cred_aborted(void)
{
	gcp_auth_aborted(NULL);
}

/* Start a token request; -1 with why in err if it could not start. */
static int
gcp_auth_fetch(struct httpc *hc, long timeout, char *err, size_t errlen)
{
	static const char	 grant[] = "grant_type=urn%3Aietf%3Aparams%3A"
				    "oauth%3Agrant-type%3Ajwt-bearer&assertion=";
	struct httpc_request	 r;
	struct curl_slist	*h = NULL;
	char			*jwt = NULL, *body = NULL;
	int			 rv;

	if (ga.source == GCP_CRED) {
		if ((rv = gcp_cred_fetch(&ga.cred, hc, timeout, gcp_auth_got,
		    gcp_auth_cred_aborted)) == -1)
			snprintf(err, errlen, "Google credentials: cannot start "
			    "a token request");
		else
			ga.fetching = 1;
		return rv;
	}
	memset(&r, 0, sizeof(r));
	r.timeout = timeout;
	r.arg_free = gcp_auth_aborted;
	if (ga.source == GCP_METADATA) {
		r.url = ga.metadata_url;
		r.method = "GET";
		httpc_header(&h, "Metadata-Flavor: Google");
	} else {
		if ((jwt = gcp_jwt_assertion(&ga.key, clock_wall_us() /
		    1000000)) == NULL || asprintf(&body, "%s%s", grant, jwt) ==
		    -1) {
			body = NULL;
			snprintf(err, errlen, "Google credentials: cannot sign "
			    "the JWT assertion");
			rv = -1;
			goto done;
		}
		r.url = ga.key.token_uri;
		r.body = body;
		r.body_len = strlen(body);
		httpc_header(&h, "Content-Type: "
		    "application/x-www-form-urlencoded");
	}
	if (h == NULL) {
		snprintf(err, errlen, "out of memory");
		rv = -1;
		goto done;
	}
	r.headers = h;
	if ((rv = httpc_post(hc, &r, gcp_auth_fetched, &ga)) == -1)
		snprintf(err, errlen, "Google credentials: cannot start a "
		    "token request");
	else
		ga.fetching = 1;
done:
	gcp_free_secret(jwt);
	gcp_free_secret(body);
	return rv;
}

int
gcp_auth_token(struct httpc *hc, long timeout, const char *file,
    const char **token,
    gcp_token_cb *cb, void *arg, void (*arg_free)(void *))
{
	struct gcp_waiter	*w, **tail;
	char			 err[300];
	int64_t			 now = gcp_now_ms();

	*token = NULL;
	if (gcp_auth_load(file, err, sizeof(err)) == -1) {
		log_limited(&gcp_load_limit, LOG_LEVEL_WARN,
		    "%s", err);
		return -1;
	}
	if (ga.hc != hc) {
		/* The timer runs on this caller's loop. */
		if (ga.timer != NULL)
			event_free(ga.timer);
		ga.timer = NULL;
		ga.hc = hc;
	}
	ga.timeout = timeout;
	if (ga.token != NULL && now < ga.stale_ms) {
		/* Early: fetch the next one while this one serves. */
		if (now >= ga.refresh_ms && !ga.fetching && now >= ga.retry_ms &&
		    gcp_auth_fetch(hc, timeout, err, sizeof(err)) == -1)
			ga.retry_ms = now + GCP_RETRY_MS;
		*token = ga.token;
		return 1;
	}
	if (!ga.fetching && gcp_auth_fetch(hc, timeout, err, sizeof(err)) ==
	    -1) {
		log_limited(&gcp_load_limit, LOG_LEVEL_WARN, "%s", err);
		return -1;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -1;
	w->cb = cb;
	w->arg = arg;
	w->arg_free = arg_free;
	for (tail = &ga.waiters; *tail != NULL; tail = &(*tail)->next)
		;
	*tail = w;
	return 0;
}

void
gcp_auth_stop(void)
{
	if (ga.pid != getpid())
		return;		/* nothing of this process's */
	if (ga.timer != NULL)
		event_free(ga.timer);
	gcp_forget_token();
	gcp_adc_clear();
	free(ga.metadata_url);
	gcp_auth_aborted(NULL);		/* waiters httpc_free() left */
	memset(&ga, 0, sizeof(ga));
}

void
gcp_auth_reject(const char *token)
{
	if (token != NULL && ga.token != NULL && strcmp(token, ga.token) == 0)
		gcp_forget_token();
}
