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

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "outboxd.h"
#include "creds.h"

enum { K_AKID, K_SECRET, K_TOKEN, K_PROCESS, K_ROLE, K_SOURCE, K_WEBID,
	K_REGION, K_SESSION, K_EXTID, NKEYS };
static const char *const creds_keys[NKEYS] = {
	"aws_access_key_id", "aws_secret_access_key", "aws_session_token",
	"credential_process", "role_arn", "source_profile",
	"web_identity_token_file", "region", "role_session_name",
	"external_id"
};

/* The file env names, else name under the service user's home. */
static char *
creds_profile_file(const char *env, const char *name, const char *user)
{
	const char	*v, *home = NULL;
	struct passwd	*pw;
	char		*s;

	if ((v = getenv(env)) != NULL && *v != '\0') {
		if (v[0] == '~' && v[1] == '/')
			name = v + 2;
		else
			return (strdup(v));
	} else if (name == NULL)
		return (NULL);
	if (user != NULL && (pw = getpwnam(user)) != NULL)
		home = pw->pw_dir;
	else if ((v = getenv("HOME")) != NULL && *v != '\0')
		home = v;
	else if ((pw = getpwuid(getuid())) != NULL)
		home = pw->pw_dir;
	if (home == NULL)
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

/*
 * Read section sect (or alt, unless NULL) of the INI file at path into
 * vals[] for the keys not set yet.  Returns 1 if the section is there, 0
 * if not (or the file does not exist), -1 if the file cannot be read.
 */
static int
creds_ini_read(const char *path, const char *sect, const char *alt,
    char *vals[NKEYS])
{
	FILE	*f;
	char	*line = NULL, *p, *k, *eq;
	size_t	 cap = 0;
	int	 in = 0, found = 0, i;

	if ((f = fopen(path, "r")) == NULL)
		return (errno == ENOENT ? 0 : -1);
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
		    "%s: %s", *cpath, strerror(errno));
		return (-1);
	}
	*in_c = vals[K_SECRET] != NULL || vals[K_PROCESS] != NULL;
	b = *fpath != NULL ? creds_ini_read(*fpath, sect,
	    strcmp(profile, "default") == 0 ? "default" : NULL, vals) : 0;
	if (b == -1) {
		snprintf(err, errlen, "cannot read the shared config file %s: "
		    "%s", *fpath, strerror(errno));
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

/*
 * A profile's role_arn: with web_identity_token_file, STS
 * AssumeRoleWithWebIdentity; with source_profile, STS AssumeRole signed
 * with that profile's static keys (it may be the profile itself).  A
 * source that is itself a role, a process or credential_source is
 * refused by name rather than half done.
 */
static int
creds_profile_role(struct creds_plan *p, char *vals[NKEYS], char *err,
    size_t errlen, const char *user)
{
	char	*src[NKEYS] = { NULL }, *cpath = NULL, *fpath = NULL;
	int	 in_c = 0, found, rv = -1;

	p->role_arn = vals[K_ROLE];
	p->session_name = vals[K_SESSION];
	vals[K_ROLE] = vals[K_SESSION] = NULL;
	if (p->session_name == NULL &&
	    (p->session_name = creds_sts_session_name()) == NULL)
		goto nomem;
	if (vals[K_WEBID] != NULL && vals[K_SOURCE] == NULL) {
		p->kind = CREDS_WEB_IDENTITY;
		p->token_file = vals[K_WEBID];
		vals[K_WEBID] = NULL;
		return (0);
	}
	p->kind = CREDS_ASSUME_ROLE;
	if (vals[K_SOURCE] == NULL) {
		snprintf(err, errlen, "AWS profile %s sets role_arn without "
		    "source_profile or web_identity_token_file (credential_"
		    "source is not supported)", p->profile);
		return (-1);
	}
	p->source_profile = vals[K_SOURCE];
	p->external_id = vals[K_EXTID];
	vals[K_SOURCE] = vals[K_EXTID] = NULL;
	found = creds_profile_read(p->source_profile, user, src, &cpath,
	    &fpath, &in_c, err, errlen);
	if (found == 0)
		snprintf(err, errlen, "source_profile %s of AWS profile %s is "
		    "in neither %s nor %s", p->source_profile, p->profile,
		    cpath != NULL ? cpath : "?", fpath != NULL ? fpath : "?");
	else if (found == 1 && (src[K_AKID] == NULL || src[K_SECRET] == NULL ||
	    (strcmp(p->source_profile, p->profile) != 0 && src[K_ROLE])))
		snprintf(err, errlen, "source_profile %s of AWS profile %s "
		    "holds no aws_access_key_id and aws_secret_access_key "
		    "(only static keys can be a source here)",
		    p->source_profile, p->profile);
	else if (found == 1) {
		p->access_key_id = src[K_AKID];
		p->secret_access_key = src[K_SECRET];
		p->session_token = src[K_TOKEN];
		src[K_AKID] = src[K_SECRET] = src[K_TOKEN] = NULL;
		if ((p->path = strdup(in_c ? cpath : fpath)) == NULL)
			goto nomem;
		rv = 0;
	}
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	creds_vals_free(src);
	free(cpath);
	free(fpath);
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
		p->access_key_id = vals[K_AKID];
		p->secret_access_key = vals[K_SECRET];
		p->session_token = vals[K_TOKEN];
		vals[K_AKID] = vals[K_SECRET] = vals[K_TOKEN] = NULL;
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
