/*
 * conf.h - what conf.c and conf_text.c share: the secrets a configuration
 * file sets, and the reading and scanning of its text before the parse.
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

#endif /* OUTBOXD_CONF_H */
