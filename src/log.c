/*
 * log.c - one line per event in logfmt (key=value), or one JSON object
 * per line with log_format = json, with time (RFC 3339, UTC, ms), level,
 * role and pid, so lines from every process can be merged; then msg, then
 * the line's own fields (log_kv: outbox_id=, order_id=, ...).
 * log_warn/fatal append strerror(errno); log_warnx/fatalx do not (as in
 * OpenBSD daemons).  log_limited() keeps a failing broker from flooding
 * the log: one line per LOG_LIMIT_MS, with a count of those held back.
 * libevent's own messages come here too (log_init()).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "outboxd.h"

static char	 log_role[32] = "outboxd";
static int	 log_level = LOG_LEVEL_INFO;
static int	 log_format = LOG_FORMAT_LOGFMT;
static int	 log_fd = STDERR_FILENO;
static char	*log_path;		/* NULL = stderr */
static unsigned	 saved_write_errors;
static struct log_limit *log_limits;	/* that held lines back */

static const char *const log_names[] = { "debug", "info", "warn", "error" };
static const char *const log_formats[] = { "logfmt", "json" };

/* Bytes of the UTF-8 sequence a lead byte c starts (1: ASCII, or a byte
 * that leads nothing). */
static size_t
log_utf8_need(unsigned char c)
{
	return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

/* Text just cut at byte n must not end inside a UTF-8 sequence (it would
 * be invalid: PostgreSQL rejects it, JSON readers fail on it): drop a last
 * sequence whose lead byte says it needs more bytes than are left. */
static void
log_utf8_trim(char *s, size_t n)
{
	size_t		 lead = n;
	unsigned char	 c;

	while (lead > 0 && n - lead < 4 &&
	    ((unsigned char)s[lead - 1] & 0xc0) == 0x80)
		lead--;
	if (lead > 0 && ((c = (unsigned char)s[lead - 1]) & 0xc0) == 0xc0 &&
	    n - lead + 1 < log_utf8_need(c))
		n = lead - 1;
	s[n] = '\0';
}

/* Bytes of the UTF-8 sequence that starts at s, as its lead byte says
 * (1 for ASCII and for a byte that leads nothing), never past its end. */
static size_t
log_utf8_len(const char *s)
{
	size_t	n = log_utf8_need((unsigned char)*s), i;

	for (i = 1; i < n; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			return i;
	return n;
}

/* Copy the character at *s to buf + off if it fits with keep bytes to
 * spare (a line cut short ends between characters, which JSON readers
 * need), leaving *s on its last byte.  Returns the new offset, or 0 if it
 * does not fit. */
static size_t
log_utf8_put(char *buf, size_t off, size_t len, size_t keep, const char **s)
{
	size_t	n = log_utf8_len(*s);

	if (off + n + keep > len)
		return 0;
	memcpy(buf + off, *s, n);
	*s += n - 1;
	return off + n;
}

char *
log_utf8_copy(char *dst, size_t size, const char *src)
{
	size_t	n = strlen(src);

	if (size == 0)
		return dst;
	if (n < size) {
		memcpy(dst, src, n + 1);
		return dst;
	}
	memcpy(dst, src, size - 1);
	log_utf8_trim(dst, size - 1);
	return dst;
}

/*
 * libevent's own messages ("[warn] Error from accept() call: ...") would
 * go to stderr raw, as often as they happen: into our lines instead, its
 * warnings and errors rate-limited like a failing broker's.  Called from
 * inside libevent, so it calls nothing of libevent's.
 */
static void
log_libevent(int severity, const char *msg)
{
	static struct log_limit	 limit;

	switch (severity) {
	case EVENT_LOG_DEBUG:
		log_debug("libevent: %s", msg);
		break;
	case EVENT_LOG_MSG:
		log_info("libevent: %s", msg);
		break;
	default:
		log_limited(&limit, severity == EVENT_LOG_WARN ?
		    LOG_LEVEL_WARN : LOG_LEVEL_ERROR, "libevent: %s", msg);
		break;
	}
}

void
log_init(const char *role, int index)
{
	event_set_log_callback(log_libevent);
	if (index >= 0)
		snprintf(log_role, sizeof(log_role), "%s.%d", role, index);
	else
		snprintf(log_role, sizeof(log_role), "%s", role);
}

void
log_set_level(int level)
{
	log_level = level;
}

void
log_set_format(int format)
{
	log_format = format == LOG_FORMAT_JSON ? LOG_FORMAT_JSON :
	    LOG_FORMAT_LOGFMT;
}

int
log_format_parse(const char *s)
{
	size_t	i;

	for (i = 0; s != NULL && i < sizeof(log_formats) /
	    sizeof(log_formats[0]); i++)
		if (strcmp(s, log_formats[i]) == 0)
			return (int)i;
	return -1;
}

int
log_level_parse(const char *s)
{
	size_t	i;

	for (i = 0; s != NULL && i < sizeof(log_names) / sizeof(log_names[0]);
	    i++)
		if (strcmp(s, log_names[i]) == 0)
			return (int)i;
	return -1;
}

int
log_open(const char *path)
{
	int	fd;

	if (path == NULL || *path == '\0') {
		if (log_fd != STDERR_FILENO)
			close(log_fd);
		log_fd = STDERR_FILENO;
		free(log_path);
		log_path = NULL;
		return 0;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd == -1)
		return -1;
	if (log_fd != STDERR_FILENO)
		close(log_fd);
	log_fd = fd;
	if (log_path != path) {
		free(log_path);
		log_path = strdup(path);
	}
	return 0;
}

int
log_reopen(void)
{
	return log_path != NULL ? log_open(log_path) : 0;
}

/*
 * Append s to buf, quoted and escaped, as a logfmt value (json 0: other
 * control characters become spaces) or a JSON string (json 1: \u00XX).
 * A UTF-8 sequence is copied whole or not at all.
 */
int
log_control_len(const char *s)
{
	unsigned char	c = (unsigned char)s[0];

	if (c < 0x20 || c == 0x7f)
		return 1;
	if (c == 0xc2 && (unsigned char)s[1] >= 0x80 &&
	    (unsigned char)s[1] <= 0x9f)
		return 2;
	return 0;
}

static size_t
log_escape(char *buf, size_t off, size_t len, const char *s, int json)
{
	size_t	n, keep = json ? 8 : 3;
	int	cl;

	if (off + 1 < len)
		buf[off++] = '"';
	for (; *s != '\0' && off + keep < len; s++) {
		unsigned char	c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			buf[off++] = '\\';
			buf[off++] = (char)c;
		} else if (c == '\n') {
			buf[off++] = '\\';
			buf[off++] = 'n';
		} else if ((cl = log_control_len(s)) != 0) {
			if (json)
				off += snprintf(buf + off, len - off,
				    "\\u%04x", cl == 1 ? c :
				    (unsigned char)s[1]);
			else
				buf[off++] = ' ';
			s += cl - 1;
		} else if ((n = log_utf8_put(buf, off, len, keep, &s)) != 0)
			off = n;
		else
			break;
	}
	if (off + 1 < len)
		buf[off++] = '"';
	return off;
}

/* A logfmt value needs quotes unless it is a plain word. */
static int
log_bare(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || strchr("-_.:/@+", *s) != NULL))
			return 0;
	return 1;
}

