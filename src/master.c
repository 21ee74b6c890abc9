/*
 * master.c - the supervisor: forks the HTTP, relay and consumer workers,
 * reaps and respawns them with backoff, and turns signals into actions.
 *
 * Every worker lives in a slot (role, index, generation).  A slot whose
 * child dies is respawned after an exponential delay with jitter; a child
 * that exits with OUTBOXD_EX_CONFIG is not respawned; too many crashes in
 * a window stop the master (systemd decides what next).  A reload parses
 * the file into a new configuration, starts a new generation of slots and
 * then drains the old one, as nginx does; a generation runs at least a
 * second before a reload retires it.  Signals (PostgreSQL/PgBouncer
 * meanings): TERM/INT graceful stop, a second TERM or QUIT immediate stop,
 * HUP reload, USR1 reopen logs.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "outboxd.h"
#include "metrics_api.h"

#define MASTER_BACKOFF_MIN	100		/* ms */
#define MASTER_BACKOFF_MAX	30000		/* ms */
#define MASTER_STABLE_AFTER	10000		/* ms up = healthy again */
#define MASTER_CRASH_WINDOW	60000		/* ms */
#define MASTER_CRASH_LIMIT	30		/* crashes per window, all slots */
#define MASTER_SLOT_FAILURES	8		/* crashes in a row, one slot */
#define MASTER_RELOAD_MIN	1000		/* ms a generation runs at least */
#define MASTER_MAX_SLOTS	512

enum role { ROLE_HTTP, ROLE_RELAY, ROLE_CONSUMER, ROLE_ADMIN };
static const char *const role_names[] = { "http", "relay", "consumer",
	"admin" };

struct slot {
	enum role	 role;
	int		 index;
	int		 generation;
	pid_t		 pid;		/* 0 = not running */
	int		 retiring;	/* old generation: never respawn */
	int		 told;		/* 1: retired (reload), 2: stop sent */
	int		 disabled;	/* exited with EX_CONFIG */
	long		 delay;		/* next respawn delay, ms */
	int		 failures;	/* crashes since it last stayed up */
	long long	 started;	/* ms, monotonic */
	struct event	*respawn;	/* pending respawn timer */
};

struct master {
	struct event_base	*base;
	struct conf		*conf;
	int			 listen_fd;
	int			 admin_fd;	/* -1: admin API off */
	int			 generation;
	int			 stopping;	/* 1 graceful, 2 immediate */
	struct slot		*slots[MASTER_MAX_SLOTS];
	int			 nslots;
	long long		 crashes[MASTER_CRASH_LIMIT];
	int			 ncrash;
	int			 exit_status;
	struct event		*stop_timer;
	long long		 gen_started;	/* ms, newest generation */
	struct event		*reload_timer;	/* a held reload */
};

/* Monotonic milliseconds. */
static long long
master_now(void)
{
	return (long long)(clock_mono_us() / 1000);
}

/* systemd's sd_notify protocol: one datagram to $NOTIFY_SOCKET.  A few
 * lines of our own instead of a libsystemd dependency. */
static void
master_sd_notify(const char *state)
{
	struct sockaddr_un	 sun;
	const char		*path = getenv("NOTIFY_SOCKET");
	socklen_t		 len;
	int			 fd;

	if (path == NULL || (path[0] != '/' && path[0] != '@') ||
	    strlen(path) >= sizeof(sun.sun_path))
		return;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path));
	if (sun.sun_path[0] == '@')
		sun.sun_path[0] = '\0';	/* abstract namespace */
	len = offsetof(struct sockaddr_un, sun_path) + strlen(path);
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return;
	(void)sendto(fd, state, strlen(state), MSG_NOSIGNAL,
	    (struct sockaddr *)&sun, len);
	close(fd);
}

static int
master_workers(const struct conf *c, enum role r)
{
	switch (r) {
	case ROLE_HTTP:
		return c->http.workers;
	case ROLE_RELAY:
		return c->relay.workers;
	case ROLE_CONSUMER:
		return c->consumer.workers;
	case ROLE_ADMIN:
		return c->admin.listen != NULL && c->admin.token != NULL;
	}
	return 0;
}

/* Readiness (GET /readyz) and metrics: how many workers of the current
 * generation run, out of how many the configuration asks for. */
