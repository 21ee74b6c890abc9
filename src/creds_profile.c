/*
 * creds_profile.c - the shared AWS credentials and config files (AWS SDKs
 * and Tools Reference Guide, "Shared config and credentials files"):
 * AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, AWS_CONFIG_FILE or
 * ~/.aws/config, "~" being the home of the service user (outbox.conf's
 * user), since the workers read them after dropping privileges.  The
 * profile is aws.profile, else AWS_PROFILE, else "default"; in the config
 * file it is the section "[profile NAME]" ("[default]" for default), in
 * the credentials file "[NAME]".  A key in the credentials file wins over
 * the same key in the config file.
 *
 * Within a profile the SDKs' order: role_arn (with source_profile or
 * web_identity_token_file: STS, creds_sts.c), static keys,
 * credential_process.
 */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "outboxd.h"
#include "creds.h"

enum { K_AKID, K_SECRET, K_TOKEN, K_PROCESS, K_ROLE, K_SOURCE, K_WEBID,
	K_REGION, K_SESSION, K_EXTID, K_CREDSRC, K_DURATION, NKEYS };
static const char *const creds_keys[NKEYS] = {
	"aws_access_key_id", "aws_secret_access_key", "aws_session_token",
	"credential_process", "role_arn", "source_profile",
	"web_identity_token_file", "region", "role_session_name",
	"external_id", "credential_source", "duration_seconds"
};

const char *
creds_home(const char *user)
{
	struct passwd	*pw;
	const char	*v;

	if (user != NULL && (pw = getpwnam(user)) != NULL)
		return (pw->pw_dir);
	if ((v = getenv("HOME")) != NULL && *v != '\0')
		return (v);
	if ((pw = getpwuid(getuid())) != NULL)
		return (pw->pw_dir);
	return (NULL);
}

/* The file env names, else name under the service user's home. */
static char *
creds_profile_file(const char *env, const char *name, const char *user)
{
	const char	*v, *home;
	char		*s;

	if ((v = getenv(env)) != NULL && *v != '\0') {
		if (v[0] == '~' && v[1] == '/')
			name = v + 2;
		else
			return (strdup(v));
	} else if (name == NULL)
		return (NULL);
	if ((home = creds_home(user)) == NULL)
		return (NULL);
	if (asprintf(&s, "%s/%s", home, name) == -1)
		return (NULL);
	return (s);
}

static char *
creds_trim(char *s)
{
	char	*e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' ||
	    e[-1] == '\n'))
		*--e = '\0';
	return (s);
}

/* The most a shared config or credentials file may hold: a large
 * organisation's has a few hundred profiles, tens of KiB. */
#define CREDS_INI_MAX	(1024 * 1024)

/* creds_ini_read()'s errno in words. */
static const char *
creds_ini_error(int e)
{
	if (e == EINVAL)
		return ("not a regular file");
	if (e == EFBIG)
		return ("larger than 1 MiB");
	return (strerror(e));
}

/*
 * Read section sect (or alt, unless NULL) of the INI file at path into
 * vals[] for the keys not set yet.  Returns 1 if the section is there, 0
 * if not (or the file does not exist, or is a character device such as
 * /dev/null: read as empty), -1 if the file cannot be read (errno: EISDIR
 * a directory, EINVAL another kind -- a FIFO would block the start --,
 * EFBIG over CREDS_INI_MAX).
 */
