/*
 * conf.h - what conf.c shares with conf_text.c (the secrets a configuration
 * file sets, the reading and scanning of its text before the parse) and
 * with conf_env.c (what comes from the environment) and conf_aws.c (the
 * aws section).
 */
#ifndef OUTBOXD_CONF_H
#define OUTBOXD_CONF_H

#include <sys/types.h>

#define CONF_SPANS_MAX	128	/* secret assignments noted per file */
#define CONF_TITLE_MAX	64	/* characters of a destination's name */

/*
 * Where the file sets a key whose value is a secret: the lines from the
 * key to the end of its value, and the value's text.  Found by a lexical
 * scan before the parse, so that an error on those lines, whose text
 * libconfuse may have taken from the value, is reported without it; and
 * so that a file others can read is known to hold secrets.
 */
struct conf_span {
	char		 key[40];	/* "aws.secret_access_key",
					   "destination.secret" */
	char		 title[CONF_TITLE_MAX + 1];	/* of its section
					   ("hooks"), if it is a name */
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
/* The span of secrets that holds line, or NULL. */
const struct conf_span *conf_span_at(const struct conf_secrets *, int line);
/* The span of secrets whose value holds text of at least min bytes that
 * msg quotes between two q characters, or NULL. */
const struct conf_span *conf_span_quoted(const struct conf_secrets *,
		    const char *msg, int q, size_t min);
/* The name of sp's key for messages ("webhook.secret", "secret in
 * destination hooks"): sp's own text or buf (len bytes). */
const char	*conf_span_name(const struct conf_span *sp, char *buf,
		    size_t len);
/* The line where "SECTION TITLE {" opens in buf (comments stripped), or
 * 0. */
int		 conf_find_section(const char *buf, const char *section,
		    const char *title);
/* The line of "KEY =" directly inside that section of buf (comments
 * stripped; title NULL: an untitled one), or 0. */
int		 conf_find_key(const char *buf, const char *section,
		    const char *title, const char *key);
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

/* conf.c, for conf_dest.c's checks while libconfuse parses. */
struct cfg_t;
struct cfg_opt_t;

/* conf_aws.c.  The aws settings from the parsed cfg into c: profile,
 * region (else the profile's), the file's keys and the endpoints of
 * SQS, DynamoDB and SNS (malloc'd, freed by conf_aws_free()). */
void		 conf_aws_fill(struct cfg_t *cfg, struct conf *c);
/* The rules on c's AWS settings when some worker talks to AWS (queue,
 * table, region, a source of the credential chain, whose description
 * goes into c->aws.source).  0, or -1 with "FILE: reason" in err. */
int		 conf_aws_check(struct conf *c, char *err, size_t errlen);
/* Free what conf_aws_fill() put into c. */
void		 conf_aws_free(struct conf *c);
/* Report an error of ours (its text is no libconfuse's and shows no
 * secret) at line (0: the line being parsed) of the file being parsed;
 * the parse then fails with it unless an error came first. */
void		 conf_errorf(struct cfg_t *, int line, const char *, ...)
		    OUTBOXD_PRINTF(3, 4);
/* The line where "SECTION TITLE {" opens in the file being parsed, or 0. */
int		 conf_section_line(const char *section, const char *title);
/* The line of "KEY =" in that section of the file being parsed, or 0. */
int		 conf_key_line(const char *section, const char *title,
		    const char *key);
/* "FILE:LINE" in buf (len bytes) for an error about SECTION.KEY found
 * once the file is read (an untitled section): the key's line, else the
 * section's, else just FILE.  Returns buf. */
const char	*conf_key_at(const struct conf *c, const char *section,
		    const char *key, char *buf, size_t len);

/* conf_value.c.  Set the validate callbacks of every key outside the
 * destination sections and relay.mode on cfg (before the parse), and
 * conf_dest_check.c's and conf_wal.c's. */
void		 conf_value_validators(struct cfg_t *cfg);
/* A validate callback: opt's value is "" or an http:// or https:// URL
 * libcurl's URL parser takes, with a host and a port other than 0. */
int		 conf_check_url(struct cfg_t *, struct cfg_opt_t *);
/* Split "host:port", "[v6]:port", "*:port" or ":port" into *host (NULL:
 * every address) and *port, both malloc'd.  0, or -1 on a malformed
 * value. */
int		 conf_split_listen(const char *s, char **host, char **port);

/* conf_dest_check.c.  Set the validate callbacks of destination NAME {}
 * and of relay.default_destination on cfg (before the parse). */
void		 conf_dest_validators(struct cfg_t *cfg);
/* libconfuse's error msg (len bytes) about destination sections
 * reworded for operators, in place (messages in English only); 1 if it
 * was one. */
int		 conf_dest_reword(char *msg, size_t len);
/* The sink kind (enum conf_sink) a sink = value names, or -1. */
int		 conf_dest_sink_of(const char *name);
/* A key of sec that is set: a string not to "" (which is unset), a
 * boolean to anything (ordering = false in an sqs destination is as
 * wrong as true). */
int		 conf_dest_set(struct cfg_t *sec, const char *key);
/* v as a message may show it, in buf (len bytes): printable ASCII but
 * '"' ('?' for the rest), at most 64 characters ("..." after).  Returns
 * buf. */
const char	*conf_dest_shown(const char *v, char *buf, size_t len);
/* The most messages per publish call (*max_batch) and publish calls in
 * flight (*slots) a destination of sink kind (enum conf_sink) may be set
 * to: the sinks' own (struct sink), which test_conf.c checks.  0, or -1
 * for an unknown kind. */
int		 conf_dest_limits(int kind, int *max_batch, int *slots);

/* conf_dest.c.  The relays' destinations from the parsed cfg: every
 * destination NAME {} section, then the one relay.sink with sqs {} /
 * webhook {} makes ("default") when it exists (outbox.conf(5),
 * DESTINATIONS); relay.default_destination; and the rules across them
 * (relay.lease, a default when POST /orders and relays both run).  0, or
 * -1 with "FILE: reason" in err. */
int		 conf_dest_fill(struct cfg_t *cfg, struct conf *c, char *err,
		    size_t errlen);
/* Free the destinations of c. */
void		 conf_dest_free(struct conf *);

/* conf_wal.c.  Set the validate callbacks of relay.mode and the
 * relay.wal_* keys on cfg (before the parse). */
void		 conf_wal_validators(struct cfg_t *cfg);
/* relay.mode and the relay.wal_* keys from the parsed relay section into
 * c (validated already). */
void		 conf_wal_fill(struct cfg_t *relay, struct conf *c);

#endif /* OUTBOXD_CONF_H */
