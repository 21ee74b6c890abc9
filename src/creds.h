/*
 * creds.h - the AWS credential chain (creds*.c): which source a
 * configuration and environment name, in the order of the AWS SDKs and
 * Tools Reference Guide ("Standardized credential providers"), and the
 * credentials each worker process signs with, fetched and renewed in the
 * background on its own event loop.
 *
 * Every process that talks to AWS (relay and consumer workers, outboxctl)
 * runs its own chain after fork: nothing secret crosses a process
 * boundary, and a worker's credentials live and die with it.
 */
#ifndef OUTBOXD_CREDS_H
#define OUTBOXD_CREDS_H

#include <stdint.h>

#include "outboxd.h"

struct event_base;
struct httpc;

enum creds_kind {
	CREDS_NONE,		/* no source can exist */
	CREDS_CONF,		/* the aws section's keys */
	CREDS_ENV,		/* AWS_ACCESS_KEY_ID, ... */
	CREDS_PROFILE,		/* static keys of a shared-file profile */
	CREDS_PROCESS,		/* the profile's credential_process */
	CREDS_ASSUME_ROLE,	/* role_arn + source_profile: STS AssumeRole
				   signed with the source profile's keys */
	CREDS_WEB_IDENTITY,	/* web identity token + role: STS
				   AssumeRoleWithWebIdentity, unsigned */
	CREDS_CONTAINER,	/* ECS / EKS Pod Identity endpoint */
	CREDS_IMDS		/* EC2 instance metadata, IMDSv2 */
};

#define CREDS_ROLES_MAX		8	/* roles chained through source_profile */
#define CREDS_DURATION_MIN	900	/* s, DurationSeconds (STS AssumeRole, */
#define CREDS_DURATION_MAX	43200	/* AssumeRoleWithWebIdentity) */

/* One STS AssumeRole of a chain: the profile that names it (NULL for
 * aws.role_arn) and its source profile (NULL: credential_source or the
 * chain's source); duration in s, 0 = STS's default (one hour). */
struct creds_role {
	char		*role_arn;
	char		*session_name;
	char		*external_id;
	char		*profile;
	char		*source;
	long		 duration;
};

/*
 * The source the chain chose; strings are malloc'd, NULL when unused.
 *
 * CREDS_ASSUME_ROLE (a profile's role_arn with source_profile or
 * credential_source) is a chain: src says what hands out the first
 * credentials (CREDS_PROFILE or CREDS_ENV: the static keys below;
 * CREDS_PROCESS, CREDS_CONTAINER, CREDS_IMDS, CREDS_WEB_IDENTITY: fetched
 * with the fields below), then the roles[] of source profiles that are
 * roles themselves are assumed, innermost first, then the profile's own
 * role_arn, each signed with what the step before handed out; then
 * aws.role_arn (top), for every kind.
 */
struct creds_plan {
	enum creds_kind	 kind;
	char		*profile;	/* profile name used or looked in */
	char		*path;		/* shared file the keys came from */
	char		*access_key_id;	/* static kinds */
	char		*secret_access_key;
	char		*session_token;
	char		*command;	/* credential_process */
	char		*url;		/* container: full URL; IMDS: base */
	char		*auth_token;	/* container: the token's value */
	char		*auth_token_file; /* container: read at each fetch */
	char		*role_arn;	/* STS kinds */
	char		*session_name;	/* RoleSessionName */
	char		*external_id;	/* AssumeRole: NULL = none */
	char		*token_file;	/* web identity: read at each fetch */
	char		*source_profile; /* AssumeRole: whose static keys
					   (access_key_id, ...) sign it */
	long		 duration;	/* STS kinds: DurationSeconds, 0 =
					   STS's default */
	enum creds_kind	 src;		/* CREDS_ASSUME_ROLE: its source */
	char		*src_role_arn;	/* src CREDS_WEB_IDENTITY: its role */
	char		*src_session_name;
	long		 src_duration;
	char		*credential_source; /* the profile's, as written */
	struct creds_role roles[CREDS_ROLES_MAX];
	int		 n_roles;
	char		*sts_endpoint;	/* base URL, no trailing '/'; NULL
					   until the region is known */
	char		*region;	/* of the signature; likewise */
	/* aws.role_arn: AssumeRole signed with what the source above
	 * hands out (cross-account); top.role_arn NULL = none */
	struct creds_role top;
	/* the region comes from instance metadata (aws.region_imds):
	 * its endpoint, fetched before the credentials */
	char		*region_url;
};

/* Credentials as a provider hands them over; expiration in s since the
 * epoch, 0 = never. */
struct creds_got {
	const char	*access_key_id;
	const char	*secret_access_key;
	const char	*session_token;	/* NULL = none */
	int64_t		 expiration;
};

