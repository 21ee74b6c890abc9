/*
 * outboxctl_ops.c - the outbox commands of outboxctl: status, failed,
 * redrive, pause, resume, each of all destinations or of one; replay and
 * replays (replay.c).  They talk
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

#include <pwd.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "outboxctl.h"
#include "replay.h"

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

/* One line of a table cell: control characters (C0, DEL and the C1
 * controls U+0080..U+009F, which a terminal acts on) become spaces and
 * long text is cut with "...". */
static void
ctl_cell(char *buf, size_t len, const char *s, size_t width)
{
	size_t	i, o = 0;
	int	cl;

	if (s == NULL)
		s = "-";
	for (i = 0; s[i] != '\0' && o + 1 < len && o < width; i++) {
		cl = log_control_len(s + i);
		buf[o++] = cl != 0 ? ' ' : s[i];
		i += cl > 1 ? (size_t)cl - 1 : 0;
	}
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
	char	err[512];
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
	char		 err[1024], type[25], key[37], dest[17];
	char		 msg[CTL_ERROR_WIDTH + 1];
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
		printf("%-10s %-24s %-36s %-16s %8s  %-25s  %s\n", "ID",
		    "EVENT_TYPE", "ORDERING_KEY", "DESTINATION", "ATTEMPTS",
		    "CREATED_AT", "LAST_ERROR");
		cJSON_ArrayForEach(r, rows) {
			ctl_cell(type, sizeof(type), ctl_str(r, "event_type"),
			    24);
			ctl_cell(key, sizeof(key), ctl_str(r, "ordering_key"),
			    36);
			ctl_cell(msg, sizeof(msg), ctl_str(r, "last_error"),
			    CTL_ERROR_WIDTH);
			/* NULL: the default destination's row. */
			ctl_cell(dest, sizeof(dest),
			    ctl_str(r, "destination") != NULL ?
			    ctl_str(r, "destination") : "(default)", 16);
			printf("%-10.0f %-24s %-36s %-16s %8.0f  %-25s  %s\n",
			    ctl_num(r, "id"), type, key, dest,
			    ctl_num(r, "attempts"),
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

/* Who asks for a replay, as outbox_replays.requested_by records it. */
static void
ctl_who(char *buf, size_t len)
{
	struct passwd	*pw = getpwuid(getuid());
	char		 host[256];

	if (gethostname(host, sizeof(host)) == -1)
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = '\0';
	snprintf(buf, len, "outboxctl %s@%s", pw != NULL ? pw->pw_name : "?",
	    host);
}

/* A replay's line of a table. */
static void
ctl_replay_line(const cJSON *r)
{
	const cJSON	*f = cJSON_GetObjectItemCaseSensitive(r, "filter"), *e;
	char		 cell[80];

	printf("%-6.0f %-9s %8.0f %8.0f %8.0f %6.0f  ", ctl_num(r, "id"),
	    ctl_str(r, "state") != NULL ? ctl_str(r, "state") : "?",
	    ctl_num(r, "total"), ctl_num(r, "done"), ctl_num(r, "pending"),
	    ctl_num(r, "failed"));
	cJSON_ArrayForEach(e, f) {
		ctl_cell(cell, sizeof(cell), e->valuestring, 40);
		printf("%s=%s ", e->string, cell);
	}
	printf("\n");
}

static void
ctl_replay_header(void)
{
	printf("%-6s %-9s %8s %8s %8s %6s  %s\n", "ID", "STATE", "TOTAL",
	    "DONE", "PENDING", "FAILED", "FILTER");
}

/* --event-type and the other filter options: the filter's part. */
static const char *
ctl_replay_part(const char *opt)
{
	static const char *const	 map[][2] = {
		{ "--event-type", "event_type" },
		{ "--ordering-key", "ordering_key" },
		{ "--destination", "destination" },
		{ "--created-from", "created_from" },
		{ "--created-to", "created_to" },
		{ "--sent-from", "sent_from" },
		{ "--sent-to", "sent_to" },
	};
	size_t				 i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(opt, map[i][0]) == 0)
			return map[i][1];
	return NULL;
}

int
ctl_replay(struct conf *conf, int argc, char **argv)
{
	struct ctl_opts		 o;
	struct replay_filter	 f;
	const char		*part;
	char			 err[1024], who[320];
	cJSON			*j, *rep;
	PGconn			*pg;
	int			 i, dry_run = 0, rv, n;

	memset(&f, 0, sizeof(f));
	if (ctl_opts_parse(argc, argv, &o, "replay") == -1)
		goto usage;
	for (i = 0; i < o.nargs; i++) {
		if (strcmp(o.args[i], "--dry-run") == 0 ||
		    strcmp(o.args[i], "-n") == 0) {
			dry_run = 1;
			continue;
		}
		if ((part = ctl_replay_part(o.args[i])) == NULL ||
		    i + 1 == o.nargs) {
			fprintf(stderr, "outboxctl replay: %s: %s\n", o.args[i],
			    part == NULL ? "unknown option" : "needs a value");
			goto usage;
		}
		if (strcmp(part, "destination") == 0 &&
		    (rv = ctl_dest_check(conf, "replay", o.args[i + 1])) !=
		    CTL_EX_FOUND) {
			replay_filter_clear(&f);
			return rv;
		}
		if (replay_filter_set(&f, conf, part, o.args[++i], err,
		    sizeof(err)) != 0) {
			fprintf(stderr, "outboxctl replay: %s\n", err);
			goto usage;
		}
	}
	if (replay_filter_check(&f, err, sizeof(err)) == -1) {
		fprintf(stderr, "outboxctl replay: %s\n", err);
		goto usage;
	}
	if ((pg = ctl_db(conf)) == NULL) {
		replay_filter_clear(&f);
		return CTL_EX_SERVICE;
	}
	ctl_who(who, sizeof(who));
	rv = replay_request(pg, conf, &f, dry_run, who, &j, err, sizeof(err));
	PQfinish(pg);
	replay_filter_clear(&f);
	if (rv == -1) {
		fprintf(stderr, "outboxctl: %s\n", err);
		return CTL_EX_SERVICE;
	}
	n = (int)ctl_num(j, "selected");
	rep = cJSON_GetObjectItemCaseSensitive(j, "replay");
	if (o.json)
		ctl_print_json(j);
	else if (dry_run)
		printf("dry run: %d sent row(s) selected, nothing replayed\n",
		    n);
	else if (!cJSON_IsObject(rep))
		printf("no sent row matched: nothing replayed\n");
	else
		printf("replay %.0f: %d sent row(s) to publish again at %d "
		    "row(s)/s (outboxctl replays %.0f for its progress)\n",
		    ctl_num(rep, "id"), n, conf->relay.replay_rate,
		    ctl_num(rep, "id"));
	cJSON_Delete(j);
	return n > 0 ? CTL_EX_FOUND : CTL_EX_NOTFOUND;
usage:
	replay_filter_clear(&f);
	fprintf(stderr, "usage: outboxctl replay [--event-type TYPE] "
	    "[--ordering-key KEY] [--destination NAME] [--created-from TIME] "
	    "[--created-to TIME] [--sent-from TIME] [--sent-to TIME] "
	    "[--dry-run] [--json]\n");
	return CTL_EX_USAGE;
}

int
ctl_replays(struct conf *conf, int argc, char **argv)
{
	struct ctl_opts	 o;
	char		 err[1024];
	int64_t		 id = 0, limit = REPLAY_LIST_LIMIT;
	cJSON		*j, *arr, *e;
	PGconn		*pg;
	int		 i, rv, n, cancel = 0;

	if (ctl_opts_parse(argc, argv, &o, "replays") == -1)
		goto usage;
	for (i = 0; i < o.nargs; i++) {
		if (strcmp(o.args[i], "--limit") == 0 && i + 1 < o.nargs) {
			if (ctl_int(o.args[++i], REPLAY_LIST_MAX, &limit) == -1 ||
			    limit == 0)
				goto usage;
		} else if (strcmp(o.args[i], "--cancel") == 0)
			cancel = 1;
		else if (id == 0 && ctl_int(o.args[i], INT64_MAX, &id) == 0 &&
		    id > 0)
			continue;
		else
			goto usage;
	}
	if (cancel && id == 0)
		goto usage;
	if ((pg = ctl_db(conf)) == NULL)
		return CTL_EX_SERVICE;
	if (cancel) {
		rv = replay_cancel(pg, id, &j, err, sizeof(err));
		PQfinish(pg);
		if (rv == -1) {
			fprintf(stderr, "outboxctl: %s\n", err);
			return CTL_EX_SERVICE;
		}
		if (rv == 0) {
			fprintf(stderr, "outboxctl replays: no replay %lld\n",
			    (long long)id);
			return CTL_EX_NOTFOUND;
		}
		if (o.json)
			ctl_print_json(j);
		else
			printf("replay %lld %s\n", (long long)id, rv == 1 ?
			    "cancelled (rows already back to pending still go)" :
			    "was over already");
		cJSON_Delete(j);
		return rv == 1 ? CTL_EX_FOUND : CTL_EX_NOTFOUND;
	}
	rv = replay_list(pg, id, (int)limit, &j, err, sizeof(err));
	PQfinish(pg);
	if (rv == -1) {
		fprintf(stderr, "outboxctl: %s\n", err);
		return CTL_EX_SERVICE;
	}
	arr = cJSON_GetObjectItemCaseSensitive(j, "replays");
	n = cJSON_GetArraySize(arr);
	if (o.json)
		ctl_print_json(id > 0 && n == 1 ? cJSON_GetArrayItem(arr, 0) : j);
	else if (n == 0)
		printf("%s\n", id > 0 ? "no such replay" : "no replay yet");
	else {
		ctl_replay_header();
		cJSON_ArrayForEach(e, arr)
			ctl_replay_line(e);
	}
	cJSON_Delete(j);
	return n > 0 ? CTL_EX_FOUND : CTL_EX_NOTFOUND;
usage:
	fprintf(stderr, "usage: outboxctl replays [ID [--cancel]] [--limit N] "
	    "[--json]\n");
	return CTL_EX_USAGE;
}
