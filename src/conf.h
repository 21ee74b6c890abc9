/*
 * conf.h - what conf.c shares with conf_text.c (the secrets a configuration
 * file sets, the reading and scanning of its text before the parse) and
 * with conf_env.c (what comes from the environment).
 */
#ifndef OUTBOXD_CONF_H
#define OUTBOXD_CONF_H

#include <sys/types.h>

#define CONF_SPANS_MAX	32	/* secret assignments noted per file */

/*
 * Where the file sets a key whose value is a secret: the lines from the
 * key to the end of its value, and the value's text.  Found by a lexical
 * scan before the parse, so that an error on those lines, whose text
 * libconfuse may have taken from the value, is reported without it; and
 * so that a file others can read is known to hold secrets.
 */
struct conf_span {
	char		 key[40];	/* "aws.secret_access_key" */
	int		 first, last;	/* lines */
	const char	*value;		/* into the file's buffer */
	size_t		 len;
	int		 quote;		/* '"', '\'' or 0 (bare) */
};

/* The secrets one file sets, in the order they stand. */
struct conf_secrets {
	struct conf_span spans[CONF_SPANS_MAX];
	int		 n;
	int		 full;		/* more than CONF_SPANS_MAX */
};

/*
 * Read the whole file at path into memory: a regular file of at most
 * CONF_MAX_SIZE bytes (outboxd.h), refused before it is opened and again
 * after.  Returns a NUL-terminated malloc'd buffer (caller frees) with its
 * length, which may count NUL bytes, in *lenp and the file's mode in
 * *modep; or NULL with "FILE: reason" in err (errlen bytes).
 */
char		*conf_read(const char *path, size_t *lenp, mode_t *modep,
		    char *err, size_t errlen);
/* The line of the first NUL byte in buf[0..len), or 0 if there is none. */
int		 conf_find_nul(const char *buf, size_t len);
/* Blank out the comments of the NUL-terminated buf, keeping every newline
 * (libconfuse 3.3 miscounts lines in comments).  Returns the line of the
 * first comment marker glued to a bare value (which libconfuse would cut
 * there: quote the value), or 0. */
int		 conf_strip_comments(char *buf);
/* Note every assignment of a secret key in buf (comments stripped) in
 * *secrets; its spans point into buf. */
void		 conf_scan_secrets(const char *buf, struct conf_secrets *);
/* The line where the first string that spans lines opens, or 0. */
int		 conf_find_open_quote(const char *buf);
/* A warning (caller frees) when others may read the file at path (mode)
 * and it holds a literal secret: the file, its mode and the keys, never a
 * value; NULL when none is due. */
char		*conf_mode_warning(const char *path, mode_t mode,
		    const struct conf_secrets *);

/* conf_env.c.  The first non-empty of a value from the file and the
 * environment variables env1, env2 (either may be NULL); not copied. */
const char	*conf_pick(const char *file_value, const char *env1,
		    const char *env2);
/* An endpoint base URL without a trailing '/' (caller frees; NULL if out
 * of memory or no region): the service's file setting, the global one,
 * svc_env, AWS_ENDPOINT_URL, else https://SERVICE.REGION.amazonaws.com,
 * as the AWS SDKs resolve it. */
char		*conf_endpoint(const char *svc_file, const char *aws_file,
		    const char *svc_env, const char *service, const char *region);
/* 0 if an HTTP worker's descriptors (http.db_connections, our own and
 * http.max_connections, at least one) fit in RLIMIT_NOFILE; else -1 with
 * the reason in err. */
int		 conf_check_nofile(const struct conf *, char *err,
		    size_t errlen);

/* conf_dest.c.  The relays' destinations: every destination NAME {}
 * section of cfg (a cfg_t of libconfuse), then the one relay.sink with
 * sqs {} / webhook {} makes ("default") unless a section has that name;
 * and relay.default_destination.  0, or -1 with "FILE: reason" in err. */
struct cfg_t;
int		 conf_dest_fill(struct cfg_t *cfg, struct conf *c, char *err,
		    size_t errlen);
/* Free the destinations of c. */
void		 conf_dest_free(struct conf *);

#endif /* OUTBOXD_CONF_H */