/* A provider's answer: got, or NULL with err saying why (no secret). */
typedef void	 creds_done_cb(const struct creds_got *got, const char *err);

/* ---- creds_plan.c: the chain's choice ------------------------------- */

/*
 * Walk the chain for conf and the environment without fetching anything
 * and fill plan (clear it with creds_plan_clear, also after an error).
 * Returns 0 (plan->kind may be CREDS_NONE: no source can exist), or -1
 * with the reason in err (errlen bytes): a source that is present but
 * unusable (half a key pair, a profile that does not exist, a container
 * URL on a host the SDKs refuse, a credential file that cannot be read).
 * Never puts a secret in err.
 */
int		 creds_plan_make(const struct conf *, struct creds_plan *,
		    char *err, size_t errlen);
void		 creds_plan_clear(struct creds_plan *);
/* Helpers of the planning code (creds_plan.c, creds_profile.c): an env
 * value or NULL when empty; strdup of a non-empty string or NULL; wipe
 * and free *p; free what a role holds. */
const char	*creds_env(const char *);
char		*creds_strdup(const char *);
void		 creds_wipe(char **);
void		 creds_role_clear(struct creds_role *);
/* Static keys (kind) from id/secret/token, either maybe NULL: 0 with
 * kind unchanged when both are NULL; -1 when only one is set, naming
 * where. */
int		 creds_plan_keys(struct creds_plan *, enum creds_kind,
		    const char *id, const char *secret, const char *token,
		    const char *where, char *err, size_t errlen);
/* The container (p->url, token or token file) and instance metadata
 * (p->url) sources into p, kind set; 0 with kind unchanged when absent
 * (AWS_EC2_METADATA_DISABLED for IMDS), -1 when present but unusable. */
int		 creds_plan_container(struct creds_plan *, char *err,
		    size_t errlen);
int		 creds_plan_imds(struct creds_plan *, char *err, size_t errlen);
/* 1 if s (n bytes) is a region name as AWS writes them ("us-east-1",
 * "cn-north-1", "us-gov-west-1"): 1 to 32 lower-case letters, digits and
 * '-'.  The region goes into endpoint host names (sqs.REGION.amazonaws.
 * com): anything else could name another host. */
int		 creds_region_ok(const char *s, size_t n);
/* The home directory of user (the service user; NULL: this process's),
 * else $HOME, else this process's user's; NULL if none.  Points into
 * getpwnam()'s static area or the environment: use it at once. */
const char	*creds_home(const char *user);
/* The IMDS base URL (AWS_EC2_METADATA_SERVICE_ENDPOINT, _MODE, else
 * 169.254.169.254), malloc'd; NULL with err "" when instance metadata is
 * off, NULL with err set when the endpoint is unusable. */
char		*creds_imds_base(char *err, size_t errlen);
/* "instance metadata (IMDSv2, http://169.254.169.254)", "profile prod
 * (~/.aws/credentials)", ... into buf: what outboxd -t prints.  No
 * secret. */
void		 creds_plan_describe(const struct creds_plan *, char *buf,
		    size_t len);

/* ---- creds.c: the current credentials, their refresh ---------------- */

/*
 * Start this process's chain on base (once per process, after fork):
 * static credentials are current at once; temporary ones are fetched now
 * and renewed before they expire (creds.c: the refresh rule).  slot
 * names this worker in /readyz's credentials state (metrics_creds_set);
 * -1 for none (outboxctl).  notify, unless NULL, runs after each fetch,
 * good or bad.  Returns -1 if the chain cannot be planned (logged).
 */
int		 creds_start(struct event_base *, const struct conf *,
		    int slot, void (*notify)(void));
/* Stop fetching and forget the credentials (before the loop is freed). */
void		 creds_stop(void);
/*
 * The credentials to sign a request with now, valid until the next
 * return to the event loop; *token NULL if there is none.  Returns -1
 * when there are none that are valid (not yet fetched, or expired and not
 * renewed): then one rate-limited line says why (a debug line while the
 * first fetch is under way and nothing has failed: a normal start), and
 * the caller fails its call as retryable.
 */
int		 creds_current(const char **access_key_id,
		    const char **secret_access_key, const char **token);
/* AWS answered with error type (ExpiredToken, ExpiredTokenException,
 * RequestExpired): renew now.  Other types are ignored. */
void		 creds_rejected(const char *error_type);
/* "ok", or "unavailable: why" into buf: this process's state. */
const char	*creds_state(char *buf, size_t len);
/* Parse an ISO 8601 UTC instant ("2024-05-01T12:00:00Z", fractions and
 * "+00:00" allowed) to s since the epoch; -1 if it is none. */
