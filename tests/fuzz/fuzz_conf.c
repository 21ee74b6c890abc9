/*
 * fuzz_conf.c - libFuzzer target for the configuration file: src/conf.c's
 * conf_load() (conf_text.c's reading and scanning, then libconfuse and
 * the checks).  Any text must load (conf_free() frees all of it, which
 * LeakSanitizer checks) or be refused with "FILE: reason" or
 * "FILE:LINE: reason", and an error never shows the value of a secret key
 * that the file sets once.  The AWS_* environment is cleared first, so
 * that the result depends on the input alone.  Built and run by
 * `make fuzz` (FUZZ_SECONDS); by hand, from the top of a configured tree
 * (config.h there):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc tests/fuzz/fuzz_conf.c src/conf.c src/conf_text.c src/conf_env.c src/log.c src/clock.c -lconfuse -levent -o fuzz_conf && mkdir -p /tmp/fuzz-conf && ./fuzz_conf -max_total_time=300 /tmp/fuzz-conf tests/fuzz/corpus/conf
 *
 * (new inputs go to the first corpus directory: the seeds stay as they are)
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outboxd.h"
#include "conf.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static char	conf_path[] = "/tmp/fuzz_conf.XXXXXX";
static int	conf_fd = -1;

static void
conf_unlink(void)
{
	unlink(conf_path);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	extern char	**environ;
	char		**e, name[256];
	size_t		 n;

	(void)argc;
	(void)argv;
	/* AWS_REGION, AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL_SQS, ... */
again:
	for (e = environ; *e != NULL; e++) {
		if (strncmp(*e, "AWS_", 4) != 0)
			continue;
		n = strcspn(*e, "=");
		CHECK(n < sizeof(name));
		memcpy(name, *e, n);
		name[n] = '\0';
		unsetenv(name);
		goto again;
	}
	CHECK((conf_fd = mkstemp(conf_path)) != -1);
	atexit(conf_unlink);
	log_set_level(LOG_LEVEL_ERROR);
	return 0;
}

/* Occurrences of the n bytes at v in text. */
static int
count(const char *text, size_t len, const char *v, size_t n)
{
	const char	*p = text, *end = text + len, *q;
	int		 k = 0;

	while ((q = memmem(p, (size_t)(end - p), v, n)) != NULL) {
		k++;
		p = q + 1;
	}
	return k;
}

/* conf_load() of the n bytes at text: its error into err ("" if it
 * loads). */
static void
load_err(const char *text, size_t n, char *err, size_t errlen)
{
	struct conf	*c = NULL;

	CHECK(ftruncate(conf_fd, 0) == 0);
	CHECK(n == 0 || pwrite(conf_fd, text, n, 0) == (ssize_t)n);
	err[0] = '\0';
	if (conf_load(conf_path, &c, err, errlen) == 0) {
		conf_free(c);
		err[0] = '\0';
	}
}

/*
 * 1 if err shows the value of a secret that text sets, where that value
 * stands nowhere else in the text (else it may be shown for that).  The
 * error's own words may hold the same bytes (a secret set to "us-east-1"
 * where the message's example is us-east-1): so the file is loaded again
 * with the secret's letters and digits changed, and the secret counts as
 * shown only if it stands in err more often than in that error.
 */
static int
shows_secret(const char *text, size_t len, const char *err)
{
	struct conf_secrets	 s;
	const struct conf_span	*sp;
	char			*copy, *other, *ch, err2[1024];
	size_t			 j;
	int			 i, found = 0;

	if (memchr(text, '\0', len) != NULL ||
	    (copy = strndup(text, len)) == NULL)
		return 0;
	conf_strip_comments(copy);
	memset(&s, 0, sizeof(s));
	conf_scan_secrets(copy, &s);
	for (i = 0; i < s.n && !found; i++) {
		sp = &s.spans[i];
		if (sp->len < 8 || count(text, len, sp->value, sp->len) != 1 ||
		    count(err, strlen(err), sp->value, sp->len) == 0)
			continue;
		CHECK((other = malloc(len)) != NULL);
		memcpy(other, text, len);
		for (j = 0; j < sp->len; j++) {
			ch = &other[sp->value - copy + j];
			if (*ch >= 'a' && *ch <= 'y')
				(*ch)++;
			else if (*ch == 'z')
				*ch = 'a';
			else if (*ch >= '0' && *ch <= '8')
				(*ch)++;
			else if (*ch == '9')
				*ch = '0';
		}
		load_err(other, len, err2, sizeof(err2));
		free(other);
		found = count(err, strlen(err), sp->value, sp->len) >
		    count(err2, strlen(err2), sp->value, sp->len);
	}
	free(copy);
	return found;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct conf	*c = NULL;
	char		 err[1024];
	size_t		 plen = strlen(conf_path);
	int		 rv;

	CHECK(ftruncate(conf_fd, 0) == 0);
	CHECK(len == 0 || pwrite(conf_fd, data, len, 0) == (ssize_t)len);
	err[0] = '\0';
	rv = conf_load(conf_path, &c, err, sizeof(err));
	CHECK(rv == 0 || rv == -1);
	if (rv == 0) {
		CHECK(c != NULL && c->path != NULL &&
		    strcmp(c->path, conf_path) == 0);
		CHECK(c->database != NULL);
		CHECK(c->http.workers >= 0 && c->relay.workers >= 0 &&
		    c->consumer.workers >= 0);
		conf_sink_timeout(c);
		conf_free(c);
	} else {
		CHECK(c == NULL);
		/* "FILE: reason" or "FILE:LINE: reason" */
		CHECK(strncmp(err, conf_path, plen) == 0 && err[plen] == ':');
		CHECK(strlen(err) > plen + 2);
		CHECK(!shows_secret((const char *)data, len, err));
	}
	return 0;
}
