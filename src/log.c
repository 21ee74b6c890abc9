/*
 * log.c - one line per event in logfmt (key=value), with time (RFC 3339,
 * UTC), level, role and pid, so lines from every process can be merged.
 * log_warn/fatal append strerror(errno); log_warnx/fatalx do not (as in
 * OpenBSD daemons).
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

#include "outboxd.h"

static char	 log_role[32] = "outboxd";
static int	 log_level = LOG_LEVEL_INFO;
static int	 log_fd = STDERR_FILENO;
static char	*log_path;		/* NULL = stderr */
static unsigned	 saved_write_errors;

static const char *const log_names[] = { "debug", "info", "warn", "error" };

void
log_init(const char *role, int index)
{
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

/* Append s to buf as a logfmt value, quoted and escaped. */
static size_t
log_quote(char *buf, size_t off, size_t len, const char *s)
{
	if (off + 1 < len)
		buf[off++] = '"';
	for (; *s != '\0' && off + 3 < len; s++) {
		if (*s == '"' || *s == '\\') {
			buf[off++] = '\\';
			buf[off++] = *s;
		} else if (*s == '\n') {
			buf[off++] = '\\';
			buf[off++] = 'n';
		} else if ((unsigned char)*s < 0x20) {
			buf[off++] = ' ';
		} else
			buf[off++] = *s;
	}
	if (off + 1 < len)
		buf[off++] = '"';
	return off;
}

static void
log_vwrite(int level, int with_errno, const char *fmt, va_list ap)
{
	char		 msg[2048], line[4096];
	struct timeval	 tv;
	struct tm	 tm;
	size_t		 off;
	int		 saved = errno;

	if (level < log_level)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (with_errno) {
		size_t	n = strlen(msg);

		snprintf(msg + n, sizeof(msg) - n, ": %s", strerror(saved));
	}
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	off = strftime(line, sizeof(line), "time=%Y-%m-%dT%H:%M:%S", &tm);
	off += snprintf(line + off, sizeof(line) - off,
	    ".%03ldZ level=%s role=%s pid=%ld msg=", (long)tv.tv_usec / 1000,
	    log_names[level], log_role, (long)getpid());
	off = log_quote(line, off, sizeof(line) - 1, msg);
	line[off++] = '\n';
	/* One write(2) per line keeps lines from several processes whole. */
	if (write(log_fd, line, off) == -1)
		saved_write_errors++;	/* nowhere left to report it */
	errno = saved;
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
