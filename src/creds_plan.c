/*
 * creds_plan.c - which source of the AWS credential chain a configuration
 * and the environment name (AWS SDKs and Tools Reference Guide,
 * "Standardized credential providers": the order below, first match
 * wins), without fetching anything, and how outboxd -t says it:
 *
 *   1. the aws section's access_key_id / secret_access_key / session_token
 *   2. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (not
 *      when aws.profile names a profile in the file)
 *   3. the shared files' profile (creds_profile.c): role_arn with
 *      source_profile or credential_source (STS AssumeRole, chained when
 *      the source is a role itself) or with web_identity_token_file (STS
 *      AssumeRoleWithWebIdentity), static keys, credential_process
 *   4. AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME):
 *      STS AssumeRoleWithWebIdentity (EKS IRSA)
 *   5. container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or
 *      _FULL_URI with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE)
 *   6. EC2 instance metadata, IMDSv2, unless AWS_EC2_METADATA_DISABLED
 *
 * then aws.role_arn, assumed on top of whichever source was found.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "outboxd.h"
#include "creds.h"

#define CREDS_ECS_HOST		"http://169.254.170.2"
#define CREDS_IMDS_HOST		"http://169.254.169.254"
#define CREDS_IMDS_HOST6	"http://[fd00:ec2::254]"

char *
creds_strdup(const char *s)
{
	return (s != NULL && *s != '\0' ? strdup(s) : NULL);
}

void
creds_wipe(char **p)
{
	if (*p != NULL) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

void
creds_role_clear(struct creds_role *r)
{
	free(r->role_arn);
	free(r->session_name);
	free(r->external_id);
	free(r->profile);
	free(r->source);
	memset(r, 0, sizeof *r);
}

void
creds_plan_clear(struct creds_plan *p)
{
	int	i;

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
	free(p->src_role_arn);
	free(p->src_session_name);
	free(p->credential_source);
	free(p->sts_endpoint);
	free(p->region);
	free(p->region_url);
	for (i = 0; i < p->n_roles; i++)
		creds_role_clear(&p->roles[i]);
	creds_role_clear(&p->top);
	memset(p, 0, sizeof *p);
}

const char *
creds_env(const char *name)
{
	const char	*v = getenv(name);

	return (v != NULL && *v != '\0' ? v : NULL);
}

int
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
	    (token != NULL && (p->session_token = creds_strdup(token)) ==
	    NULL && *token != '\0')) {
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	return (0);
}

int
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
	if ((p->auth_token_file = creds_strdup(creds_env(
	    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"))) == NULL)
		p->auth_token = creds_strdup(creds_env(
		    "AWS_CONTAINER_AUTHORIZATION_TOKEN"));
	if (p->auth_token != NULL && strpbrk(p->auth_token, "\r\n")) {
		snprintf(err, errlen, "AWS_CONTAINER_AUTHORIZATION_TOKEN "
		    "holds a line break");
		return (-1);
	}
	return (0);
}

int
creds_region_ok(const char *s, size_t n)
{
	size_t	i;

	if (n == 0 || n > 32 || s[0] == '-' || s[n - 1] == '-')
		return (0);
	for (i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) &&
		    !isdigit((unsigned char)s[i]) && s[i] != '-')
			return (0);
	return (1);
}

char *
creds_imds_base(char *err, size_t errlen)
{
	const char	*v;
	char		*s;

	err[0] = '\0';
	if ((v = creds_env("AWS_EC2_METADATA_DISABLED")) != NULL &&
	    strcasecmp(v, "true") == 0)
		return (NULL);
	if ((v = creds_env("AWS_EC2_METADATA_SERVICE_ENDPOINT")) == NULL) {
		v = creds_env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
		v = v != NULL && strcasecmp(v, "IPv6") == 0 ?
		    CREDS_IMDS_HOST6 : CREDS_IMDS_HOST;
	}
	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) {
		snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT is "
		    "not an http:// or https:// URL");
		return (NULL);
	}
	if ((s = strdup(v)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return (NULL);
	}
	while (s[0] != '\0' && s[strlen(s) - 1] == '/')
		s[strlen(s) - 1] = '\0';
	return (s);
}

int
creds_plan_imds(struct creds_plan *p, char *err, size_t errlen)
{
	if ((p->url = creds_imds_base(err, errlen)) == NULL)
		return (err[0] != '\0' ? -1 : 0);
	p->kind = CREDS_IMDS;
	return (0);
}

/* aws.role_arn (+ external_id, role_session_name, duration_seconds)
 * into p->top. */
