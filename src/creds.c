/*
 * creds.c - the AWS credential chain: which source to use (AWS SDKs and
 * Tools Reference Guide, "Standardized credential providers": the order
 * below, first match wins), this process's current credentials and
 * their renewal.
 *
 *   1. the aws section's access_key_id / secret_access_key / session_token
 *   2. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
 *   3. the shared files' profile (creds_profile.c): role_arn with
 *      source_profile (STS AssumeRole, creds_sts.c) or with
 *      web_identity_token_file (STS AssumeRoleWithWebIdentity), static
 *      keys, credential_process
 *   4. AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME):
 *      STS AssumeRoleWithWebIdentity (EKS IRSA)
 *   5. container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or
 *      _FULL_URI with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE)
 *   6. EC2 instance metadata, IMDSv2, unless AWS_EC2_METADATA_DISABLED
 *
 * The refresh rule: temporary credentials that are L seconds from their
 * Expiration when they arrive are renewed when min(5 min, L / 3) is left.
 * Five minutes is the SDKs' margin (the Java and Go SDKs' default; EC2
 * and ECS hand out new credentials well before that); a third of the
 * lifetime keeps short-lived credentials (tests hand out one-minute ones)
 * renewed with time to spare.  A failed renewal keeps the current
 * credentials while they are valid and tries again after 1, 2, 4 ... 60 s.
 * Credentials within CREDS_SKEW_S of their Expiration are not used.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <event2/event.h>

#include "outboxd.h"
#include "broker.h"
#include "creds.h"

#define CREDS_SKEW_S		5	/* not used this close to Expiration */
#define CREDS_MARGIN_S		300	/* renew this long before, at most */
#define CREDS_RETRY_MIN		1000	/* ms, first retry after a failure */
#define CREDS_RETRY_MAX		60000	/* ms */
#define CREDS_PROCESS_TIMEOUT	30000	/* ms, a credential_process run */
#define CREDS_ECS_HOST		"http://169.254.170.2"
#define CREDS_IMDS_HOST		"http://169.254.169.254"
#define CREDS_IMDS_HOST6	"http://[fd00:ec2::254]"

static struct {
	struct event_base	*base;
	struct httpc		*hc;
	struct event		*timer;
	struct creds_plan	 plan;
	int			 started;
	int			 slot;
	void			(*notify)(void);
	char			*akid;
	char			*secret;
	char			*token;
	int64_t			 expiration;	/* s since the epoch, 0 never */
	int			 have;
	int			 fetching;
	int			 top_step;	/* aws.role_arn: 1 = the
						   source's answer is due,
						   2 = STS's */
	int			 failures;
	char			 why[256];
	struct log_limit	 limit;
} cs;

static void	creds_fetch(void);
static int	creds_fetched(void);

static char *
creds_dup(const char *s)
{
	return (s != NULL && *s != '\0' ? strdup(s) : NULL);
}

