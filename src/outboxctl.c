/*
 * outboxctl.c - the admin and check command.  Reads the daemon's own
 * configuration (conf_load) and talks to the same services through the
 * same code (httpc, aws, ddb; admin.c for the outbox), one request at a
 * time on a local loop.
 *
 *	outboxctl [-c FILE] status [--json]
 *	outboxctl [-c FILE] failed [--limit N] [--after-id ID] [--json]
 *	outboxctl [-c FILE] redrive [--destination NAME] --all |
 *	    --event-type T | ID... [--json]
 *	outboxctl [-c FILE] pause | resume [DESTINATION] [--json]
 *	outboxctl [-c FILE] replay FILTER... [--dry-run] [--json]
 *	outboxctl [-c FILE] replays [ID [--cancel]] [--limit N] [--json]
 *	outboxctl [-c FILE] fulfillment ORDER_ID
 *
 *	outboxctl -h | -V
 *
 * Exit status: 0 done/found, 1 nothing found (no item, no failed row, no
 * row redriven), 2 usage, 3 database, AWS or transport error, 78
 * configuration error (sysexits EX_CONFIG).  The outbox commands live in
 * outboxctl_ops.c.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"
#include "creds.h"
#include "outboxctl.h"

#define CTL_TIMEOUT		10000L		/* ms per AWS request */

struct ctl_cmd {
	const char	*name;
	const char	*args;
	const char	*help;
	int		 argc;		/* operands required; -1: the
					   command checks them */
	int		(*run)(struct conf *, int, char **);
};

static int	ctl_fulfillment(struct conf *, int, char **);

static const struct ctl_cmd ctl_cmds[] = {
	{ "status", "[--json]",
	  "outbox rows by status and destination, oldest pending, pauses, "
	  "busiest keys", -1, ctl_status },
	{ "failed", "[--limit N] [--after-id ID] [--json]",
	  "list failed rows with their last error", -1, ctl_failed },
	{ "redrive",
	  "[--destination NAME] --all | --event-type T | ID... [--json]",
	  "put failed rows (of one destination) back to pending", -1,
	  ctl_redrive },
	{ "pause", "[DESTINATION] [--json]",
	  "stop publishing (to one destination; every relay, every host)",
	  -1, ctl_pause },
	{ "resume", "[DESTINATION] [--json]", "publish again", -1,
	  ctl_resume },
	{ "replay", "[--event-type T] [--ordering-key K] [--destination NAME]\n"
	  "               [--created-from TIME] [--created-to TIME] "
	  "[--sent-from TIME]\n               [--sent-to TIME] [--dry-run] "
	  "[--json]",
	  "publish sent rows again (at least one filter; TIME: RFC 3339)", -1,
	  ctl_replay },
	{ "replays", "[ID [--cancel]] [--limit N] [--json]",
	  "list replays and their progress, or cancel one", -1, ctl_replays },
	{ "wal-drop", "",
	  "drop relay.mode = \"wal\"'s replication slot and publication "
	  "(not while a relay streams it)", 0, ctl_wal_drop },
	{ "fulfillment", "ORDER_ID",
	  "print the DynamoDB fulfillment item of an order as JSON", 1,
	  ctl_fulfillment },
};
#define CTL_NCMDS	(sizeof ctl_cmds / sizeof ctl_cmds[0])

/* One AWS call on a private loop: the reply lands here. */
struct ctl_call {
	struct event_base *base;
	int		 done;
	int		 ok;
	long		 status;
	char		*error;		/* malloc'd "Type: message" */
	cJSON		*json;		/* detached reply */
};

/* -h: stdout and success; a usage error: stderr and CTL_EX_USAGE. */
static __dead void
ctl_usage(int help)
{
	FILE	*fp = help ? stdout : stderr;
	size_t	 i;

	fprintf(fp, "usage: outboxctl [-hV] [-c file] command [arg ...]\n"
	    "commands:\n");
	for (i = 0; i < CTL_NCMDS; i++)
		fprintf(fp, "  %-12s %s\n  %-12s   %s\n", ctl_cmds[i].name,
		    ctl_cmds[i].args, "", ctl_cmds[i].help);
	exit(help ? 0 : CTL_EX_USAGE);
}

static void
ctl_reply(const struct aws_result *res, void *arg)
{
	struct ctl_call	*call = arg;

	call->done = 1;
	event_base_loopbreak(call->base);
	call->ok = res->ok;
	call->status = res->status;
	if (res->ok) {
		/* res->json is freed after this callback: keep a copy. */
		call->json = cJSON_Duplicate(res->json, 1);
		return;
	}
	if (asprintf(&call->error, "%s%s%s%s",
	    res->status == 0 ? "transport error: " : "",
	    res->error_type != NULL ? res->error_type : "",
	    res->error_type != NULL ? ": " : "",
	    res->error_message != NULL ? res->error_message : "unknown") == -1)
		call->error = NULL;
}

static struct event_base *ctl_creds_base;

/* The chain's first answer, good or bad, ends the wait for it. */
static void
ctl_creds_notify(void)
{
	event_base_loopbreak(ctl_creds_base);
}

/* The chain's credentials on base, as the workers get them (creds.c);
 * -1 with the reason on stderr (no secret in it). */
static int
ctl_creds(struct event_base *base, struct conf *conf)
{
	const char	*a, *s, *t;
	char		 why[300];

	ctl_creds_base = base;
	if (creds_start(base, conf, -1, ctl_creds_notify) == -1) {
		fprintf(stderr, "outboxctl: %s: no usable AWS credential "
		    "source\n", conf->path);
		return (-1);
	}
	if (creds_current(&a, &s, &t) == 0)
		return (0);
	event_base_dispatch(base);
	if (creds_current(&a, &s, &t) == 0)
		return (0);
	fprintf(stderr, "outboxctl: AWS credentials (%s): %s\n",
	    conf->aws.source, creds_state(why, sizeof why));
	return (-1);
}