static int
creds_plan_top(const struct conf *c, struct creds_plan *p, char *err,
    size_t errlen)
{
	if (c->aws.role_arn == NULL)
		return (0);
	p->top.role_arn = strdup(c->aws.role_arn);
	p->top.external_id = creds_strdup(c->aws.external_id);
	p->top.session_name = c->aws.role_session_name != NULL ?
	    strdup(c->aws.role_session_name) : creds_sts_session_name();
	p->top.duration = c->aws.duration_seconds;
	if (p->top.role_arn == NULL || p->top.session_name == NULL ||
	    (c->aws.external_id != NULL && p->top.external_id == NULL)) {
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	return (0);
}

/* Some AssumeRole of the plan is signed with role credentials (role
 * chaining), which STS limits to one hour. */
static const char *
creds_plan_chained_over_hour(const struct creds_plan *p)
{
	int	i;

	for (i = 0; i < p->n_roles; i++)
		if (p->roles[i].duration > 3600 && (i > 0 ||
		    p->src == CREDS_WEB_IDENTITY))
			return (p->roles[i].role_arn);
	if (p->kind == CREDS_ASSUME_ROLE && p->duration > 3600 &&
	    (p->n_roles > 0 || p->src == CREDS_WEB_IDENTITY))
		return (p->role_arn);
	if (p->top.role_arn != NULL && p->top.duration > 3600 &&
	    (p->kind == CREDS_ASSUME_ROLE || p->kind == CREDS_WEB_IDENTITY))
		return (p->top.role_arn);
	return (NULL);
}

int
creds_plan_make(const struct conf *c, struct creds_plan *p, char *err,
    size_t errlen)
{
	const char	*arn;

	memset(p, 0, sizeof *p);
	err[0] = '\0';
	if (creds_plan_keys(p, CREDS_CONF, c->aws.access_key_id,
	    c->aws.secret_access_key, c->aws.session_token, "the aws section",
	    err, errlen) == -1)
		return (-1);
	/* A profile named in the file is what the operator chose, as a
	 * profile given in code is to the SDKs (botocore: an explicit
	 * profile negates the environment provider): the environment's keys
	 * then serve only its credential_source = Environment. */
	if (p->kind == CREDS_NONE && !c->aws.profile_set &&
	    creds_plan_keys(p, CREDS_ENV,
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
		p->role_arn = creds_strdup(creds_env("AWS_ROLE_ARN"));
		p->token_file = creds_strdup(creds_env(
		    "AWS_WEB_IDENTITY_TOKEN_FILE"));
		p->session_name = creds_env("AWS_ROLE_SESSION_NAME") != NULL ?
		    creds_strdup(creds_env("AWS_ROLE_SESSION_NAME")) :
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
	if (p->kind != CREDS_NONE && creds_plan_top(c, p, err, errlen) == -1)
		return (-1);
	if ((arn = creds_plan_chained_over_hour(p)) != NULL) {
		snprintf(err, errlen, "the duration of role %s is over 3600 s, "
		    "but it is assumed with role credentials (role chaining), "
		    "for which STS allows one hour at most", arn);
		return (-1);
	}
	/* STS (AWS STS API: AssumeRole, AssumeRoleWithWebIdentity): at
	 * the regional endpoint unless one is set, and signed (AssumeRole)
	 * in the region; a region from instance metadata fills both in at
	 * the worker's start (creds.c). */
	if (p->kind == CREDS_ASSUME_ROLE || p->kind == CREDS_WEB_IDENTITY ||
	    p->top.role_arn != NULL) {
		if ((c->aws.sts_endpoint == NULL || c->aws.region == NULL) &&
		    c->aws.region_imds == NULL) {
			snprintf(err, errlen, "STS needs aws.region (or "
			    "AWS_REGION) or an endpoint (AWS_ENDPOINT_URL_STS, "
			    "aws.endpoint_url)");
			return (-1);
		}
		p->sts_endpoint = creds_strdup(c->aws.sts_endpoint);
		p->region = creds_strdup(c->aws.region);
		if ((c->aws.sts_endpoint != NULL && p->sts_endpoint == NULL) ||
		    (c->aws.region != NULL && p->region == NULL)) {
			snprintf(err, errlen, "out of memory");
			return (-1);
		}
	}
	if (c->aws.region == NULL && c->aws.region_imds != NULL &&
	    (p->region_url = strdup(c->aws.region_imds)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	return (0);
}

/* " for N s" when a duration is set, else "". */
static const char *
creds_dur(long d, char *buf, size_t len)
{
	if (d > 0)
		snprintf(buf, len, " for %ld s", d);
	else
		buf[0] = '\0';
	return (buf);
}

/* The length of url's scheme, host and port: what may be shown (a path
 * or query may carry a token). */
static int
creds_url_host(const char *u)
{
	const char	*p = strstr(u, "://");
	size_t		 skip = p != NULL ? (size_t)(p - u) + 3 : 0;

	return ((int)(skip + strcspn(u + skip, "/?#")));
}

/* What hands a CREDS_ASSUME_ROLE chain its first credentials. */
static void
creds_src_describe(const struct creds_plan *p, char *buf, size_t len)
{
	const char	*last = p->n_roles > 0 ?
			    p->roles[0].source : p->source_profile;
	char		 d[32];

	if (p->credential_source != NULL) {
		if (p->src == CREDS_ENV || p->url == NULL)
			snprintf(buf, len, "credential_source %s (%s)",
			    p->credential_source, p->src == CREDS_ENV ?
			    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" : "?");
		else
			snprintf(buf, len, "credential_source %s (%.*s)",
			    p->credential_source, creds_url_host(p->url),
			    p->url);
		return;
	}
	switch (p->src) {
	case CREDS_PROCESS:
		snprintf(buf, len, "source profile %s: credential_process (%s)",
		    last, p->path != NULL ? p->path : "?");
		break;
	case CREDS_WEB_IDENTITY:
		snprintf(buf, len, "source profile %s: AssumeRoleWithWebIdentity,"
		    " role %s%s, token file %s", last, p->src_role_arn,
		    creds_dur(p->src_duration, d, sizeof d), p->token_file);
		break;
	default:
		snprintf(buf, len, "source profile %s (%s)", last,
		    p->path != NULL ? p->path : "?");
		break;
	}
}

/* The CREDS_ASSUME_ROLE chain, outermost role first: "STS AssumeRole,
 * role R1, source profile B: AssumeRole, role R2, source profile C
 * (PATH)". */
static void
creds_chain_describe(const struct creds_plan *p, char *buf, size_t len)
{
	char	d[32];
	size_t	n;
	int	i;

	snprintf(buf, len, "STS AssumeRole, role %s%s, ", p->role_arn,
	    creds_dur(p->duration, d, sizeof d));
	for (i = p->n_roles - 1; i >= 0; i--) {
		n = strlen(buf);
		snprintf(buf + n, len - n, "source profile %s: AssumeRole, "
		    "role %s%s, ", p->roles[i].profile, p->roles[i].role_arn,
		    creds_dur(p->roles[i].duration, d, sizeof d));
	}
	n = strlen(buf);
	creds_src_describe(p, buf + n, len - n);
	n = strlen(buf);
	snprintf(buf + n, len - n, ", %s", p->sts_endpoint != NULL ?
	    p->sts_endpoint : "the regional endpoint");
}

void
creds_plan_describe(const struct creds_plan *p, char *buf, size_t len)
{
	const char	*prof = p->profile != NULL ? p->profile : "default";
	const char	*u;
	char		 d[32];
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
		snprintf(buf, len, "container credentials (%s, %.*s%s)",
		    p->auth_token_file != NULL ? "token file" :
		    p->auth_token != NULL ? "token" : "no token",
		    creds_url_host(u), u,
		    getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") != NULL ?
		    ", relative URI" : ", full URI");
		break;
	case CREDS_IMDS:
		snprintf(buf, len, "instance metadata (IMDSv2, %s)", p->url);
		break;
	case CREDS_ASSUME_ROLE:
		creds_chain_describe(p, buf, len);
		break;
	case CREDS_WEB_IDENTITY:
		snprintf(buf, len, "STS AssumeRoleWithWebIdentity, role %s%s, "
		    "token file %s%s%s, %s", p->role_arn, creds_dur(p->duration,
		    d, sizeof d), p->token_file,
		    p->profile != NULL ? ", profile " : "", p->profile != NULL ?
		    p->profile : "", p->sts_endpoint != NULL ? p->sts_endpoint :
		    "the regional endpoint");
		break;
	default:
		snprintf(buf, len, "none");
		break;
	}
	n = strlen(buf);
	if (p->top.role_arn != NULL && n < len)
		snprintf(buf + n, len - n, ", then STS AssumeRole, role %s "
		    "(aws.role_arn)%s%s", p->top.role_arn, p->top.external_id !=
		    NULL ? " with an external id" : "", creds_dur(p->top.duration,
		    d, sizeof d));
}