static void
creds_wipe(char **p)
{
	if (*p != NULL) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

void
creds_plan_clear(struct creds_plan *p)
{
	creds_wipe(&p->secret_access_key);
	creds_wipe(&p->session_token);
	creds_wipe(&p->auth_token);
	free(p->access_key_id);
	free(p->profile);
	free(p->path);
	free(p->command);
	free(p->url);
	free(p->auth_token_file);
	free(p->role_arn);
	free(p->session_name);
	free(p->external_id);
	free(p->token_file);
	free(p->source_profile);
	free(p->sts_endpoint);
	free(p->region);
	free(p->top_role_arn);
	free(p->top_external_id);
	free(p->top_session_name);
	memset(p, 0, sizeof *p);
}

static const char *
creds_env(const char *name)
{
	const char	*v = getenv(name);

	return (v != NULL && *v != '\0' ? v : NULL);
}

/* Static keys from a pair of values, either or both maybe NULL. */
static int
creds_plan_keys(struct creds_plan *p, enum creds_kind kind, const char *id,
    const char *secret, const char *token, const char *where, char *err,
    size_t errlen)
{
	if (id == NULL && secret == NULL)
		return (0);
	if (id == NULL || secret == NULL) {
		snprintf(err, errlen, "%s sets %s but not %s", where,
		    id == NULL ? "a secret access key" : "an access key id",
		    id == NULL ? "the access key id" : "the secret access key");
		return (-1);
	}
	p->kind = kind;
	if ((p->access_key_id = strdup(id)) == NULL ||
	    (p->secret_access_key = strdup(secret)) == NULL ||
	    (token != NULL && (p->session_token = creds_dup(token)) == NULL &&
	    *token != '\0')) {
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	return (0);
}

static int
creds_plan_container(struct creds_plan *p, char *err, size_t errlen)
{
	const char	*rel, *full, *host;
	int		 n;

	rel = creds_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	full = creds_env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	if (rel == NULL && full == NULL)
		return (0);
	p->kind = CREDS_CONTAINER;
	if (rel != NULL) {
		/* The ECS agent's fixed address; OUTBOXD_ECS_ENDPOINT
		 * exists for the tests, which have only loopback. */
		if ((host = creds_env("OUTBOXD_ECS_ENDPOINT")) == NULL)
			host = CREDS_ECS_HOST;
		n = asprintf(&p->url, "%s%s%s", host, *rel == '/' ? "" : "/",
		    rel);
	} else {
		if (creds_container_url_ok(full) == -1) {
			snprintf(err, errlen, "AWS_CONTAINER_CREDENTIALS_FULL_"
			    "URI names a host the AWS SDKs refuse over plain "
			    "http (allowed: https, or http to loopback, "
			    "169.254.170.2, 169.254.170.23, fd00:ec2::23)");
			return (-1);
		}
		n = (p->url = strdup(full)) == NULL ? -1 : 0;
	}
	if (n == -1) {
		p->url = NULL;
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	/* The file wins: EKS rotates it, so it is read at every fetch. */
	if ((p->auth_token_file = creds_dup(creds_env(
	    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"))) == NULL)
		p->auth_token = creds_dup(creds_env(
		    "AWS_CONTAINER_AUTHORIZATION_TOKEN"));
	if (p->auth_token != NULL && strpbrk(p->auth_token, "\r\n")) {
		snprintf(err, errlen, "AWS_CONTAINER_AUTHORIZATION_TOKEN "
		    "holds a line break");
		return (-1);
	}
	return (0);
}

static int
creds_plan_imds(struct creds_plan *p, char *err, size_t errlen)
{
	const char	*v;

	if ((v = creds_env("AWS_EC2_METADATA_DISABLED")) != NULL &&
	    strcasecmp(v, "true") == 0)
		return (0);
	if ((v = creds_env("AWS_EC2_METADATA_SERVICE_ENDPOINT")) == NULL) {
		v = creds_env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
		v = v != NULL && strcasecmp(v, "IPv6") == 0 ?
		    CREDS_IMDS_HOST6 : CREDS_IMDS_HOST;
	}
	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) {
		snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT is "
		    "not an http:// or https:// URL");
		return (-1);
	}
	p->kind = CREDS_IMDS;
	if ((p->url = strdup(v)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	while (p->url[0] != '\0' && p->url[strlen(p->url) - 1] == '/')
		p->url[strlen(p->url) - 1] = '\0';
	return (0);
}

int
creds_plan_make(const struct conf *c, struct creds_plan *p, char *err,
    size_t errlen)
{
	memset(p, 0, sizeof *p);
	err[0] = '\0';
	if (creds_plan_keys(p, CREDS_CONF, c->aws.access_key_id,
	    c->aws.secret_access_key, c->aws.session_token, "the aws section",
	    err, errlen) == -1)
		return (-1);
	if (p->kind == CREDS_NONE && creds_plan_keys(p, CREDS_ENV,
	    creds_env("AWS_ACCESS_KEY_ID"), creds_env("AWS_SECRET_ACCESS_KEY"),
	    creds_env("AWS_SESSION_TOKEN"), "the environment", err,
	    errlen) == -1)
		return (-1);
	if (p->kind == CREDS_NONE && creds_profile_plan(c, p, err,
	    errlen) == -1)
		return (-1);
	if (p->kind == CREDS_NONE && creds_env("AWS_WEB_IDENTITY_TOKEN_FILE") &&
	    creds_env("AWS_ROLE_ARN")) {
		p->kind = CREDS_WEB_IDENTITY;
		p->role_arn = creds_dup(creds_env("AWS_ROLE_ARN"));
		p->token_file = creds_dup(creds_env(
		    "AWS_WEB_IDENTITY_TOKEN_FILE"));
		p->session_name = creds_env("AWS_ROLE_SESSION_NAME") != NULL ?
		    creds_dup(creds_env("AWS_ROLE_SESSION_NAME")) :
		    creds_sts_session_name();
		if (p->role_arn == NULL || p->token_file == NULL ||
		    p->session_name == NULL) {
			snprintf(err, errlen, "out of memory");
			return (-1);
		}
	}
	if (p->kind == CREDS_NONE && creds_plan_container(p, err,
	    errlen) == -1)
		return (-1);
	if (p->kind == CREDS_NONE && creds_plan_imds(p, err, errlen) == -1)
		return (-1);
	/* STS (AWS STS API: AssumeRole, AssumeRoleWithWebIdentity): at
	 * the regional endpoint unless one is set, and signed (AssumeRole)
	 * in the region. */
	if (p->kind != CREDS_NONE && c->aws.role_arn != NULL) {
		p->top_role_arn = strdup(c->aws.role_arn);
		p->top_external_id = creds_dup(c->aws.external_id);
		p->top_session_name = c->aws.role_session_name != NULL ?
		    strdup(c->aws.role_session_name) : creds_sts_session_name();
		if (p->top_role_arn == NULL || p->top_session_name == NULL ||
		    (c->aws.external_id != NULL && p->top_external_id == NULL)) {
			snprintf(err, errlen, "out of memory");
			return (-1);
		}
	}
	if (p->kind == CREDS_ASSUME_ROLE || p->kind == CREDS_WEB_IDENTITY ||
	    p->top_role_arn != NULL) {
		if (c->aws.sts_endpoint == NULL || c->aws.region == NULL) {
			snprintf(err, errlen, "STS needs aws.region (or "
			    "AWS_REGION) or an endpoint (AWS_ENDPOINT_URL_STS, "
			    "aws.endpoint_url)");
			return (-1);
		}
		if ((p->sts_endpoint = strdup(c->aws.sts_endpoint)) == NULL ||
		    (p->region = strdup(c->aws.region)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return (-1);
		}
	}
	return (0);
}

void
creds_plan_describe(const struct creds_plan *p, char *buf, size_t len)
{
	const char	*prof = p->profile != NULL ? p->profile : "default";
	const char	*u;
	size_t		 n;

	switch (p->kind) {
	case CREDS_CONF:
		snprintf(buf, len, "static keys from the aws section%s",
		    p->session_token != NULL ? " (with a session token)" : "");
		break;
	case CREDS_ENV:
		snprintf(buf, len, "static keys from AWS_ACCESS_KEY_ID and "
		    "AWS_SECRET_ACCESS_KEY%s", p->session_token != NULL ?
		    " (with AWS_SESSION_TOKEN)" : "");
		break;
	case CREDS_PROFILE:
		snprintf(buf, len, "static keys of profile %s (%s)", prof,
		    p->path != NULL ? p->path : "?");
		break;
	case CREDS_PROCESS:
		snprintf(buf, len, "credential_process of profile %s (%s)",
		    prof, p->path != NULL ? p->path : "?");
		break;
	case CREDS_CONTAINER:
		/* Scheme, host and port only: a query may carry a token. */
		u = p->url;
		n = strcspn(u + (strstr(u, "://") != NULL ?
		    (size_t)(strstr(u, "://") - u) + 3 : 0), "/?#");
		n += strstr(u, "://") != NULL ? (size_t)(strstr(u, "://") - u)
		    + 3 : 0;
		snprintf(buf, len, "container credentials (%s, %.*s%s)",
		    p->auth_token_file != NULL ? "token file" :
		    p->auth_token != NULL ? "token" : "no token", (int)n, u,
		    getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") != NULL ?
		    ", relative URI" : ", full URI");
		break;
	case CREDS_IMDS:
		snprintf(buf, len, "instance metadata (IMDSv2, %s)", p->url);
		break;
	case CREDS_ASSUME_ROLE:
		snprintf(buf, len, "STS AssumeRole, role %s, source profile %s "
		    "(%s), %s", p->role_arn, p->source_profile, p->path != NULL ?
		    p->path : "?", p->sts_endpoint != NULL ? p->sts_endpoint :
		    "?");
		break;
	case CREDS_WEB_IDENTITY:
		snprintf(buf, len, "STS AssumeRoleWithWebIdentity, role %s, "
		    "token file %s%s%s, %s", p->role_arn, p->token_file,
		    p->profile != NULL ? ", profile " : "", p->profile != NULL ?
		    p->profile : "", p->sts_endpoint != NULL ? p->sts_endpoint :
		    "?");
		break;
	default:
		snprintf(buf, len, "none");
		break;
	}
	n = strlen(buf);
	if (p->top_role_arn != NULL && n < len)
		snprintf(buf + n, len - n, ", then STS AssumeRole, role %s "
		    "(aws.role_arn)%s", p->top_role_arn, p->top_external_id !=
		    NULL ? " with an external id" : "");
}

int64_t
creds_time_parse(const char *s)
{
	struct tm	 tm;
	int		 n = 0, oh = 0, om = 0, sign = 0;
	int64_t		 t;

	if (s == NULL)
		return (-1);
	memset(&tm, 0, sizeof tm);
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
	    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n != 19)
		return (-1);
	s += n;
	if (*s == '.')
		for (s++; isdigit((unsigned char)*s); s++)
			;
	if (*s == 'Z' && s[1] == '\0')
		;
	else if ((*s == '+' || *s == '-') && sscanf(s + 1, "%2d:%2d%n", &oh,
	    &om, &n) == 2 && n == 5 && s[6] == '\0')
		sign = *s == '+' ? 1 : -1;
	else
		return (-1);
	if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
	    tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
	    tm.tm_sec > 60)
		return (-1);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	t = (int64_t)timegm(&tm);
	return (t - sign * (oh * 3600 + om * 60));
}

static const char *
creds_json_str(const cJSON *o, const char *name)
{
	const cJSON	*v = cJSON_GetObjectItemCaseSensitive(o, name);

	return (cJSON_IsString(v) && *v->valuestring != '\0' ?
	    v->valuestring : NULL);
}

void
creds_json_done(const char *body, size_t len, const char *what,
    creds_done_cb *done)
{
	struct creds_got	 got;
	cJSON			*j, *ver;
	const char		*code, *exp;
	char			 err[256];

	memset(&got, 0, sizeof got);
	if ((j = cJSON_ParseWithLength(body, len)) == NULL ||
	    !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		snprintf(err, sizeof err, "%s: the answer is not a JSON "
		    "object", what);
		done(NULL, err);
		return;
	}
	/* credential_process: "Version": 1 (the only version). */
	ver = cJSON_GetObjectItemCaseSensitive(j, "Version");
	code = creds_json_str(j, "Code");
	if (ver != NULL && (!cJSON_IsNumber(ver) || ver->valuedouble != 1))
		snprintf(err, sizeof err, "%s: Version is not 1", what);
	else if (code != NULL && strcmp(code, "Success") != 0)
		snprintf(err, sizeof err, "%s: Code is \"%.64s\"", what, code);
	else if ((got.access_key_id = creds_json_str(j, "AccessKeyId")) ==
	    NULL || (got.secret_access_key = creds_json_str(j,
	    "SecretAccessKey")) == NULL)
		snprintf(err, sizeof err, "%s: no AccessKeyId or "
		    "SecretAccessKey in the answer", what);
	else if ((exp = creds_json_str(j, "Expiration")) != NULL &&
	    (got.expiration = creds_time_parse(exp)) == -1)
		snprintf(err, sizeof err, "%s: Expiration \"%.40s\" is not an "
		    "ISO 8601 time", what, exp);
	else {
		got.session_token = creds_json_str(j, ver != NULL ?
		    "SessionToken" : "Token");
		if (ver == NULL && got.expiration == 0)
			snprintf(err, sizeof err, "%s: no Expiration", what);
		else
			err[0] = '\0';
	}
	if (err[0] == '\0')
		done(&got, NULL);
	else
		done(NULL, err);
	cJSON_Delete(j);
}

/* ---- this process's credentials ---------------------------------------- */

static int
creds_temporary(void)
{
	return (creds_fetched() || cs.plan.top_role_arn != NULL);
}

/* The chain's source itself hands out temporary credentials. */
static int
creds_fetched(void)
{
	return (cs.plan.kind == CREDS_PROCESS ||
	    cs.plan.kind == CREDS_CONTAINER || cs.plan.kind == CREDS_IMDS ||
	    cs.plan.kind == CREDS_ASSUME_ROLE ||
	    cs.plan.kind == CREDS_WEB_IDENTITY);
}

static int
creds_valid(int64_t now)
{
	return (cs.have && (cs.expiration == 0 ||
	    now < cs.expiration - CREDS_SKEW_S));
}

static void
creds_arm(long ms)
{
	struct timeval	tv = clock_tv(ms);

	evtimer_add(cs.timer, &tv);
}

static void
creds_report(void)
{
	char	buf[sizeof cs.why + 20];

	metrics_creds_set(cs.slot, creds_valid(time(NULL)) ? NULL :
	    creds_state(buf, sizeof buf) + strlen("unavailable: "));
	if (cs.notify != NULL)
		cs.notify();
}

static void
creds_done(const struct creds_got *got, const char *err)
{
	int64_t	now = time(NULL), life;
	long	ms;
	char	desc[256];

	/* The source's credentials sign aws.role_arn's AssumeRole; the
	 * answer to that comes back here as the credentials. */
	if (cs.top_step == 1) {
		cs.top_step = got != NULL ? 2 : 0;
		if (got != NULL && creds_sts_top_fetch(cs.hc, &cs.plan, got,
		    creds_done) == 0)
			return;
		if (got != NULL) {
			cs.top_step = 0;
			err = "the STS AssumeRole request could not be started";
			got = NULL;
		}
	} else
		cs.top_step = 0;
	cs.fetching = 0;
	if (got != NULL && got->expiration != 0 &&
	    got->expiration - now <= CREDS_SKEW_S) {
		got = NULL;
		err = "the credentials handed out are expired or about to";
	}
	creds_plan_describe(&cs.plan, desc, sizeof desc);
	if (got == NULL) {
		snprintf(cs.why, sizeof cs.why, "%s", err != NULL ? err :
		    "unknown error");
		ms = CREDS_RETRY_MIN << (cs.failures < 6 ? cs.failures : 6);
		if (ms > CREDS_RETRY_MAX)
			ms = CREDS_RETRY_MAX;
		ms += random() % (ms / 4 + 1);
		cs.failures++;
		if (creds_valid(now))
			log_limited(&cs.limit, LOG_LEVEL_WARN, "renewing the AWS "
			    "credentials from %s failed (the current ones stay "
			    "valid for %lld s; retry in %ld ms): %s", desc,
			    (long long)(cs.expiration - now), ms, cs.why);
		else
			log_limited(&cs.limit, LOG_LEVEL_WARN, "no AWS "
			    "credentials from %s (retry in %ld ms): %s", desc,
			    ms, cs.why);
		creds_arm(ms);
		creds_report();
		return;
	}
	creds_wipe(&cs.akid);
	creds_wipe(&cs.secret);
	creds_wipe(&cs.token);
	cs.akid = strdup(got->access_key_id);
	cs.secret = strdup(got->secret_access_key);
	cs.token = creds_dup(got->session_token);
	cs.have = cs.akid != NULL && cs.secret != NULL &&
	    (cs.token != NULL || got->session_token == NULL);
	cs.expiration = got->expiration;
	cs.failures = 0;
	cs.why[0] = '\0';
	log_limit_end(&cs.limit, "AWS credentials");
	if (cs.expiration != 0) {
		life = cs.expiration - now;
		ms = (long)(life - (life / 3 < CREDS_MARGIN_S ? life / 3 :
		    CREDS_MARGIN_S)) * 1000;
		if (ms < CREDS_RETRY_MIN)
			ms = CREDS_RETRY_MIN;
		creds_arm(ms);
		log_info("AWS credentials from %s, valid for %lld s; renewing "
		    "in %ld s", desc, (long long)life, ms / 1000);
	} else
		log_info("AWS credentials from %s, without an expiration",
		    desc);
	creds_report();
}

static void
creds_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	creds_fetch();
}

static void
creds_fetch(void)
{
	struct creds_got	got;
	int			rv = -1;

	if (cs.fetching)
		return;
	cs.fetching = 1;
	evtimer_del(cs.timer);
	if (cs.plan.top_role_arn != NULL) {
		cs.top_step = 1;
		if (!creds_fetched()) {
			memset(&got, 0, sizeof got);
			got.access_key_id = cs.plan.access_key_id;
			got.secret_access_key = cs.plan.secret_access_key;
			got.session_token = cs.plan.session_token;
			creds_done(&got, NULL);
			return;
		}
	}
	switch (cs.plan.kind) {
	case CREDS_PROCESS:
		rv = creds_process_fetch(cs.base, cs.plan.command,
		    CREDS_PROCESS_TIMEOUT, creds_done);
		break;
	case CREDS_CONTAINER:
		rv = creds_container_fetch(cs.hc, &cs.plan, creds_done);
		break;
	case CREDS_IMDS:
		rv = creds_imds_fetch(cs.hc, &cs.plan, creds_done);
		break;
	case CREDS_ASSUME_ROLE:
	case CREDS_WEB_IDENTITY:
		rv = creds_sts_fetch(cs.hc, &cs.plan, creds_done);
		break;
	default:
		break;
	}
	if (rv == -1)
		creds_done(NULL, "the request could not be started");
}

int
creds_start(struct event_base *base, const struct conf *conf, int slot,
    void (*notify)(void))
{
	struct creds_got	got;
	char			err[512], desc[200];

	if (cs.started)
		creds_stop();
	memset(&cs, 0, sizeof cs);
	cs.base = base;
	cs.slot = slot;
	cs.notify = notify;
	if (creds_plan_make(conf, &cs.plan, err, sizeof err) == -1) {
		log_warnx("AWS credentials: %s", err);
		creds_plan_clear(&cs.plan);
		return (-1);
	}
	if (cs.plan.kind == CREDS_NONE) {
		log_warnx("AWS credentials: no source in the chain");
		return (-1);
	}
	if ((cs.timer = evtimer_new(base, creds_timer_cb, NULL)) == NULL ||
	    (creds_temporary() && (cs.hc = httpc_new(base)) == NULL)) {
		log_warnx("AWS credentials: cannot set up the event loop");
		if (cs.timer != NULL)
			event_free(cs.timer);
		creds_plan_clear(&cs.plan);
		return (-1);
	}
	cs.started = 1;
	creds_plan_describe(&cs.plan, desc, sizeof desc);
	if (!creds_temporary()) {
		memset(&got, 0, sizeof got);
		got.access_key_id = cs.plan.access_key_id;
		got.secret_access_key = cs.plan.secret_access_key;
		got.session_token = cs.plan.session_token;
		creds_done(&got, NULL);
		return (0);
	}
	snprintf(cs.why, sizeof cs.why, "not fetched yet from %s", desc);
	metrics_creds_set(cs.slot, cs.why);
	creds_fetch();
	return (0);
}

void
creds_stop(void)
{
	if (!cs.started)
		return;
	creds_process_abort();
	httpc_free(cs.hc);		/* no callback runs */
	event_free(cs.timer);
	creds_wipe(&cs.akid);
	creds_wipe(&cs.secret);
	creds_wipe(&cs.token);
	creds_plan_clear(&cs.plan);
	memset(&cs, 0, sizeof cs);
}

int
creds_current(const char **akid, const char **secret, const char **token)
{
	int64_t	now = time(NULL);
	char	desc[256];

	if (cs.started && creds_valid(now)) {
		*akid = cs.akid;
		*secret = cs.secret;
		*token = cs.token;
		return (0);
	}
	creds_plan_describe(&cs.plan, desc, sizeof desc);
	if (!cs.started)
		log_limited(&cs.limit, LOG_LEVEL_WARN, "no AWS credentials: "
		    "the credential chain is not running");
	else if (cs.have)
		log_limited(&cs.limit, LOG_LEVEL_WARN, "the AWS credentials "
		    "from %s expired %lld s ago and are not renewed yet; calls "
		    "wait: %s", desc, (long long)(now - cs.expiration),
		    cs.why[0] != '\0' ? cs.why : "renewal under way");
	else
		log_limited(&cs.limit, LOG_LEVEL_WARN, "no AWS credentials "
		    "from %s yet; calls wait: %s", desc, cs.why);
	if (cs.started)
		metrics_creds_set(cs.slot, cs.why[0] != '\0' ? cs.why :
		    "expired, renewal under way");
	return (-1);
}

void
creds_rejected(const char *type)
{
	if (type == NULL || (strcmp(type, "ExpiredToken") != 0 &&
	    strcmp(type, "ExpiredTokenException") != 0 &&
	    strcmp(type, "RequestExpired") != 0))
		return;
	if (!cs.started || !creds_temporary()) {
		log_limited(&cs.limit, LOG_LEVEL_WARN, "AWS answered %s to "
		    "static credentials: renew them in outbox.conf or the "
		    "environment", type);
		return;
	}
	/* An expired token is no use; RequestExpired is about the clock
	 * and the request, so the current ones stay. */
	if (strcmp(type, "RequestExpired") != 0 && cs.have) {
		cs.have = 0;
		snprintf(cs.why, sizeof cs.why, "AWS answered %s", type);
	}
	log_info("AWS answered %s: renewing the credentials now", type);
	creds_fetch();
}

const char *
creds_state(char *buf, size_t len)
{
	if (cs.started && creds_valid(time(NULL)))
		snprintf(buf, len, "ok");
	else
		snprintf(buf, len, "unavailable: %s", cs.why[0] != '\0' ?
		    cs.why : "not started");
	return (buf);
}
