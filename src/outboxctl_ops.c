/*
 * outboxctl_ops.c - the outbox commands of outboxctl: status, failed,
 * redrive, pause, resume, each of all destinations or of one.  They talk
 * to PostgreSQL directly (the database of the configuration file)
 * through admin.c, the same operations and SQL as the admin API, and
 * print its JSON answer (--json) or a table.  A destination named on the
 * command line must be one of the configuration file's.
 *
 * Exit status: 0 done; 1 nothing found (no failed row listed, no row
 * redriven, no such destination); 2 usage; 3 database error; 78
 * configuration (main()).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "outboxctl.h"

#define CTL_STATEMENT_TIMEOUT	"30s"
#define CTL_ERROR_WIDTH		60	/* last_error characters in a table */

/* Options every outbox command takes: --json. */
struct ctl_opts {
	int	 json;
	char	*args[64];	/* the rest, in order */
	int	 nargs;
};

static int
ctl_opts_parse(int argc, char **argv, struct ctl_opts *o, const char *cmd)
{
	int	i;

	memset(o, 0, sizeof(*o));
	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "-j") ==
		    0)
			o->json = 1;
		else if (o->nargs == (int)(sizeof(o->args) /
		    sizeof(o->args[0]))) {
			fprintf(stderr, "outboxctl %s: too many arguments\n",
			    cmd);
			return -1;
		} else
			o->args[o->nargs++] = argv[i];
	}
	return 0;
}

static PGconn *
ctl_db(const struct conf *conf)
{
	PGconn		*pg;
	PGresult	*res;
	char		 err[1024];

	if ((pg = db_connect(conf->database, "outboxctl", err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "outboxctl: PostgreSQL: %s\n", err);
		return NULL;
	}
	res = PQexec(pg, "SET statement_timeout = '" CTL_STATEMENT_TIMEOUT
	    "'");
	PQclear(res);
	return pg;
}

static void
ctl_print_json(const cJSON *j)
{
	char	*s;

	if ((s = cJSON_Print(j)) != NULL) {
		printf("%s\n", s);
		cJSON_free(s);
	}
}

static double
ctl_num(const cJSON *j, const char *name)
{
	const cJSON	*v = cJSON_GetObjectItemCaseSensitive(j, name);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *
ctl_str(const cJSON *j, const char *name)
{
	const cJSON	*v = cJSON_GetObjectItemCaseSensitive(j, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "12.3 s", "4 min 5 s", "2 h 3 min", "3 d 4 h". */
static void
ctl_age(char *buf, size_t len, double s)
{
	long	n = (long)s;

	if (s < 60)
		snprintf(buf, len, "%.1f s", s);
	else if (n < 3600)
		snprintf(buf, len, "%ld min %ld s", n / 60, n % 60);
	else if (n < 86400)
		snprintf(buf, len, "%ld h %ld min", n / 3600, n % 3600 / 60);
	else
		snprintf(buf, len, "%ld d %ld h", n / 86400, n % 86400 / 3600);
}

/* One line of a table cell: control characters become spaces and long
 * text is cut with "...". */
static void
ctl_cell(char *buf, size_t len, const char *s, size_t width)
{
	size_t	i, o = 0;

	if (s == NULL)
		s = "-";
	for (i = 0; s[i] != '\0' && o + 1 < len && o < width; i++)
		buf[o++] = (unsigned char)s[i] < 0x20 ? ' ' : s[i];
	if (s[i] != '\0' && o >= 3 && o < len) {
		/* do not cut a UTF-8 sequence in two */
		o -= 3;
		while (o > 0 && ((unsigned char)buf[o] & 0xc0) == 0x80)
			o--;
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o < len ? o : len - 1] = '\0';
}

/* Is name a destination of conf?  CTL_EX_FOUND, or the exit status
 * after saying why. */
static int
ctl_dest_check(const struct conf *conf, const char *cmd, const char *name)
{
	char	err[ADMIN_DEST_NAME_MAX + 256];
	int	i;

	switch (admin_dest_check(conf, name, err, sizeof(err))) {
	case 0:
		return CTL_EX_FOUND;
	case -1:
		fprintf(stderr, "outboxctl %s: %s\n", cmd, err);
		return CTL_EX_USAGE;
	}
	fprintf(stderr, "outboxctl %s: %s (destinations:", cmd, err);
	for (i = 0; i < conf->n_destinations; i++)
		fprintf(stderr, " %s", conf->destinations[i].name);
	fprintf(stderr, "%s)\n", conf->n_destinations == 0 ? " none" : "");
	return CTL_EX_NOTFOUND;
}

/* The table of destinations under status. */
static void
ctl_status_dests(const cJSON *dests)
{
	const cJSON	*d;
	const char	*state;
	char		 name[33], age[64];

	if (cJSON_GetArraySize(dests) == 0)
		return;
	printf("\ndestinations:\n");
	printf("  %-32s %-5s %9s %7s  %-16s %s\n", "NAME", "SINK", "PENDING",
	    "FAILED", "OLDEST PENDING", "STATE");
	cJSON_ArrayForEach(d, dests) {
		ctl_cell(name, sizeof(name), ctl_str(d, "name") != NULL ?
		    ctl_str(d, "name") : "(none)", 32);
		if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(d,
		    "oldest_pending_age_seconds")))
			ctl_age(age, sizeof(age), ctl_num(d,
			    "oldest_pending_age_seconds"));
		else
			snprintf(age, sizeof(age), "-");
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d,
		    "configured")))
			state = "NOT IN THE CONFIGURATION";
		else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d,
		    "paused")))
			state = "PAUSED";
		else
			state = "running";
		printf("  %-32s %-5s %9.0f %7.0f  %-16s %s%s\n", name,
		    ctl_str(d, "sink") != NULL ? ctl_str(d, "sink") : "-",
		    ctl_num(d, "pending"), ctl_num(d, "failed"), age, state,
		    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d,
		    "default")) ? " (default)" : "");
	}
}