/* Append one field: key=value (logfmt) or ,"key":"value" (json). */
static size_t
log_field(char *buf, size_t off, size_t len, const char *key,
    const char *value)
{
	size_t	n;

	if (log_format == LOG_FORMAT_JSON) {
		if (off + 1 < len)
			buf[off++] = ',';
		off = log_escape(buf, off, len, key, 1);
		if (off + 1 < len)
			buf[off++] = ':';
		return log_escape(buf, off, len, value, 1);
	}
	if (off + 1 < len)
		buf[off++] = ' ';
	n = strlen(key);
	if (off + n + 1 < len) {
		memcpy(buf + off, key, n);
		off += n;
		buf[off++] = '=';
	}
	if (log_bare(value)) {
		n = strlen(value);
		if (off + n < len) {
			memcpy(buf + off, value, n);
			off += n;
		}
		return off;
	}
	return log_escape(buf, off, len, value, 0);
}

static void
log_vwrite_kv(int level, int with_errno, const char *const *kv,
    const char *suffix, const char *fmt, va_list ap)
{
	char		 msg[2048], line[4096], t[40], pid[24];
	struct timeval	 tv;
	struct tm	 tm;
	size_t		 off, n;
	int		 saved = errno;

	if (level < log_level)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	if (with_errno)
		n += snprintf(msg + n, sizeof(msg) - n, ": %s",
		    strerror(saved));
	if (suffix != NULL && n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - n, "%s", suffix);
	/* A message cut at the buffer's end, possibly inside a character. */
	if ((n = strlen(msg)) == sizeof(msg) - 1)
		log_utf8_trim(msg, n);
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(t + n, sizeof(t) - n, ".%03ldZ", (long)tv.tv_usec / 1000);
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	/* Room for the newline (and the closing brace) is kept. */
	if (log_format == LOG_FORMAT_JSON) {
		off = snprintf(line, sizeof(line), "{\"time\":\"%s\","
		    "\"level\":\"%s\",\"role\":", t, log_names[level]);
		off = log_escape(line, off, sizeof(line) - 2, log_role, 1);
		off += snprintf(line + off, sizeof(line) - off,
		    ",\"pid\":%s,\"msg\":", pid);
		off = log_escape(line, off, sizeof(line) - 2, msg, 1);
	} else {
		off = snprintf(line, sizeof(line), "time=%s level=%s role=%s "
		    "pid=%s msg=", t, log_names[level], log_role, pid);
		off = log_escape(line, off, sizeof(line) - 2, msg, 0);
	}
	for (; kv != NULL && kv[0] != NULL; kv += 2)
		if (kv[1] != NULL)
			off = log_field(line, off, sizeof(line) - 2, kv[0],
			    kv[1]);
	if (log_format == LOG_FORMAT_JSON)
		line[off++] = '}';
	line[off++] = '\n';
	/* One write(2) per line keeps lines from several processes whole. */
	if (write(log_fd, line, off) == -1)
		saved_write_errors++;	/* nowhere left to report it */
	errno = saved;
}