/* Run one AWS call to completion.  Returns -1 if it never started. */
static int
ctl_call_run(struct conf *conf, enum aws_service svc, const char *action,
    const char *body, size_t len, struct ctl_call *call)
{
	struct event_base	*base;
	struct httpc		*hc;
	int			 rv = -1;

	memset(call, 0, sizeof *call);
	if ((base = event_base_new()) == NULL) {
		fprintf(stderr, "outboxctl: cannot create an event loop\n");
		return (-1);
	}
	call->base = base;
	if ((hc = httpc_new(base)) == NULL) {
		fprintf(stderr, "outboxctl: cannot create an HTTP client\n");
		goto out;
	}
	if (ctl_creds(base, conf) == -1)
		goto out;
	if (aws_call(hc, conf, svc, action, body, len, CTL_TIMEOUT,
	    ctl_reply, call, NULL) == -1) {
		fprintf(stderr, "outboxctl: %s request not started\n", action);
		goto out;
	}
	/* ctl_reply breaks the loop; idle connections may keep it alive. */
	event_base_dispatch(base);
	if (!call->done) {
		fprintf(stderr, "outboxctl: %s: no reply\n", action);
		goto out;
	}
	rv = 0;
out:
	httpc_free(hc);
	creds_stop();
	event_base_free(base);
	return (rv);
}

static int
ctl_fulfillment(struct conf *conf, int argc, char **argv)
{
	struct ctl_call	 call;
	cJSON		*item, *plain;
	char		*body, *text;
	size_t		 len;
	int		 rv;

	(void)argc;
	if (conf->aws.region == NULL && conf->aws.region_imds == NULL) {
		fprintf(stderr, "outboxctl: %s: the AWS region is not set "
		    "(aws.region, AWS_REGION, AWS_DEFAULT_REGION, the "
		    "profile's region or instance metadata)\n", conf->path);
		return (OUTBOXD_EX_CONFIG);
	}
	if (conf->dynamodb_table == NULL) {
		fprintf(stderr, "outboxctl: %s: dynamodb table is not set\n",
		    conf->path);
		return (OUTBOXD_EX_CONFIG);
	}
	if ((body = ddb_get_body(conf->dynamodb_table, argv[0], &len)) ==
	    NULL) {
		fprintf(stderr, "outboxctl: out of memory\n");
		return (CTL_EX_AWS);
	}
	rv = ctl_call_run(conf, AWS_DYNAMODB, "GetItem", body, len, &call);
	free(body);
	if (rv == -1)
		return (CTL_EX_AWS);
	if (!call.ok) {
		fprintf(stderr, "outboxctl: DynamoDB GetItem on table %s "
		    "failed: %s\n", conf->dynamodb_table,
		    call.error != NULL ? call.error : "unknown error");
		free(call.error);
		return (CTL_EX_AWS);
	}
	item = cJSON_GetObjectItemCaseSensitive(call.json, "Item");
	if (item == NULL) {
		fprintf(stderr, "outboxctl: no fulfillment for order %s\n",
		    argv[0]);
		cJSON_Delete(call.json);
		return (CTL_EX_NOTFOUND);
	}
	if ((plain = ddb_item_to_json(item)) == NULL ||
	    (text = cJSON_Print(plain)) == NULL) {
		fprintf(stderr, "outboxctl: DynamoDB returned an item that "
		    "cannot be read\n");
		cJSON_Delete(plain);
		cJSON_Delete(call.json);
		return (CTL_EX_AWS);
	}
	printf("%s\n", text);
	free(text);
	cJSON_Delete(plain);
	cJSON_Delete(call.json);
	return (CTL_EX_FOUND);
}

int
main(int argc, char **argv)
{
	const struct ctl_cmd	*cmd = NULL;
	const char		*path = SYSCONFDIR "/outbox.conf";
	struct conf		*conf;
	char			 err[1024];
	size_t			 i;
	int			 ch, rv;

	/* '+': options stop at the command name. */
	while ((ch = getopt(argc, argv, "+c:hV")) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'V':
			printf("outboxctl %s\n", PACKAGE_VERSION);
			return (0);
		case 'h':
			ctl_usage(1);
		default:
			ctl_usage(0);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		ctl_usage(0);
	for (i = 0; i < CTL_NCMDS; i++) {
		if (strcmp(argv[0], ctl_cmds[i].name) == 0)
			cmd = &ctl_cmds[i];
	}
	if (cmd == NULL) {
		fprintf(stderr, "outboxctl: unknown command: %s\n", argv[0]);
		ctl_usage(0);
	}
	if (cmd->argc >= 0 && argc - 1 != cmd->argc) {
		fprintf(stderr, "usage: outboxctl [-c file] %s %s\n",
		    cmd->name, cmd->args);
		return (CTL_EX_USAGE);
	}

	/* Library messages on stderr, only when they matter. */
	log_init("outboxctl", -1);
	log_set_level(LOG_LEVEL_WARN);
	if (conf_load(path, &conf, err, sizeof err) == -1) {
		fprintf(stderr, "outboxctl: %s\n", err);
		return (OUTBOXD_EX_CONFIG);
	}
	rv = cmd->run(conf, argc - 1, argv + 1);
	conf_free(conf);
	return (rv);
}