int
ctl_status(struct conf *conf, int argc, char **argv)
{
	struct ctl_opts	 o;
	PGconn		*pg;
	cJSON		*j, *counts, *keys, *k;
	char		 err[1024], age[64], key[41];
	const char	*at;

	if (ctl_opts_parse(argc, argv, &o, "status") == -1 || o.nargs != 0) {
		fprintf(stderr, "usage: outboxctl status [--json]\n");
		return CTL_EX_USAGE;
	}
	if ((pg = ctl_db(conf)) == NULL)
		return CTL_EX_SERVICE;
	if (admin_status(pg, conf, &j, err, sizeof(err)) == -1) {
		fprintf(stderr, "outboxctl: %s\n", err);
		PQfinish(pg);
		return CTL_EX_SERVICE;
	}
	PQfinish(pg);
	if (o.json) {
		ctl_print_json(j);
		cJSON_Delete(j);
		return CTL_EX_FOUND;
	}
	counts = cJSON_GetObjectItemCaseSensitive(j, "counts");
	printf("outbox:      %.0f pending, %.0f failed, %.0f sent (%.0f rows)\n",
	    ctl_num(counts, "pending"), ctl_num(counts, "failed"),
	    ctl_num(counts, "sent"), ctl_num(j, "total"));
	if ((at = ctl_str(j, "oldest_pending_created_at")) != NULL) {
		ctl_age(age, sizeof(age), ctl_num(j,
		    "oldest_pending_age_seconds"));
		printf("oldest:      pending for %s (created %s)\n", age, at);
	} else
		printf("oldest:      nothing pending\n");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "paused")))
		printf("publishing:  PAUSED since %s (outboxctl resume)\n",
		    (at = ctl_str(j, "paused_at")) != NULL ? at : "?");
	else
		printf("publishing:  running\n");
	keys = cJSON_GetObjectItemCaseSensitive(j, "backlog_by_key");
	if (cJSON_GetArraySize(keys) > 0) {
		printf("\nbacklog by ordering key (top %d):\n",
		    cJSON_GetArraySize(keys));
		printf("  %-40s %9s %7s  %s\n", "KEY", "PENDING", "FAILED",
		    "OLDEST");
		cJSON_ArrayForEach(k, keys) {
			ctl_cell(key, sizeof(key), ctl_str(k, "ordering_key"),
			    40);
			printf("  %-40s %9.0f %7.0f  %s\n", key,
			    ctl_num(k, "pending"), ctl_num(k, "failed"),
			    (at = ctl_str(k, "oldest_created_at")) != NULL ?
			    at : "-");
		}
	}
	ctl_status_dests(cJSON_GetObjectItemCaseSensitive(j, "destinations"));
	cJSON_Delete(j);
	return CTL_EX_FOUND;
}