static int
creds_ini_read(const char *path, const char *sect, const char *alt,
    char *vals[NKEYS])
{
	FILE	*f;
	char	*line = NULL, *p, *k, *eq;
	size_t	 cap = 0;
	int	 in = 0, found = 0, i;

	struct stat	 st;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1)
		return (errno == ENOENT ? 0 : -1);
	if (fstat(fd, &st) == -1)
		i = errno;
	else if (S_ISCHR(st.st_mode)) {
		close(fd);
		return (0);
	} else if (S_ISDIR(st.st_mode))
		i = EISDIR;
	else if (!S_ISREG(st.st_mode))
		i = EINVAL;
	else if (st.st_size > CREDS_INI_MAX)
		i = EFBIG;
	else if ((f = fdopen(fd, "r")) == NULL)
		i = errno;
	else
		i = 0;
	if (i != 0) {
		close(fd);
		errno = i;
		return (-1);
	}
	while (getline(&line, &cap, f) != -1) {
		/* Indented lines continue a nested key (s3 = ...). */
		if (line[0] == ' ' || line[0] == '\t')
			continue;
		p = creds_trim(line);
		if (*p == '\0' || *p == '#' || *p == ';')
			continue;
		if (*p == '[') {
			if ((eq = strchr(p, ']')) == NULL) {
				in = 0;
				continue;
			}
			*eq = '\0';
			k = creds_trim(p + 1);
			in = strcmp(k, sect) == 0 || (alt != NULL &&
			    strcmp(k, alt) == 0);
			found |= in;
			continue;
		}
		if (!in || (eq = strchr(p, '=')) == NULL)
			continue;
		*eq = '\0';
		k = creds_trim(p);
		p = creds_trim(eq + 1);
		for (i = 0; i < NKEYS; i++)
			if (strcasecmp(k, creds_keys[i]) == 0 &&
			    vals[i] == NULL && *p != '\0')
				vals[i] = strdup(p);
	}
	if (line != NULL)
		explicit_bzero(line, cap);
	free(line);
	fclose(f);
	return (found);
}

/* Read the profile from both files into vals; *in_c is 1 if the
 * credentials file set the secret key or credential_process.  Returns as
 * creds_ini_read. */
static int
creds_profile_read(const char *profile, const char *user, char *vals[NKEYS],
    char **cpath, char **fpath, int *in_c, char *err, size_t errlen)
{
	char	 sect[300];
	int	 a, b;

	*cpath = creds_profile_file("AWS_SHARED_CREDENTIALS_FILE",
	    ".aws/credentials", user);
	*fpath = creds_profile_file("AWS_CONFIG_FILE", ".aws/config", user);
	snprintf(sect, sizeof sect, "profile %s", profile);
	a = *cpath != NULL ? creds_ini_read(*cpath, profile, NULL, vals) : 0;
	if (a == -1) {
		snprintf(err, errlen, "cannot read the shared credentials file "
		    "%s: %s", *cpath, creds_ini_error(errno));
		return (-1);
	}
	*in_c = vals[K_SECRET] != NULL || vals[K_PROCESS] != NULL;
	b = *fpath != NULL ? creds_ini_read(*fpath, sect,
	    strcmp(profile, "default") == 0 ? "default" : NULL, vals) : 0;
	if (b == -1) {
		snprintf(err, errlen, "cannot read the shared config file %s: "
		    "%s", *fpath, creds_ini_error(errno));
		return (-1);
	}
	return (a || b);
}

static void
creds_vals_free(char *vals[NKEYS])
{
	int	i;

	for (i = 0; i < NKEYS; i++) {
		if (vals[i] != NULL)
			explicit_bzero(vals[i], strlen(vals[i]));
		free(vals[i]);
		vals[i] = NULL;
	}
}

/* The profile's static keys (vals) into p, taken from vals. */
static void
creds_take_keys(struct creds_plan *p, char *vals[NKEYS])
{
	p->access_key_id = vals[K_AKID];
	p->secret_access_key = vals[K_SECRET];
	p->session_token = vals[K_TOKEN];
	vals[K_AKID] = vals[K_SECRET] = vals[K_TOKEN] = NULL;
}

/* A profile's duration_seconds into *d (0 when unset): STS takes 900 to
 * 43200 s (AssumeRole, AssumeRoleWithWebIdentity: DurationSeconds). */
static int
creds_profile_duration(const char *profile, const char *v, long *d,
    char *err, size_t errlen)
{
	char	*end;

	*d = 0;
	if (v == NULL)
		return (0);
	*d = strtol(v, &end, 10);
	if (*end != '\0' || end == v || *d < CREDS_DURATION_MIN ||
	    *d > CREDS_DURATION_MAX) {
		snprintf(err, errlen, "duration_seconds of AWS profile %s is "
		    "not a number of seconds from %d to %d (STS)", profile,
		    CREDS_DURATION_MIN, CREDS_DURATION_MAX);
		return (-1);
	}
	return (0);
}

/* A role profile's credential_source (AWS SDKs and Tools Reference
 * Guide, "Assume role credential provider": Environment,
 * Ec2InstanceMetadata, EcsContainer) as the chain's src. */