static void
log_vwrite(int level, int with_errno, const char *fmt, va_list ap)
{
	log_vwrite_kv(level, with_errno, NULL, NULL, fmt, ap);
}

void
log_kv(int level, const char *const *kv, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite_kv(level, 0, kv, NULL, fmt, ap);
	va_end(ap);
}

/* Whether rl lets a line through now; if so, the suffix that counts the
 * lines held back since the last one. */
static int
log_limit_pass(struct log_limit *rl, char *suffix, size_t len)
{
	long long	now = (long long)(clock_mono_us() / 1000);

	suffix[0] = '\0';
	if (rl->next != 0 && now < rl->next) {
		rl->suppressed++;
		if (!rl->listed) {
			rl->listed = 1;
			rl->list_next = log_limits;
			log_limits = rl;
		}
		return 0;
	}
	if (rl->suppressed > 0)
		/* Not "repeated": the line names one message, the count is of
		 * others like it. */
		snprintf(suffix, len, " (%u more like it were not logged)",
		    rl->suppressed);
	rl->suppressed = 0;
	rl->next = now + LOG_LIMIT_MS;
	return 1;
}

static void
log_vlimited(struct log_limit *rl, int level, const char *const *kv,
    const char *fmt, va_list ap)
{
	char	suffix[64];

	if (level >= log_level && log_limit_pass(rl, suffix, sizeof(suffix)))
		log_vwrite_kv(level, 0, kv, suffix, fmt, ap);
}

void
log_limited(struct log_limit *rl, int level, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vlimited(rl, level, NULL, fmt, ap);
	va_end(ap);
}

void
log_limited_kv(struct log_limit *rl, int level, const char *const *kv,
    const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vlimited(rl, level, kv, fmt, ap);
	va_end(ap);
}

void
log_limit_end(struct log_limit *rl, const char *const *kv, const char *what)
{
	if (rl->next == 0)
		return;
	/* Said even when nothing was held back: a reader who saw the
	 * failure line must also see that it is over. */
	if (rl->suppressed > 0)
		log_kv(LOG_LEVEL_INFO, kv, "%s works again; %u more failure "
		    "line(s) were not logged", what, rl->suppressed);
	else
		log_kv(LOG_LEVEL_INFO, kv, "%s works again", what);
	rl->next = 0;
	rl->suppressed = 0;
}

void
log_limit_flush(void)
{
	struct log_limit	*rl;
	unsigned		 n = 0;

	for (rl = log_limits; rl != NULL; rl = rl->list_next) {
		n += rl->suppressed;
		rl->suppressed = 0;
		rl->listed = 0;
	}
	log_limits = NULL;
	if (n > 0)
		log_info("exiting with %u rate-limited line(s) not logged "
		    "since the last one of their kind", n);
}

#define LOG_FUNC(name, level, with_errno)				\
void									\
name(const char *fmt, ...)						\
{									\
	va_list	ap;							\
									\
	va_start(ap, fmt);						\
	log_vwrite(level, with_errno, fmt, ap);				\
	va_end(ap);							\
}

LOG_FUNC(log_debug, LOG_LEVEL_DEBUG, 0)
LOG_FUNC(log_info, LOG_LEVEL_INFO, 0)
LOG_FUNC(log_warn, LOG_LEVEL_WARN, 1)
LOG_FUNC(log_warnx, LOG_LEVEL_WARN, 0)
LOG_FUNC(log_error, LOG_LEVEL_ERROR, 0)

void
fatal(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LEVEL_ERROR, 1, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LEVEL_ERROR, 0, fmt, ap);
	va_end(ap);
	exit(1);
}
