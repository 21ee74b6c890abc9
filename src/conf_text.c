/*
 * conf_text.c - the configuration file's text before libconfuse parses
 * it: reading the file safely, finding NUL bytes and unclosed quotes,
 * blanking comments, and where the file sets a secret.
 *
 * Kept apart from conf.c (the only file that knows libconfuse) because
 * none of it needs the parser: it decides what the parser is given and
 * what an error or a warning about the file may show.
 */
#include "config.h"

#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outboxd.h"
#include "conf.h"

/* A character of a bare (unquoted) value: a comment marker right after
 * one is glued to it. */
#define CONF_IS_BARE(c)	(isalnum((unsigned char)(c)) || \
			    strchr("_-.:/@+%$!?&=~*^", (c)) != NULL)

/* What a file that is not a regular file is, for the refusal. */
static const char *
conf_file_kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO (named pipe)";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "of an unknown type";
}

/*
 * Read the whole file into memory: a regular file of at most CONF_MAX_SIZE
 * bytes.  Anything else is refused before it is opened (opening a FIFO
 * waits for a writer, opening a device can do things), and checked again
 * once it is, with O_NONBLOCK so a FIFO swapped in meanwhile cannot block
 * the open.  The read is bounded even when st_size says nothing (/proc).
 * Returns a NUL-terminated malloc'd buffer with its length (which may
 * hold NUL bytes) in *lenp and the file's mode in *modep, or NULL with
 * "FILE: reason" in err.
 */
char *
conf_read(const char *path, size_t *lenp, mode_t *modep, char *err,
    size_t errlen)
{
	struct stat	 st;
	char		*buf = NULL, *p;
	size_t		 len = 0, cap;
	ssize_t		 n;
	int		 fd = -1, serrno;

	if (stat(path, &st) == -1)
		goto fail_errno;
	if (!S_ISREG(st.st_mode))
		goto not_regular;
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC |
	    O_NOCTTY)) == -1 || fstat(fd, &st) == -1)
		goto fail_errno;
	if (!S_ISREG(st.st_mode))
		goto not_regular;
	if (st.st_size > CONF_MAX_SIZE)
		goto too_large;
	cap = st.st_size < 4096 ? 4096 : (size_t)st.st_size + 1;
	if ((buf = malloc(cap + 1)) == NULL)
		goto fail_errno;
	for (;;) {
		if (len == cap) {
			if (len > CONF_MAX_SIZE)
				goto too_large;
			cap = cap * 2 > CONF_MAX_SIZE + 1 ? CONF_MAX_SIZE + 1 :
			    cap * 2;
			if ((p = realloc(buf, cap + 1)) == NULL)
				goto fail_errno;
			buf = p;
		}
		if ((n = read(fd, buf + len, cap - len)) == -1) {
			if (errno == EINTR)
				continue;
			goto fail_errno;
		}
		if (n == 0)
			break;
		len += n;
	}
	if (len > CONF_MAX_SIZE)
		goto too_large;
	close(fd);
	buf[len] = '\0';
	*lenp = len;
	*modep = st.st_mode;
	return buf;

fail_errno:
	serrno = errno;
	snprintf(err, errlen, "%s: %s", path, strerror(serrno));
	goto fail;
not_regular:
	snprintf(err, errlen, "%s: is %s, not a regular file", path,
	    conf_file_kind(st.st_mode));
	goto fail;
too_large:
	snprintf(err, errlen, "%s: is larger than %d bytes (1 MiB), the most "
	    "a configuration file may hold", path, CONF_MAX_SIZE);
fail:
	if (fd != -1)
		close(fd);
	free(buf);
	return NULL;
}

/* The line of the first NUL byte in buf[0..len), or 0 if there is none.
 * libconfuse would take it for the end of the file. */
int
conf_find_nul(const char *buf, size_t len)
{
	const char	*z = memchr(buf, '\0', len), *p;
	int		 line = 1;

	if (z == NULL)
		return 0;
	for (p = buf; p < z; p++)
		if (*p == '\n')
			line++;
	return line;
}

/*
 * Blank out the comments of buf ("#" and "//" to the end of the line, and
 * C-style blocks), keeping every newline.  libconfuse 3.3 counts each
 * comment line more than once, so error line numbers in a commented file
 * pointed past the fault; with the comments gone its count is right.
 */