static int
creds_profile_credsrc(struct creds_plan *p, const char *profile,
    const char *v, char *err, size_t errlen)
{
	const char	*miss = NULL;
	int		 rv = 0;

	p->kind = CREDS_NONE;
	if (strcmp(v, "Environment") == 0) {
		rv = creds_plan_keys(p, CREDS_ENV, creds_env(
		    "AWS_ACCESS_KEY_ID"), creds_env("AWS_SECRET_ACCESS_KEY"),
		    creds_env("AWS_SESSION_TOKEN"), "the environment", err,
		    errlen);
		miss = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set";
	} else if (strcmp(v, "Ec2InstanceMetadata") == 0) {
		rv = creds_plan_imds(p, err, errlen);
		miss = "instance metadata is off (AWS_EC2_METADATA_DISABLED)";
	} else if (strcmp(v, "EcsContainer") == 0) {
		rv = creds_plan_container(p, err, errlen);
		miss = "neither AWS_CONTAINER_CREDENTIALS_RELATIVE_URI nor "
		    "_FULL_URI is set";
	} else {
		snprintf(err, errlen, "credential_source of AWS profile %s is "
		    "\"%.40s\", not Environment, Ec2InstanceMetadata or "
		    "EcsContainer", profile, v);
		return (-1);
	}
	if (rv == 0 && p->kind == CREDS_NONE) {
		snprintf(err, errlen, "AWS profile %s sets credential_source "
		    "%s, but %s", profile, v, miss);
		rv = -1;
	}
	p->src = p->kind;
	p->kind = CREDS_ASSUME_ROLE;
	if (rv == 0 && (p->credential_source = strdup(v)) == NULL) {
		snprintf(err, errlen, "out of memory");
		rv = -1;
	}
	return (rv);
}

/* vals' role (role_arn, role_session_name, external_id, duration_seconds)
 * into r, taken from vals. */
