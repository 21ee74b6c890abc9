/*
 * main.c - options, first configuration load, schema check, listening
 * socket, privileges, pidfile; then the master takes over.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "outboxd.h"
#include "wal.h"

#define MAIN_DEFAULT_CONF	SYSCONFDIR "/outbox.conf"
#define MAIN_BACKLOG		511

static __dead void
main_usage(int status)
{
	fprintf(status ? stderr : stdout,
	    "usage: outboxd [-thV] [-c file]\n"
	    "  -c file  configuration file (default %s)\n"
	    "  -t       check the configuration and exit\n"
	    "  -V       print the version and exit\n"
	    "  -h       this help\n", MAIN_DEFAULT_CONF);
	exit(status);
}

/* Bind and listen on host:port (host NULL = all addresses); returns a
 * non-blocking socket shared by every HTTP worker, or -1. */
static int
main_listen(const char *host, const char *port)
{
	struct addrinfo	 hints, *res, *ai;
	int		 fd = -1, on = 1, rv;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	if ((rv = getaddrinfo(host, port, &hints, &res)) != 0) {
		log_error("listen %s:%s: %s", host ? host : "*", port,
		    gai_strerror(rv));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK,
		    ai->ai_protocol);
		if (fd == -1)
			continue;
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, MAIN_BACKLOG) == 0)
			break;
		log_warn("listen %s:%s", host ? host : "*", port);
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* Write the pid atomically: a reader never sees a partial file. */
static int
main_write_pidfile(const char *path)
{
	char	tmp[4096], buf[32];
	int	fd, n;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1)
		return -1;
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (write(fd, buf, n) != n || close(fd) == -1 ||
	    rename(tmp, path) == -1) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int
main_drop_privileges(const char *user)
{
	struct passwd	*pw;

	if (geteuid() != 0)
		return 0;
	if ((pw = getpwnam(user)) == NULL) {
		log_error("user %s does not exist", user);
		return -1;
	}
	if (setgroups(1, &pw->pw_gid) == -1 || setgid(pw->pw_gid) == -1 ||
	    setuid(pw->pw_uid) == -1) {
		log_warn("cannot become user %s", user);
		return -1;
	}
	return 0;
}

/* Connect once to report a missing schema before forking anything.  An
 * unreachable server is not fatal: workers retry with backoff. */
static int
main_check_database(const struct conf *c)
{
	PGconn	*conn;
	char	 err[1024];
	int	 rv = 0;

	if ((conn = db_connect(c->database, "master", err,
	    sizeof(err))) == NULL) {
		log_warnx("database unreachable at start-up (workers will "
		    "retry): %s", err);
		return 0;
	}
	if (db_check_schema(conn, err, sizeof(err)) == -1) {
		log_error("%s", err);
		rv = -1;
	} else if (c->relay.mode == CONF_RELAY_WAL && c->relay.workers > 0 &&
	    wal_check(conn, c, err, sizeof(err)) == -1) {
		log_error("%s", err);
		rv = -1;
	}
	PQfinish(conn);
	return rv;
}

/* -t with relay.mode = "wal": what the server must allow, where it can
 * be asked.  0, or -1 (said on stderr). */
static int
main_test_wal(const struct conf *c)
{
	PGconn	*conn;
	char	 err[1024];
	int	 rv = 0;

	if (c->relay.mode != CONF_RELAY_WAL || c->relay.workers <= 0)
		return 0;
	if ((conn = db_connect(c->database, "master", err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "outboxd: warning: cannot check the server for "
		    "relay.mode = \"wal\" (wal_level, REPLICATION, a free "
		    "slot): %s\n", err);
		return 0;
	}
	if (wal_check(conn, c, err, sizeof(err)) == -1) {
		fprintf(stderr, "outboxd: %s: %s\n", c->path, err);
		rv = -1;
	}
	PQfinish(conn);
	return rv;
}

int
main(int argc, char **argv)
{
	struct conf	*conf;
	const char	*path = MAIN_DEFAULT_CONF;
	char		 err[1024], *pidfile;
	sigset_t	 set;
	int		 ch, test = 0, listen_fd = -1, admin_fd = -1, rv;

	/* Hold the master's signals until its loop can handle them: one
	 * that arrives during start-up is delivered then, not lost, and
	 * cannot kill the process half-started.  A reload request or a log
	 * reopen is held from the start; a stop (TERM, INT, QUIT) only once
	 * the configuration is read, so that -t and the first load end on
	 * it, whatever the file does. */
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);

	while ((ch = getopt(argc, argv, "c:thV")) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 't':
			test = 1;
			break;
		case 'V':
			printf("outboxd %s\n", PACKAGE_VERSION);
			return 0;
		case 'h':
			main_usage(0);
		default:
			main_usage(2);
		}
	}
	if (optind != argc)
		main_usage(2);

	proc_title_init(argc, argv);
	log_init("master", -1);
	if (conf_load(path, &conf, err, sizeof(err)) == -1) {
		fprintf(stderr, "outboxd: %s\n", err);
		return OUTBOXD_EX_CONFIG;
	}
	if (test) {
		if (main_test_wal(conf) == -1) {
			conf_free(conf);
			return OUTBOXD_EX_CONFIG;
		}
		if (conf->mode_warning != NULL)
			fprintf(stderr, "outboxd: warning: %s\n",
			    conf->mode_warning);
		printf("outboxd: %s: configuration OK\n", path);
		/* The chain's choice, not its secrets: nothing is fetched. */
		if (conf->aws.source[0] != '\0')
			printf("credentials: %s\nregion: %s%s%s\n",
			    conf->aws.source, conf->aws.region != NULL ?
			    conf->aws.region : "", conf->aws.region != NULL ?
			    " " : "", conf->aws.region_from);
		if (conf->pubsub.source[0] != '\0')
			printf("Google credentials: %s\n", conf->pubsub.source);
		conf_free(conf);
		return 0;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGQUIT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	log_set_level(conf->log_level);
	log_set_format(conf->log_format);
	if (conf->log_file != NULL && log_open(conf->log_file) == -1) {
		log_warn("log_file %s", conf->log_file);
		return OUTBOXD_EX_CONFIG;
	}
	if (conf->mode_warning != NULL)
		log_warnx("%s", conf->mode_warning);
	if (main_check_database(conf) == -1) {
		conf_free(conf);
		return OUTBOXD_EX_CONFIG;
	}
	if (conf->http.workers > 0 &&
	    (listen_fd = main_listen(conf->http.host, conf->http.port)) == -1)
		return 1;
	/* The admin API: its own socket, bound only when it is on. */
	if (conf->admin.listen != NULL && conf->admin.token != NULL &&
	    (admin_fd = main_listen(conf->admin.host, conf->admin.port)) == -1)
		return 1;
	if (conf->pidfile != NULL && main_write_pidfile(conf->pidfile) == -1) {
		log_warn("pidfile %s", conf->pidfile);
		return 1;
	}
	if (conf->user != NULL && main_drop_privileges(conf->user) == -1)
		return OUTBOXD_EX_CONFIG;

	/* The pidfile path outlives conf, which reloads may replace. */
	pidfile = conf->pidfile != NULL ? strdup(conf->pidfile) : NULL;
	rv = master_run(conf, listen_fd, admin_fd);
	if (pidfile != NULL && unlink(pidfile) == -1 && errno != ENOENT)
		log_warn("unlink %s", pidfile);
	free(pidfile);
	return rv;
}