int
conf_strip_comments(char *buf)
{
	char	*p;
	int	 quote = 0, line = 1, glued = 0;

	for (p = buf; *p != '\0'; p++) {
		if (*p == '\n')
			line++;
		if (quote) {
			if (*p == '\\' && p[1] != '\0')
				p++;
			else if (*p == quote)
				quote = 0;
		} else if (*p == '"' || *p == '\'') {
			quote = *p;
		} else if (*p == '#' || (*p == '/' && (p[1] == '/' ||
		    p[1] == '*'))) {
			/* Right after a word, the marker cuts a bare value
			 * short (a token "abc#def", a URL "postgres://"):
			 * libconfuse would take the rest for a comment. */
			if (!glued && p > buf && CONF_IS_BARE(p[-1]))
				glued = line;
			if (*p != '/' || p[1] == '/') {
				for (; *p != '\0' && *p != '\n'; p++)
					*p = ' ';
				if (*p == '\0')
					break;
				line++;
				continue;
			}
			for (; *p != '\0' && !(*p == '*' && p[1] == '/'); p++)
				if (*p != '\n')
					*p = ' ';
				else
					line++;
			if (*p == '\0')
				break;
			p[0] = p[1] = ' ';
			p++;
		}
	}
	return glued;
}

/* Keys whose value is a secret, wherever they are written (a misplaced
 * one is still somebody's secret). */
static int
conf_is_secret_key(const char *k, size_t n)
{
	static const char *const	 keys[] = { "secret_access_key",
					    "session_token", "secret", "token",
					    "database" };
	size_t				 i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strlen(keys[i]) == n && strncmp(k, keys[i], n) == 0)
			return 1;
	return 0;
}

#define CONF_IS_WORD(c)	(isalnum((unsigned char)(c)) || (c) == '_' || \
			    (c) == '-' || (c) == '.')

/* Is p a title (a bare word or a quoted string) followed by "{"?  Its
 * text (escapes as written) in *t and *n if so. */
static int
conf_title_at(const char *p, const char **t, size_t *n)
{
	int	q;

	if (*p == '"' || *p == '\'') {
		for (q = *p++, *t = p; *p != '\0' && *p != q; p++)
			if (*p == '\\' && p[1] != '\0')
				p++;
		if (*p == '\0')
			return 0;
		*n = p++ - *t;
	} else {
		for (*t = p; CONF_IS_WORD(*p); p++)
			;
		if ((*n = p - *t) == 0)
			return 0;
	}
	for (; isspace((unsigned char)*p); p++)
		;
	return *p == '{';
}

/* Does p start a title followed by "{"?  If so, title gets it when it is
 * a destination name (else "": one that is not is never shown). */
static int
conf_titled(const char *p, char *title)
{
	const char	*t;
	size_t		 n, i;

	if (!conf_title_at(p, &t, &n))
		return 0;
	for (i = 0; i < n && CONF_IS_WORD(t[i]); i++)
		;
	snprintf(title, CONF_TITLE_MAX + 1, "%.*s", i == n && n <=
	    CONF_TITLE_MAX ? (int)n : 0, t);
	return 1;
}

/* Past the title at p (conf_titled() said there is one) to its "{",
 * counting newlines into *line. */
static const char *
conf_skip_title(const char *p, int *line)
{
	int	q;

	if (*p == '"' || *p == '\'') {
		for (q = *p++; *p != q; p++)
			if (*p == '\n')
				(*line)++;
			else if (*p == '\\' && p[1] != '\0')
				p++;
		p++;
	} else
		for (; CONF_IS_WORD(*p); p++)
			;
	for (; *p != '{'; p++)
		if (*p == '\n')
			(*line)++;
	return p;
}

/*
 * Find every "KEY = value" of a secret key in buf (comments stripped) and
 * remember it in secrets: a key, "=" or "+=", then a quoted string (to
 * its closing quote) or a bare value (to the end of the line).  Only a
 * sketch of libconfuse's grammar, and it need not be more: it decides
 * what an error message may show, and whether the file holds a secret.
 */