static void
master_count_up(struct master *m)
{
	int	i, up = 0, want = 0;

	for (i = 0; i < m->nslots; i++)
		if (!m->slots[i]->retiring && m->slots[i]->pid != 0)
			up++;
	for (i = ROLE_HTTP; i <= ROLE_ADMIN; i++)
		want += master_workers(m->conf, (enum role)i);
	metrics_set_workers(up, want);
}

/* In the child: forget the master's loop and signal handling, arrange to
 * die with the master, and run the worker. */
static __dead void
master_child(struct master *m, struct slot *s, const sigset_t *oldmask)
{
	static const int	 sigs[] = { SIGTERM, SIGINT, SIGQUIT, SIGHUP,
				    SIGCHLD, SIGUSR1, SIGPIPE };
	pid_t			 master_pid = getppid();
	sigset_t		 mask, wsigs;
	size_t			 i;
	int			 rv = 1;

	/* A new backend first, so freeing the base cannot touch the
	 * master's epoll set; freeing it restores the signal handlers. */
	(void)event_reinit(m->base);
	event_base_free(m->base);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	/* A terminal's Ctrl-C sends SIGINT to the whole process group; the
	 * master answers it with a SIGUSR2 to each worker, which a worker
	 * that had taken the SIGINT too would count as a second stop and
	 * exit without its drain.  Workers stop on the master's word only. */
	signal(SIGINT, SIG_IGN);
	/* Orphans never run alone: the kernel sends TERM when the master
	 * dies; the getppid() check closes the race with an early death. */
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* The worker's signals (stop and retire words, log reopen, SIGHUP)
	 * wait, blocked, until proc_worker_signals() handles them: one sent
	 * right after the fork (a stop or a log reopen just after a reload)
	 * neither kills the new worker nor, the master's SIGUSR2 being
	 * ignored here, is lost. */
	signal(SIGUSR2, SIG_DFL);
	signal(PROC_SIG_RETIRE, SIG_DFL);
	proc_worker_sigset(&wsigs);
	sigorset(&mask, oldmask, &wsigs);
	sigprocmask(SIG_SETMASK, &mask, NULL);
	if (getppid() != master_pid)
		_exit(1);
	srandom((unsigned)(getpid() ^ master_now()));

	if (s->role != ROLE_HTTP && m->listen_fd != -1)
		close(m->listen_fd);
	if (s->role != ROLE_ADMIN && m->admin_fd != -1)
		close(m->admin_fd);
	handoff_keep(s->role == ROLE_HTTP ? HANDOFF_SENDER :
	    s->role == ROLE_RELAY && s->index == 1 ? HANDOFF_RECEIVER :
	    HANDOFF_NONE);
	switch (s->role) {
	case ROLE_HTTP:
		rv = http_worker_main(m->conf, m->listen_fd, s->index);
		break;
	case ROLE_RELAY:
		rv = relay_main(m->conf, s->index);
		break;
	case ROLE_CONSUMER:
		rv = consumer_main(m->conf, s->index);
		break;
	case ROLE_ADMIN:
		rv = admin_http_main(m->conf, m->admin_fd);
		break;
	}
	exit(rv);
}

static int
master_spawn(struct master *m, struct slot *s)
{
	sigset_t	all, old;
	pid_t		pid;

	/* Block signals across fork so the child cannot run the master's
	 * handlers before it has reset them (tmux's fork discipline). */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid == 0)
		master_child(m, s, &old);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid == -1) {
		log_warn("fork %s %d", role_names[s->role], s->index);
		return -1;
	}
	s->pid = pid;
	s->told = 0;
	s->started = master_now();
	log_info("started %s %d pid=%ld generation=%d", role_names[s->role],
	    s->index, (long)pid, s->generation);
	master_count_up(m);
	return 0;
}

static void	master_schedule(struct master *, struct slot *);

/* Free a slot that no longer has a child or a pending respawn. */
static void
master_slot_free(struct master *m, int i)
{
	struct slot	*s = m->slots[i];

	if (s->respawn != NULL)
		event_free(s->respawn);
	free(s);
	m->slots[i] = m->slots[--m->nslots];
}

static struct master	*master_self;	/* for the respawn timer callback */