int64_t		 creds_time_parse(const char *);
/* The region this process signs with: conf's, or the one instance
 * metadata gave at start (aws.region_imds); NULL while it is not known
 * (creds_current() then refuses, saying why). */
const char	*creds_region(void);
/* The base URL (no trailing '/') of service ("sqs", "sns", "dynamodb",
 * "sts") in this process: configured (explicit, conf) or, when the
 * configuration left it to the region, https://SERVICE.REGION.amazonaws.com
 * with creds_region() (static storage, until the next call); NULL while
 * the region is not known. */
const char	*creds_endpoint(const char *configured, const char *service);
/* The credentials in a JSON answer: the container and instance metadata
 * form (AccessKeyId, SecretAccessKey, Token, Expiration) or the
 * credential_process form (Version 1, SessionToken).  Calls done with
 * them or with an error; the JSON is never quoted in the error. */
void		 creds_json_done(const char *body, size_t len,
		    const char *what, creds_done_cb *done);

/* ---- creds_profile.c: the shared credentials and config files ------- */

/* Fill plan from the profile (static keys, credential_process, role_arn,
 * web_identity_token_file); plan->kind stays CREDS_NONE if the profile
 * has none.  -1 with err as creds_plan_make. */
int		 creds_profile_plan(const struct conf *, struct creds_plan *,
		    char *err, size_t errlen);
/* The profile's region, or NULL (caller frees). */
char		*creds_profile_region(const char *profile, const char *user);

/* ---- creds_process.c: credential_process, read through libevent ----- */

/* Run command (/bin/sh -c) without waiting for it; done runs once, from
 * the loop, with its parsed output, or an error after timeout ms.
 * Returns -1 (done never runs) if it could not be started. */
int		 creds_process_fetch(struct event_base *, const char *command,
		    long timeout, creds_done_cb *done);
void		 creds_process_abort(void);

/* ---- creds_http.c: container endpoint and instance metadata --------- */

/* GET the container credentials URL with its Authorization token (ECS
 * and EKS Pod Identity container credential providers). */
int		 creds_container_fetch(struct httpc *, const struct creds_plan *,
		    creds_done_cb *done);
/* IMDSv2: PUT /latest/api/token, GET .../security-credentials/, GET
 * the role's credentials (EC2 User Guide, "Retrieve security credentials
 * from instance metadata"). */
int		 creds_imds_fetch(struct httpc *, const struct creds_plan *,
		    creds_done_cb *done);
/* The region (or NULL and why, no secret) of instance metadata. */
typedef void	 creds_region_cb(const char *region, const char *err);
/* IMDSv2: PUT /latest/api/token, GET /latest/meta-data/placement/region
 * at base (EC2 User Guide, "Instance metadata categories").  done runs
 * once from the loop; -1 (done never runs) if it could not start. */
int		 creds_imds_region_fetch(struct httpc *, const char *base,
		    creds_region_cb *done);
/* 0 if url may serve container credentials (https anywhere; http only
 * on loopback, 169.254.170.2, 169.254.170.23 or fd00:ec2::23), else -1. */
int		 creds_container_url_ok(const char *url);

/* ---- creds_sts.c: AWS STS AssumeRole, AssumeRoleWithWebIdentity ---- */

/* AssumeRole of role (a chain's step, aws.role_arn) at plan's STS
 * endpoint and region, signed with src, the credentials the step before
 * handed out; done as for creds_sts_fetch. */
int		 creds_sts_role_fetch(struct httpc *, const struct creds_plan *,
		    const struct creds_role *role, const struct creds_got *src,
		    creds_done_cb *done);
/* One STS call for plan (CREDS_ASSUME_ROLE: signed with the plan's
 * static keys; CREDS_WEB_IDENTITY, or a CREDS_ASSUME_ROLE whose src is
 * CREDS_WEB_IDENTITY: AssumeRoleWithWebIdentity, the token file read
 * now, unsigned)
 * through hc; done runs once with the credentials or an error that
 * names STS's error code.  Returns -1 (done never runs) if it could not
 * be started. */
int		 creds_sts_fetch(struct httpc *, const struct creds_plan *,
		    creds_done_cb *done);
/* The RoleSessionName when none is set: "outboxd-" and the time, as the
 * SDKs make one up. */
char		*creds_sts_session_name(void);

/* ---- metrics_ready.c: the credentials field of /readyz -------------- */

/* Worker slot (relay i: i, consumer i: CREDS_SLOT_CONSUMER + i; out of
 * range: ignored) has credentials (why NULL) or none, for why (no secret
 * in it). */
#define CREDS_SLOT_CONSUMER	32
void		 metrics_creds_set(int slot, const char *why);

#endif