void
conf_scan_secrets(const char *buf, struct conf_secrets *secrets)
{
	struct conf_span	*sp;
	const char		*p = buf, *w, *v;
	char			 section[32] = "", title[CONF_TITLE_MAX + 1] = "";
	size_t			 wn;
	int			 line = 1, kline, q;

	secrets->n = 0;
	secrets->full = 0;
	while (*p != '\0') {
		if (*p == '\n') {
			line++;
			p++;
		} else if (*p == '"' || *p == '\'') {
			for (q = *p++; *p != '\0' && *p != q; p++) {
				if (*p == '\n')
					line++;
				else if (*p == '\\' && p[1] != '\0' &&
				    p[1] != '\n')
					p++;
			}
			if (*p != '\0')
				p++;
		} else if (*p == '}') {
			section[0] = title[0] = '\0';
			p++;
		} else if (!CONF_IS_WORD(*p)) {
			p++;
		} else {
			for (w = p; CONF_IS_WORD(*p); p++)
				;
			wn = p - w;
			kline = line;
			for (; isspace((unsigned char)*p); p++)
				if (*p == '\n')
					line++;
			if (*p == '{' || conf_titled(p, title)) {
				snprintf(section, sizeof(section), "%.*s",
				    (int)(wn < sizeof(section) ? wn :
				    sizeof(section) - 1), w);
				if (*p != '{')
					p = conf_skip_title(p, &line);
				else
					title[0] = '\0';
				p++;
				continue;
			}
			if (*p == '+' && p[1] == '=')
				p++;
			if (*p != '=' || !conf_is_secret_key(w, wn))
				continue;
			for (p++; isspace((unsigned char)*p); p++)
				if (*p == '\n')
					line++;
			if (secrets->n == CONF_SPANS_MAX) {
				secrets->full = 1;
				continue;
			}
			sp = &secrets->spans[secrets->n++];
			snprintf(sp->key, sizeof(sp->key), "%s%s%.*s",
			    section, *section ? "." : "", (int)wn, w);
			snprintf(sp->title, sizeof(sp->title), "%s", title);
			sp->first = kline;
			if (*p == '"' || *p == '\'') {
				sp->quote = *p++;
				for (v = p; *p != '\0' && *p != sp->quote;
				    p++) {
					if (*p == '\n')
						line++;
					else if (*p == '\\' && p[1] != '\0' &&
					    p[1] != '\n')
						p++;
				}
				sp->value = v;
				sp->len = p - v;
				if (*p != '\0')
					p++;
			} else {
				sp->quote = 0;
				for (v = p; *p != '\0' && *p != '\n'; p++)
					;
				sp->value = v;
				sp->len = p - v;
			}
			sp->last = line;
		}
	}
}

/* The secret span of secrets holding line, or NULL. */
const struct conf_span *
conf_span_at(const struct conf_secrets *secrets, int line)
{
	int	i;

	for (i = 0; i < secrets->n; i++)
		if (line >= secrets->spans[i].first &&
		    line <= secrets->spans[i].last)
			return &secrets->spans[i];
	return NULL;
}

/*
 * Does msg quote (between two q characters) text that is part of a secret
 * value?  libconfuse names the token it stumbled on, which can be a piece
 * of a bare value even when its line count is off; a message of ours
 * shows the value of the key it is about, which a mistake may have made
 * of a secret's text.  Quoted text shorter than min is not compared (a
 * "=" libconfuse names, a "sqs" of ours).
 */
const struct conf_span *
conf_span_quoted(const struct conf_secrets *secrets, const char *msg, int q,
    size_t min)
{
	const char	*a, *b;
	size_t		 n;
	int		 i;

	for (a = strchr(msg, q); a != NULL; a = strchr(b + 1, q)) {
		if ((b = strchr(a + 1, q)) == NULL)
			break;
		if ((n = b - a - 1) >= min)
			for (i = 0; i < secrets->n; i++)
				if (memmem(secrets->spans[i].value,
				    secrets->spans[i].len, a + 1, n) != NULL)
					return &secrets->spans[i];
	}
	return NULL;
}

/* What messages call the key of sp: "webhook.secret", or "secret in
 * destination hooks". */