static void
master_respawn(evutil_socket_t fd, short what, void *arg)
{
	struct slot	*s = arg;

	(void)fd;
	(void)what;
	if (master_self->stopping || s->retiring || s->pid != 0)
		return;
	if (master_spawn(master_self, s) == -1)
		master_schedule(master_self, s);
	else
		metrics_worker_restart(role_names[s->role]);
}

static void
master_schedule(struct master *m, struct slot *s)
{
	struct timeval	tv;
	long		d = s->delay;

	/* Jitter (+-25%) keeps workers that died together from coming
	 * back in lockstep. */
	d += (random() % (d / 2 + 1)) - d / 4;
	tv = clock_tv(d);
	if (s->respawn == NULL)
		s->respawn = evtimer_new(m->base, master_respawn, s);
	evtimer_add(s->respawn, &tv);
	log_info("respawning %s %d in %ld ms", role_names[s->role], s->index,
	    d);
	s->delay = s->delay * 2 > MASTER_BACKOFF_MAX ? MASTER_BACKOFF_MAX :
	    s->delay * 2;
}

/* Record a crash; returns 1 when the crash limit is exceeded. */
static int
master_count_crash(struct master *m)
{
	long long	now = master_now();
	int		i, n = 0;

	for (i = 0; i < m->ncrash; i++)
		if (now - m->crashes[i] < MASTER_CRASH_WINDOW)
			m->crashes[n++] = m->crashes[i];
	m->ncrash = n;
	if (m->ncrash == MASTER_CRASH_LIMIT)
		return 1;
	m->crashes[m->ncrash++] = now;
	return 0;
}

static int	master_running(const struct master *);
static void	master_finish(struct master *);
static void	master_reload_request(struct master *);

static void
master_reaped(struct master *m, pid_t pid, int status)
{
	struct slot	*s = NULL;
	char		 how[64];
	int		 i, crash;

	for (i = 0; i < m->nslots; i++)
		if (m->slots[i]->pid == pid) {
			s = m->slots[i];
			break;
		}
	if (WIFSIGNALED(status))
		snprintf(how, sizeof(how), "killed by signal %d (%s)",
		    WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(how, sizeof(how), "exited with status %d",
		    WEXITSTATUS(status));
	if (s == NULL) {
		log_info("reaped unknown child pid=%ld: %s", (long)pid, how);
		return;
	}
	s->pid = 0;
	master_count_up(m);
	crash = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (m->stopping || s->retiring) {
		log_info("%s %d pid=%ld %s", role_names[s->role], s->index,
		    (long)pid, how);
		master_slot_free(m, i);
		if (m->stopping && !master_running(m))
			master_finish(m);
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == OUTBOXD_EX_CONFIG) {
		log_error("%s %d pid=%ld %s (configuration error): not "
		    "respawned", role_names[s->role], s->index, (long)pid, how);
		s->disabled = 1;
		return;
	}
	log_warnx("%s %d pid=%ld %s", role_names[s->role], s->index,
	    (long)pid, how);
	if (master_now() - s->started >= MASTER_STABLE_AFTER) {
		s->delay = MASTER_BACKOFF_MIN;
		s->failures = 0;
	}
	/* The backoff spreads one slot's crashes out, so a window count
	 * alone would never trip for a worker that can never start: count
	 * its failures in a row too. */
	if (crash && ++s->failures >= MASTER_SLOT_FAILURES) {
		log_error("%s %d crashed %d times in a row without staying up "
		    "%d s: giving up", role_names[s->role], s->index,
		    s->failures, MASTER_STABLE_AFTER / 1000);
		crash = -1;
	} else if (crash && master_count_crash(m)) {
		log_error("%d worker crashes within %d s: giving up",
		    MASTER_CRASH_LIMIT + 1, MASTER_CRASH_WINDOW / 1000);
		crash = -1;
	}
	if (crash == -1) {
		m->exit_status = 1;
		m->stopping = 2;
		for (i = 0; i < m->nslots; i++)
			if (m->slots[i]->pid != 0)
				kill(m->slots[i]->pid, SIGKILL);
		if (!master_running(m))
			master_finish(m);
		return;
	}
	master_schedule(m, s);
}

static void
master_reap(struct master *m)
{
	pid_t	pid;
	int	status;

	/* SIGCHLDs coalesce: reap everything that has exited. */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		master_reaped(m, pid, status);
}

static int
master_running(const struct master *m)
{
	int	i, n = 0;

	for (i = 0; i < m->nslots; i++)
		if (m->slots[i]->pid != 0)
			n++;
	return n;
}

static void
master_finish(struct master *m)
{
	event_base_loopbreak(m->base);
}

static void
master_signal_all(struct master *m, int sig, int retiring_only)
{
	int	i;

	for (i = 0; i < m->nslots; i++)
		if (m->slots[i]->pid != 0 &&
		    (!retiring_only || m->slots[i]->retiring))
			kill(m->slots[i]->pid, sig);
}

/*
 * Ask workers to drain.  retiring_only (a reload): the old generations,
 * with PROC_SIG_RETIRE, no deadline.  Else (a stop): every worker, with
 * SIGUSR2, the old ones again, so that they too give up what hangs before
 * shutdown_timeout kills them.  Once each: a worker still draining keeps
 * the requests and batches in its hands.  Not SIGTERM: to a worker a
 * second SIGTERM means "stop now" (proc.c), and a worker that got the
 * SIGTERM sent to the whole process group would take the master's as
 * that second one and skip its drain.
 */
static void
master_drain(struct master *m, int retiring_only)
{
	struct slot	*s;
	int		 i, told = retiring_only ? 1 : 2;

	for (i = 0; i < m->nslots; i++) {
		s = m->slots[i];
		if (s->pid == 0 || s->told >= told ||
		    (retiring_only && !s->retiring))
			continue;
		kill(s->pid, retiring_only ? PROC_SIG_RETIRE : SIGUSR2);
		s->told = told;
	}
}

static void
master_stop_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct master	*m = arg;

	(void)fd;
	(void)what;
	log_warnx("shutdown_timeout reached: killing %d worker(s)",
	    master_running(m));
	master_signal_all(m, SIGKILL, 0);
	m->stopping = 2;
}