/* A positive decimal integer up to max; -1 if s is not one. */
static int
ctl_int(const char *s, int64_t max, int64_t *out)
{
	char		*end;
	long long	 n;

	errno = 0;
	n = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || n < 0 || n > max)
		return -1;
	*out = n;
	return 0;
}

int
ctl_failed(struct conf *conf, int argc, char **argv)
{
	struct ctl_opts	 o;
	PGconn		*pg;
	cJSON		*j, *rows, *r, *next;
	char		 err[1024], type[25], key[37], msg[CTL_ERROR_WIDTH + 1];
	int64_t		 limit = ADMIN_FAILED_LIMIT, after = 0;
	int		 i, n;

	if (ctl_opts_parse(argc, argv, &o, "failed") == -1)
		goto usage;
	for (i = 0; i < o.nargs; i++) {
		if (strcmp(o.args[i], "--limit") == 0 && i + 1 < o.nargs) {
			if (ctl_int(o.args[++i], ADMIN_FAILED_MAX, &limit) ==
			    -1 || limit < 1)
				goto usage;
		} else if (strcmp(o.args[i], "--after-id") == 0 &&
		    i + 1 < o.nargs) {
			if (ctl_int(o.args[++i], INT64_MAX, &after) == -1)
				goto usage;
		} else
			goto usage;
	}
	if ((pg = ctl_db(conf)) == NULL)
		return CTL_EX_SERVICE;
	if (admin_failed(pg, after, (int)limit, &j, err, sizeof(err)) == -1) {
		fprintf(stderr, "outboxctl: %s\n", err);
		PQfinish(pg);
		return CTL_EX_SERVICE;
	}
	PQfinish(pg);
	rows = cJSON_GetObjectItemCaseSensitive(j, "rows");
	n = cJSON_GetArraySize(rows);
	if (o.json)
		ctl_print_json(j);
	else if (n == 0)
		printf("no failed rows%s\n", after > 0 ? " after this id" : "");
	else {
		printf("%-10s %-24s %-36s %8s  %-25s  %s\n", "ID", "EVENT_TYPE",
		    "ORDERING_KEY", "ATTEMPTS", "CREATED_AT", "LAST_ERROR");
		cJSON_ArrayForEach(r, rows) {
			ctl_cell(type, sizeof(type), ctl_str(r, "event_type"),
			    24);
			ctl_cell(key, sizeof(key), ctl_str(r, "ordering_key"),
			    36);
			ctl_cell(msg, sizeof(msg), ctl_str(r, "last_error"),
			    CTL_ERROR_WIDTH);
			printf("%-10.0f %-24s %-36s %8.0f  %-25s  %s\n",
			    ctl_num(r, "id"), type, key, ctl_num(r, "attempts"),
			    ctl_str(r, "created_at") != NULL ?
			    ctl_str(r, "created_at") : "-", msg);
		}
		next = cJSON_GetObjectItemCaseSensitive(j, "next_after_id");
		if (cJSON_IsNumber(next))
			printf("(more: outboxctl failed --after-id %.0f)\n",
			    next->valuedouble);
	}
	cJSON_Delete(j);
	return n > 0 ? CTL_EX_FOUND : CTL_EX_NOTFOUND;
usage:
	fprintf(stderr, "usage: outboxctl failed [--limit N] [--after-id ID] "
	    "[--json]\n");
	return CTL_EX_USAGE;
}