const char *
conf_span_name(const struct conf_span *sp, char *buf, size_t len)
{
	const char	*dot = strchr(sp->key, '.');

	if (sp->title[0] == '\0' || dot == NULL)
		return sp->key;
	snprintf(buf, len, "%s in %.*s %s", dot + 1, (int)(dot - sp->key),
	    sp->key, sp->title);
	return buf;
}

/* Skip the quoted string at p (which is at its quote), counting its
 * newlines in *line: past its closing quote. */
static const char *
conf_skip_quoted(const char *p, int *line)
{
	int	q;

	for (q = *p++; *p != '\0' && *p != q; p++)
		if (*p == '\n')
			(*line)++;
		else if (*p == '\\' && p[1] != '\0')
			p++;
	return *p != '\0' ? p + 1 : p;
}

/*
 * Where "SECTION TITLE {" opens in buf (comments stripped), the title bare
 * or quoted ("SECTION {" when title is NULL): its line in *line and the
 * text after SECTION, or NULL if it is not found.
 */
static const char *
conf_section_scan(const char *buf, const char *section, const char *title,
    int *line)
{
	const char	*p = buf, *w, *t;
	size_t		 n = strlen(section), tn;

	*line = 1;
	while (*p != '\0') {
		if (*p == '\n') {
			(*line)++;
			p++;
		} else if (*p == '"' || *p == '\'') {
			p = conf_skip_quoted(p, line);
		} else if (!CONF_IS_WORD(*p)) {
			p++;
		} else {
			for (w = p; CONF_IS_WORD(*p); p++)
				;
			if ((size_t)(p - w) != n || strncmp(w, section, n) != 0)
				continue;
			for (; *p == ' ' || *p == '\t'; p++)
				;
			if (title == NULL) {	/* untitled: "SECTION {" */
				for (t = p; *t == ' ' || *t == '\t' ||
				    *t == '\r' || *t == '\n'; t++)
					;
				if (*t == '{')
					return p;
				continue;
			}
			if (conf_title_at(p, &t, &tn) && tn == strlen(title) &&
			    strncmp(t, title, tn) == 0)
				return p;
		}
	}
	return NULL;
}

/*
 * The line of a titled section's opening, or 0 if it is not found.  For
 * the messages about a titled section as a whole, which libconfuse gives
 * only the line of its end.
 */
int
conf_find_section(const char *buf, const char *section, const char *title)
{
	int	line;

	return conf_section_scan(buf, section, title, &line) != NULL ? line :
	    0;
}

/*
 * The line of "KEY =" directly inside that section, the last one if it is
 * set twice (libconfuse keeps the last value), or 0.  For checks made once
 * the whole file is read (a name that no section defines, two keys that
 * must agree), which libconfuse would report at the line it stopped on.
 */
int
conf_find_key(const char *buf, const char *section, const char *title,
    const char *key)
{
	const char	*p, *w;
	size_t		 n = strlen(key);
	int		 line, depth = 0, found = 0;

	if ((p = conf_section_scan(buf, section, title, &line)) == NULL)
		return 0;
	while (*p != '\0') {
		if (*p == '\n') {
			line++;
			p++;
		} else if (*p == '"' || *p == '\'') {
			p = conf_skip_quoted(p, &line);
		} else if (*p == '{' || *p == '}') {
			if ((depth += *p++ == '{' ? 1 : -1) == 0)
				return found;
		} else if (!CONF_IS_WORD(*p)) {
			p++;
		} else {
			for (w = p; CONF_IS_WORD(*p); p++)
				;
			if (depth != 1 || (size_t)(p - w) != n ||
			    strncmp(w, key, n) != 0)
				continue;
			for (; *p == ' ' || *p == '\t'; p++)
				;
			if (*p == '=')
				found = line;
		}
	}
	return found;
}

/*
 * libconfuse reports an unterminated string at the end of the file, and a
 * later quote closes it, so the fault is far from where it is reported.
 * Strings rarely span lines in this file: return the line where the first
 * one that does opens, or 0 if none does.
 */
int
conf_find_open_quote(const char *buf)
{
	const char	*p;
	int		 line = 1, open_line = 0, quote = 0;

	for (p = buf; *p != '\0'; p++) {
		if (*p == '\n') {
			if (quote)
				return open_line;
			line++;
			continue;
		}
		if (quote) {
			if (*p == '\\' && p[1] != '\0' && p[1] != '\n')
				p++;
			else if (*p == quote)
				quote = 0;
		} else if (*p == '"' || *p == '\'') {
			quote = *p;
			open_line = line;
		}
	}
	return quote ? open_line : 0;
}