static int
master_add_generation(struct master *m)
{
	static const enum role	 roles[] = { ROLE_HTTP, ROLE_RELAY,
				    ROLE_CONSUMER, ROLE_ADMIN };
	struct slot		*s;
	size_t			 r;
	int			 i, n;

	m->generation++;
	m->gen_started = master_now();
	/* Before the fork: the workers count under these slots. */
	metrics_destinations(m->conf);
	for (r = 0; r < sizeof(roles) / sizeof(roles[0]); r++) {
		n = master_workers(m->conf, roles[r]);
		for (i = 0; i < n; i++) {
			if (m->nslots == MASTER_MAX_SLOTS ||
			    (s = calloc(1, sizeof(*s))) == NULL) {
				log_error("too many workers");
				return -1;
			}
			s->role = roles[r];
			s->index = i + 1;
			s->generation = m->generation;
			s->delay = MASTER_BACKOFF_MIN;
			m->slots[m->nslots++] = s;
			if (master_spawn(m, s) == -1)
				master_schedule(m, s);
		}
	}
	return 0;
}

static void
master_reload(struct master *m)
{
	struct conf	*nc;
	char		 err[512];
	int		 i;

	master_sd_notify("RELOADING=1");
	log_info("reloading %s", m->conf->path);
	if (conf_load(m->conf->path, &nc, err, sizeof(err)) == -1) {
		log_error("reload failed, keeping the running configuration: "
		    "%s", err);
		metrics_reload(0);
		master_sd_notify("READY=1");
		return;
	}
	if (strcmp(nc->http.listen, m->conf->http.listen) != 0)
		log_warnx("http.listen changed to %s: needs a restart, still "
		    "listening on %s", nc->http.listen, m->conf->http.listen);
	if (m->listen_fd == -1 && nc->http.workers > 0) {
		log_warnx("http.workers > 0 but no socket was bound at start "
		    "(http.workers was 0): needs a restart, not applied");
		nc->http.workers = 0;
	}
	if ((nc->pidfile == NULL) != (m->conf->pidfile == NULL) ||
	    (nc->pidfile != NULL && strcmp(nc->pidfile,
	    m->conf->pidfile) != 0))
		log_warnx("pidfile changed: needs a restart, not applied");
	if ((nc->user == NULL) != (m->conf->user == NULL) ||
	    (nc->user != NULL && strcmp(nc->user, m->conf->user) != 0))
		log_warnx("user changed: needs a restart, not applied");
	if ((nc->admin.listen == NULL) != (m->conf->admin.listen == NULL) ||
	    (nc->admin.listen != NULL && strcmp(nc->admin.listen,
	    m->conf->admin.listen) != 0))
		log_warnx("admin.listen changed: needs a restart, not applied");
	if (m->admin_fd == -1 && nc->admin.token != NULL) {
		if (nc->admin.listen != NULL)
			log_warnx("admin API turned on: needs a restart (no "
			    "socket was bound at start), not applied");
		free(nc->admin.token);
		nc->admin.token = NULL;
	}
	/* Keep what cannot change without a restart. */
	free(nc->admin.listen);
	nc->admin.listen = m->conf->admin.listen != NULL ?
	    strdup(m->conf->admin.listen) : NULL;
	free(nc->http.listen);
	nc->http.listen = strdup(m->conf->http.listen);
	free(nc->user);
	nc->user = m->conf->user ? strdup(m->conf->user) : NULL;
	log_set_level(nc->log_level);
	log_set_format(nc->log_format);
	if ((nc->log_file == NULL) != (m->conf->log_file == NULL) ||
	    (nc->log_file != NULL && strcmp(nc->log_file,
	    m->conf->log_file) != 0)) {
		if (log_open(nc->log_file) == -1)
			log_warn("log_file %s", nc->log_file);
	}

	/* Old generation: never respawned, drained once the new one runs.
	 * HTTP workers share the listening socket, so no connection is
	 * refused while both generations accept. */
	for (i = 0; i < m->nslots; i++) {
		m->slots[i]->retiring = 1;
		if (m->slots[i]->respawn != NULL)
			evtimer_del(m->slots[i]->respawn);
	}
	conf_free(m->conf);
	m->conf = nc;
	if (master_add_generation(m) == -1)
		log_error("reload: could not start every new worker");
	master_drain(m, 1);
	for (i = m->nslots - 1; i >= 0; i--)
		if (m->slots[i]->retiring && m->slots[i]->pid == 0)
			master_slot_free(m, i);
	log_info("reload done: generation %d", m->generation);
	master_count_up(m);
	metrics_reload(1);
	master_sd_notify("READY=1");
}