static int
creds_profile_take_role(struct creds_role *r, const char *profile,
    char *vals[NKEYS], char *err, size_t errlen)
{
	r->role_arn = vals[K_ROLE];
	r->session_name = vals[K_SESSION];
	r->external_id = vals[K_EXTID];
	vals[K_ROLE] = vals[K_SESSION] = vals[K_EXTID] = NULL;
	if (creds_profile_duration(profile, vals[K_DURATION], &r->duration,
	    err, errlen) == -1)
		return (-1);
	if ((r->profile = strdup(profile)) == NULL || (r->session_name ==
	    NULL && (r->session_name = creds_sts_session_name()) == NULL)) {
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	return (0);
}

/*
 * Where the source of role profile cur (vals) leads, walking
 * source_profile as the SDKs do (botocore's AssumeRoleProvider): a
 * credential_source ends the walk; a source profile with static keys
 * ends it (also the profile itself, "source_profile" naming itself); one
 * with role_arn is a role of the chain (roles[], innermost first) whose
 * own source is walked next, unless it has web_identity_token_file; one
 * with credential_process ends it.  A profile met twice is a cycle,
 * refused naming the profiles.
 */
static int
creds_profile_walk(struct creds_plan *p, char *vals[NKEYS], const char *user,
    char *err, size_t errlen)
{
	char		*src[NKEYS] = { NULL }, *cpath = NULL, *fpath = NULL;
	char		 seen[CREDS_ROLES_MAX + 2][128], trail[1400];
	struct creds_role tmp;
	const char	*cur = p->profile;
	int		 n_seen = 1, in_c = 0, found, rv = -1, i, self;

	snprintf(seen[0], sizeof seen[0], "%s", p->profile);
	for (;;) {
		if (vals[K_CREDSRC] != NULL && vals[K_SOURCE] != NULL) {
			snprintf(err, errlen, "AWS profile %s sets both "
			    "source_profile and credential_source", cur);
			goto out;
		}
		if (vals[K_CREDSRC] != NULL) {
			rv = creds_profile_credsrc(p, cur, vals[K_CREDSRC], err,
			    errlen);
			goto out;
		}
		if (vals[K_SOURCE] == NULL) {
			snprintf(err, errlen, "AWS profile %s sets role_arn "
			    "without source_profile, credential_source or "
			    "web_identity_token_file", cur);
			goto out;
		}
		self = strcmp(vals[K_SOURCE], cur) == 0;
		for (i = 0; i < n_seen && !self; i++)
			if (strcmp(seen[i], vals[K_SOURCE]) == 0) {
				trail[0] = '\0';
				for (i = 0; i < n_seen; i++)
					snprintf(trail + strlen(trail),
					    sizeof trail - strlen(trail),
					    "%s -> ", seen[i]);
				snprintf(err, errlen, "the source_profile keys of "
				    "the AWS profiles make a cycle: %s%s",
				    trail, vals[K_SOURCE]);
				goto out;
			}
		if (n_seen > CREDS_ROLES_MAX) {
			snprintf(err, errlen, "AWS profile %s: more than %d "
			    "roles chained through source_profile",
			    p->profile, CREDS_ROLES_MAX);
			goto out;
		}
		snprintf(seen[n_seen++], sizeof seen[0], "%s", vals[K_SOURCE]);
		creds_vals_free(src);
		free(cpath);
		free(fpath);
		cpath = fpath = NULL;
		found = creds_profile_read(vals[K_SOURCE], user, src, &cpath,
		    &fpath, &in_c, err, errlen);
		if (found == 0)
			snprintf(err, errlen, "source_profile %s of AWS profile "
			    "%s is in neither %s nor %s", vals[K_SOURCE], cur,
			    cpath != NULL ? cpath : "?", fpath != NULL ? fpath :
			    "?");
		if (found != 1)
			goto out;
		/* The source's static keys win over its role_arn (the
		 * SDKs); a profile naming itself must have them. */
		if ((src[K_AKID] != NULL && src[K_SECRET] != NULL) ||
		    (self && src[K_AKID] == NULL)) {
			if (src[K_AKID] == NULL || src[K_SECRET] == NULL) {
				snprintf(err, errlen, "source_profile %s of AWS "
				    "profile %s holds no aws_access_key_id and "
				    "aws_secret_access_key", vals[K_SOURCE],
				    cur);
				goto out;
			}
			p->src = CREDS_PROFILE;
			creds_take_keys(p, src);
			break;
		}
		if (src[K_ROLE] != NULL && src[K_WEBID] != NULL &&
		    src[K_SOURCE] == NULL && src[K_CREDSRC] == NULL) {
			p->src = CREDS_WEB_IDENTITY;
			p->src_role_arn = src[K_ROLE];
			p->src_session_name = src[K_SESSION];
			p->token_file = src[K_WEBID];
			src[K_ROLE] = src[K_SESSION] = src[K_WEBID] = NULL;
			if (creds_profile_duration(vals[K_SOURCE],
			    src[K_DURATION], &p->src_duration, err, errlen) ==
			    -1)
				goto out;
			if (p->src_session_name == NULL &&
			    (p->src_session_name = creds_sts_session_name()) ==
			    NULL)
				goto nomem;
			break;
		}
		if (src[K_ROLE] != NULL) {
			/* Found outermost first; roles[] is innermost
			 * first, so each new one goes in front. */
			memset(&tmp, 0, sizeof tmp);
			if (creds_profile_take_role(&tmp, vals[K_SOURCE], src,
			    err, errlen) == -1) {
				creds_role_clear(&tmp);
				goto out;
			}
			memmove(&p->roles[1], &p->roles[0], p->n_roles *
			    sizeof p->roles[0]);
			p->roles[0] = tmp;
			p->n_roles++;
			if ((p->roles[0].source = creds_strdup(
			    src[K_SOURCE])) == NULL && src[K_SOURCE] != NULL)
				goto nomem;
			for (i = 0; i < NKEYS; i++) {
				free(vals[i]);
				vals[i] = src[i];
				src[i] = NULL;
			}
			cur = p->roles[0].profile;
			continue;
		}
		if (src[K_PROCESS] != NULL) {
			p->src = CREDS_PROCESS;
			p->command = src[K_PROCESS];
			src[K_PROCESS] = NULL;
			break;
		}
		snprintf(err, errlen, "source_profile %s of AWS profile %s "
		    "holds no aws_access_key_id and aws_secret_access_key, "
		    "role_arn or credential_process", vals[K_SOURCE], cur);
		goto out;
	}
	if ((p->path = strdup(in_c ? cpath : fpath)) == NULL)
		goto nomem;
	rv = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	creds_vals_free(src);
	free(cpath);
	free(fpath);
	return (rv);
}

/*
 * A profile's role_arn: with web_identity_token_file (and no other
 * source), STS AssumeRoleWithWebIdentity; with source_profile or
 * credential_source, STS AssumeRole signed with what that source hands
 * out, a chain when the source is a role itself (creds_profile_walk).
 */
static int
creds_profile_role(struct creds_plan *p, char *vals[NKEYS], char *err,
    size_t errlen, const char *user)
{
	struct creds_role	r;
	int			rv;

	memset(&r, 0, sizeof r);
	if (creds_profile_take_role(&r, p->profile, vals, err, errlen) == -1) {
		creds_role_clear(&r);
		return (-1);
	}
	p->role_arn = r.role_arn;
	p->session_name = r.session_name;
	p->external_id = r.external_id;
	p->duration = r.duration;
	r.role_arn = r.session_name = r.external_id = NULL;
	creds_role_clear(&r);
	if (vals[K_WEBID] != NULL && vals[K_SOURCE] == NULL &&
	    vals[K_CREDSRC] == NULL) {
		p->kind = CREDS_WEB_IDENTITY;
		p->token_file = vals[K_WEBID];
		vals[K_WEBID] = NULL;
		return (0);
	}
	p->kind = CREDS_ASSUME_ROLE;
	if (vals[K_SOURCE] != NULL &&
	    (p->source_profile = strdup(vals[K_SOURCE])) == NULL) {
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	rv = creds_profile_walk(p, vals, user, err, errlen);
	return (rv);
}

int
creds_profile_plan(const struct conf *c, struct creds_plan *p, char *err,
    size_t errlen)
{
	char		*vals[NKEYS] = { NULL }, *cpath = NULL, *fpath = NULL;
	const char	*profile = c->aws.profile != NULL ? c->aws.profile :
			    "default";
	int		 rv = -1, found, in_c = 0;

	found = creds_profile_read(profile, c->user, vals, &cpath, &fpath,
	    &in_c, err, errlen);
	if (found == -1)
		goto out;
	if (found == 0) {
		rv = 0;
		if (c->aws.profile != NULL) {
			snprintf(err, errlen, "AWS profile %s is in neither %s "
			    "nor %s", profile, cpath != NULL ? cpath : "?",
			    fpath != NULL ? fpath : "?");
			rv = -1;
		}
		goto out;
	}
	if ((p->profile = strdup(profile)) == NULL)
		goto nomem;
	if (vals[K_ROLE] != NULL) {
		rv = creds_profile_role(p, vals, err, errlen, c->user);
		goto out;
	}
	if (vals[K_AKID] != NULL || vals[K_SECRET] != NULL) {
		if (vals[K_AKID] == NULL || vals[K_SECRET] == NULL) {
			snprintf(err, errlen, "AWS profile %s sets only one of "
			    "aws_access_key_id and aws_secret_access_key",
			    profile);
			goto out;
		}
		p->kind = CREDS_PROFILE;
		creds_take_keys(p, vals);
		/* The file it came from: the credentials file wins. */
		p->path = strdup(in_c ? cpath : fpath);
	} else if (vals[K_PROCESS] != NULL) {
		p->kind = CREDS_PROCESS;
		p->command = vals[K_PROCESS];
		vals[K_PROCESS] = NULL;
		p->path = strdup(in_c ? cpath : fpath);
	}
	rv = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	creds_vals_free(vals);
	free(cpath);
	free(fpath);
	return (rv);
}

char *
creds_profile_region(const char *profile, const char *user)
{
	char	*vals[NKEYS] = { NULL }, *cpath = NULL, *fpath = NULL, *r;
	char	 err[256];
	int	 in_c;

	if (profile == NULL)
		profile = "default";
	if (creds_profile_read(profile, user, vals, &cpath, &fpath, &in_c, err,
	    sizeof err) == -1)
		vals[K_REGION] = NULL;
	r = vals[K_REGION];
	vals[K_REGION] = NULL;
	creds_vals_free(vals);
	free(cpath);
	free(fpath);
	return (r);
}