/* Does a database value (conninfo or URI, as written) hold a password? */
static int
conf_db_has_password(const char *v, size_t n)
{
	const char	*p, *end = v + n, *auth, *at = NULL, *q;

	if ((n > 13 && strncmp(v, "postgresql://", 13) == 0) ||
	    (n > 11 && strncmp(v, "postgres://", 11) == 0)) {
		auth = strstr(v, "://") + 3;
		for (p = auth; p < end && *p != '/' && *p != '?' && *p != '#';
		    p++)
			if (*p == '@')
				at = p;
		if (at != NULL && (q = memchr(auth, ':', at - auth)) != NULL &&
		    q + 1 < at)
			return 1;
	}
	for (p = v; (p = memmem(p, end - p, "password", 8)) != NULL; p += 8) {
		if (p > v && !isspace((unsigned char)p[-1]) && p[-1] != '?' &&
		    p[-1] != '&')
			continue;
		for (q = p + 8; q < end && isspace((unsigned char)*q); q++)
			;
		if (q < end && *q == '=')
			return 1;
	}
	return 0;
}

/* A value that is only "${NAME}" keeps its secret in the environment. */
static int
conf_span_is_literal(const struct conf_span *sp)
{
	if (sp->len == 0)
		return 0;
	return !(sp->quote != '\'' && sp->len > 3 &&
	    strncmp(sp->value, "${", 2) == 0 && sp->value[sp->len - 1] == '}' &&
	    memchr(sp->value, '}', sp->len) == sp->value + sp->len - 1);
}

/* Add item to the ", "-separated list of len bytes; one that has no
 * room for it ends ", ..." and takes no more. */
static void
conf_list_add(char *list, size_t len, const char *item)
{
	size_t	n = strlen(list);

	if (n >= 3 && strcmp(list + n - 3, "...") == 0)
		return;
	if (n + 2 + strlen(item) + 6 > len)
		snprintf(list + n, len - n, "%s...", n ? ", " : "");
	else
		snprintf(list + n, len - n, "%s%s", n ? ", " : "", item);
}

/*
 * A file that every user may read and that holds a secret (the scan of
 * secrets) gets a warning, as ssh and PgBouncer give: one line, naming
 * the file and its mode and the keys, never a value.  NULL if none is due.
 */
char *
conf_mode_warning(const char *path, mode_t mode,
    const struct conf_secrets *secrets)
{
	static const char *const	 keys[] = {
		"aws.secret_access_key", "aws.session_token", "webhook.secret",
		"admin.token"
	};
	const struct conf_span		*sp;
	char				 list[400] = "", name[120], *w;
	int				 i, found[5] = { 0 };
	size_t				 k;

	if (!(mode & S_IROTH))
		return NULL;
	for (i = 0; i < secrets->n; i++) {
		sp = &secrets->spans[i];
		if (!conf_span_is_literal(sp))
			continue;
		if (strcmp(sp->key, "database") == 0) {
			if (conf_db_has_password(sp->value, sp->len))
				found[4] = 1;
			continue;
		}
		for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (strcmp(sp->key, keys[k]) == 0)
				found[k] = 1;
	}
	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (found[k])
			conf_list_add(list, sizeof(list), keys[k]);
	/* A destination's secret, by its destination's name. */
	for (i = 0; i < secrets->n; i++)
		if (strcmp(secrets->spans[i].key, "destination.secret") == 0 &&
		    conf_span_is_literal(&secrets->spans[i]))
			conf_list_add(list, sizeof(list), conf_span_name(
			    &secrets->spans[i], name, sizeof(name)));
	if (found[4])
		conf_list_add(list, sizeof(list), "a password in database");
	if (*list == '\0')
		return NULL;
	if (asprintf(&w, "%s: mode %04o lets every user read this file, and "
	    "it holds secrets (%s): chmod o-r it", path,
	    (unsigned)(mode & 07777), list) == -1)
		return NULL;
	return w;
}