static void
master_reload_held(evutil_socket_t fd, short what, void *arg)
{
	struct master	*m = arg;

	(void)fd;
	(void)what;
	if (!m->stopping)
		master_reload_request(m);	/* held long enough? */
}

/*
 * SIGHUP.  A reload retires the running generation; one still starting
 * (its workers connecting to the database) would be stopped before it
 * ever served, and an HTTP worker stopped in its first moments can drop
 * connections it has just accepted.  So a generation runs at least
 * MASTER_RELOAD_MIN ms: a SIGHUP that comes sooner is held until then,
 * and that one reload, which reads the file as it is then, answers every
 * SIGHUP held meanwhile.  A burst of SIGHUPs cannot fork a burst of
 * generations either.
 */
static void
master_reload_request(struct master *m)
{
	struct timeval	tv;
	long long	wait;

	if (evtimer_pending(m->reload_timer, NULL))
		return;
	wait = m->gen_started + MASTER_RELOAD_MIN - master_now();
	if (wait <= 0) {
		master_reload(m);
		return;
	}
	master_sd_notify("RELOADING=1");
	log_info("reload held %lld ms: generation %d started %lld ms ago",
	    wait, m->generation, MASTER_RELOAD_MIN - wait);
	/*
	 * libevent times the timer from the loop's cached clock, read before
	 * this turn's callbacks; forking a generation in the same turn (slow
	 * in a sanitizer build) would make it fire that much early.
	 */
	event_base_update_cache_time(m->base);
	tv = clock_tv(wait);
	evtimer_add(m->reload_timer, &tv);
}