int
ctl_redrive(struct conf *conf, int argc, char **argv)
{
	struct ctl_opts		 o;
	struct admin_redrive	 sel;
	PGconn			*pg;
	cJSON			*j, *ids, *e;
	char			 err[1024];
	int64_t			 id;
	int			 i, n, rv;

	memset(&sel, 0, sizeof(sel));
	if (ctl_opts_parse(argc, argv, &o, "redrive") == -1 || o.nargs == 0)
		goto usage;
	/* --destination NAME first: then the selector, or none for all. */
	if (strcmp(o.args[0], "--destination") == 0) {
		if (o.nargs < 2)
			goto usage;
		if ((rv = ctl_dest_check(conf, "redrive", o.args[1])) !=
		    CTL_EX_FOUND)
			return rv;
		if ((sel.destination = strdup(o.args[1])) == NULL)
			goto usage;
		memmove(o.args, o.args + 2, (size_t)(o.nargs - 2) *
		    sizeof(o.args[0]));
		if ((o.nargs -= 2) == 0)
			o.args[o.nargs++] = "--all";
	}
	if (strcmp(o.args[0], "--all") == 0) {
		if (o.nargs != 1)
			goto usage;
		sel.all = 1;
	} else if (strcmp(o.args[0], "--event-type") == 0) {
		if (o.nargs != 2 || o.args[1][0] == '\0' ||
		    (sel.event_type = strdup(o.args[1])) == NULL)
			goto usage;
	} else {
		if ((sel.ids = calloc((size_t)o.nargs, sizeof(*sel.ids))) ==
		    NULL)
			goto usage;
		for (i = 0; i < o.nargs; i++) {
			if (ctl_int(o.args[i], INT64_MAX, &id) == -1 ||
			    id == 0) {
				fprintf(stderr, "outboxctl redrive: not a row "
				    "id: %s\n", o.args[i]);
				goto usage;
			}
			sel.ids[sel.nids++] = id;
		}
	}
	if ((pg = ctl_db(conf)) == NULL) {
		admin_redrive_clear(&sel);
		return CTL_EX_SERVICE;
	}
	rv = admin_redrive(pg, conf, &sel, &j, err, sizeof(err));
	PQfinish(pg);
	admin_redrive_clear(&sel);
	if (rv == -1) {
		fprintf(stderr, "outboxctl: %s\n", err);
		return CTL_EX_SERVICE;
	}
	n = (int)ctl_num(j, "redriven");
	if (o.json)
		ctl_print_json(j);
	else if (n == 0)
		printf("no failed row matched: nothing redriven\n");
	else {
		printf("redriven %d row(s) back to pending:", n);
		ids = cJSON_GetObjectItemCaseSensitive(j, "ids");
		cJSON_ArrayForEach(e, ids)
			printf(" %.0f", e->valuedouble);
		printf("%s\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j,
		    "ids_truncated")) ? " ..." : "");
	}
	cJSON_Delete(j);
	return n > 0 ? CTL_EX_FOUND : CTL_EX_NOTFOUND;
usage:
	admin_redrive_clear(&sel);
	fprintf(stderr, "usage: outboxctl redrive [--destination NAME] "
	    "--all | --event-type TYPE | ID ... [--json]\n");
	return CTL_EX_USAGE;
}

static int
ctl_pause_run(struct conf *conf, int argc, char **argv, int paused)
{
	const char	*cmd = paused ? "pause" : "resume";
	struct ctl_opts	 o;
	PGconn		*pg;
	cJSON		*j;
	char		 err[1024];
	const char	*at;
	int		 rv;

	if (ctl_opts_parse(argc, argv, &o, cmd) == -1 || o.nargs > 1) {
		fprintf(stderr, "usage: outboxctl %s [DESTINATION] [--json]\n",
		    cmd);
		return CTL_EX_USAGE;
	}
	if (o.nargs == 1 && (rv = ctl_dest_check(conf, cmd, o.args[0])) !=
	    CTL_EX_FOUND)
		return rv;
	if ((pg = ctl_db(conf)) == NULL)
		return CTL_EX_SERVICE;
	if (o.nargs == 1)
		rv = admin_dest_pause(pg, o.args[0], paused, &j, err,
		    sizeof(err));
	else
		rv = admin_pause(pg, paused, &j, err, sizeof(err));
	PQfinish(pg);
	if (rv == -1) {
		fprintf(stderr, "outboxctl: %s\n", err);
		return CTL_EX_SERVICE;
	}
	if (o.json)
		ctl_print_json(j);
	else if (o.nargs == 1 && paused)
		printf("destination %s paused since %s: its rows wait until "
		    "outboxctl resume %s\n", o.args[0], (at = ctl_str(j,
		    "paused_at")) != NULL ? at : "?", o.args[0]);
	else if (o.nargs == 1)
		printf("destination %s resumed\n", o.args[0]);
	else if (paused)
		printf("publishing paused since %s: relays claim nothing until "
		    "outboxctl resume\n", (at = ctl_str(j, "paused_at")) !=
		    NULL ? at : "?");
	else
		printf("publishing resumed\n");
	cJSON_Delete(j);
	return CTL_EX_FOUND;
}

int
ctl_pause(struct conf *conf, int argc, char **argv)
{
	return ctl_pause_run(conf, argc, argv, 1);
}

int
ctl_resume(struct conf *conf, int argc, char **argv)
{
	return ctl_pause_run(conf, argc, argv, 0);
}