static void
master_on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct master	*m = arg;
	struct timeval	 tv;

	(void)what;
	switch (sig) {
	case SIGCHLD:
		master_reap(m);
		break;
	case SIGTERM:
	case SIGINT:
		if (m->stopping) {
			log_info("second stop signal: stopping now");
			master_signal_all(m, SIGKILL, 0);
			m->stopping = 2;
			break;
		}
		log_info("graceful stop: draining %d worker(s), up to %ld ms",
		    master_running(m), m->conf->shutdown_timeout);
		master_sd_notify("STOPPING=1");
		m->stopping = 1;
		/* No relay 1 will read handed-off rows any more: senders
		 * learn it (EPIPE) and give their rows back (http.c). */
		(void)handoff_shut();
		master_drain(m, 0);
		tv = clock_tv(m->conf->shutdown_timeout);
		m->stop_timer = evtimer_new(m->base, master_stop_timeout, m);
		evtimer_add(m->stop_timer, &tv);
		break;
	case SIGQUIT:
		log_info("immediate stop");
		master_sd_notify("STOPPING=1");
		master_signal_all(m, SIGQUIT, 0);
		m->stopping = 2;
		break;
	case SIGHUP:
		if (!m->stopping)
			master_reload_request(m);
		break;
	case SIGUSR1:
		if (log_reopen() == -1)
			log_warn("log file reopen");
		master_signal_all(m, SIGUSR1, 0);
		break;
	}
	if (m->stopping && !master_running(m))
		master_finish(m);
}

int
master_run(struct conf *conf, int listen_fd, int admin_fd)
{
	static const int	 sigs[] = { SIGCHLD, SIGTERM, SIGINT, SIGQUIT,
				    SIGHUP, SIGUSR1 };
	struct master		 m;
	struct event		*ev[sizeof(sigs) / sizeof(sigs[0])];
	struct timespec		 ts;
	size_t			 i;
	int			 j;

	memset(&m, 0, sizeof(m));
	m.conf = conf;
	m.listen_fd = listen_fd;
	m.admin_fd = admin_fd;
	master_self = &m;
	/* Before the first fork: every worker counts into this region. */
	if (metrics_init() == -1)
		log_warn("metrics: cannot map shared memory; nothing is counted");
	if (handoff_open() == -1)
		log_warn("handoff socket: relays will claim every row");
	/* With random()'s default seed every master would draw the same
	 * jitter, and instances restarted together (one per host, after a
	 * database outage) would respawn in lockstep all the same. */
	clock_gettime(CLOCK_REALTIME, &ts);
	srandom((unsigned)(getpid() ^ ts.tv_sec ^ ts.tv_nsec));
	if ((m.base = event_base_new()) == NULL ||
	    (m.reload_timer = evtimer_new(m.base, master_reload_held,
	    &m)) == NULL)
		fatalx("event_base_new failed");
	signal(SIGPIPE, SIG_IGN);
	/* The workers' stop and retire words: sent to the master by mistake
	 * (or to the whole group), they must not kill it.  A new worker
	 * blocks them until it handles them (master_child()). */
	signal(SIGUSR2, SIG_IGN);
	signal(PROC_SIG_RETIRE, SIG_IGN);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		ev[i] = evsignal_new(m.base, sigs[i], master_on_signal, &m);
		if (ev[i] == NULL || evsignal_add(ev[i], NULL) == -1)
			fatalx("cannot handle signal %d", sigs[i]);
	}
	/* Signals that arrived during start-up were blocked by main();
	 * now that handlers exist they are delivered, not lost. */
	{
		sigset_t	set;

		sigemptyset(&set);
		for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			sigaddset(&set, sigs[i]);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
	}
	proc_set_title("outboxd: master");
	log_info("outboxd %s starting: %d http, %d relay, %d consumer "
	    "worker(s)", PACKAGE_VERSION, conf->http.workers,
	    conf->relay.workers, conf->consumer.workers);
	if (master_add_generation(&m) == -1)
		m.stopping = 2;
	master_sd_notify("READY=1");

	event_base_dispatch(m.base);

	master_reap(&m);
	for (j = m.nslots - 1; j >= 0; j--)
		master_slot_free(&m, j);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		event_free(ev[i]);
	if (m.stop_timer != NULL)
		event_free(m.stop_timer);
	event_free(m.reload_timer);
	event_base_free(m.base);
	handoff_close();
	log_info("stopped");
	conf_free(m.conf);
	return m.exit_status;
}
