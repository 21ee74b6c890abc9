/*
 * proc.c - what every process does about signals and its name.
 *
 * Signals are events in the libevent loop (as PgBouncer does), so no
 * handler does unsafe work; the process title overwrites the argv area
 * (as nginx and PostgreSQL do) so ps shows each process's role.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "outboxd.h"

extern char	**environ;

static char	 *proc_title_base;	/* start of the argv area */
static size_t	  proc_title_len;	/* bytes we may overwrite */
/* Our copy of the environment, also kept here: at exit environ no longer
 * points to it and valgrind called it lost.  "used": the compiler would
 * drop a variable that is only written. */
static char	**proc_environ __attribute__((__used__));

/* The signals a worker handles, see proc_worker_signals(); the last is
 * PROC_SIG_RETIRE, known only at run time (glibc's SIGRTMIN). */
static int		 proc_worker_sigs[] = { SIGTERM, SIGUSR2, SIGQUIT,
			     SIGUSR1, 0 };
#define PROC_NSIGS	(sizeof(proc_worker_sigs) / sizeof(proc_worker_sigs[0]))

struct proc_sigstate {
	void		(*on_stop)(void *, int);
	void		 *arg;
	int		  stopping;
	int		  deadline;	/* the master kills at shutdown_timeout */
	int		  by_master;	/* its SIGUSR2 came */
	int		  terms;	/* SIGTERMs received */
	struct event	 *ev[PROC_NSIGS]; /* one per signal handled */
};
static struct proc_sigstate proc_sig;

void
proc_title_init(int argc, char **argv)
{
	char	*end;
	int	 i, n;

	if (argc < 1 || argv[0] == NULL)
		return;
	end = argv[0] + strlen(argv[0]);
	for (i = 1; i < argc && argv[i] == end + 1; i++)
		end = argv[i] + strlen(argv[i]);
	/* The environment usually follows argv: move it so that area can
	 * hold the title too. */
	for (n = 0; environ[n] != NULL; n++)
		;
	if (n > 0 && environ[0] == end + 1) {
		char	**newenv = calloc(n + 1, sizeof(*newenv));

		if (newenv != NULL) {
			for (i = 0; i < n; i++) {
				if (environ[i] == end + 1)
					end = environ[i] + strlen(environ[i]);
				newenv[i] = strdup(environ[i]);
			}
			environ = proc_environ = newenv;
		}
	}
	for (i = 1; i < argc; i++)
		argv[i] = NULL;
	proc_title_base = argv[0];
	proc_title_len = end - argv[0];
}

void
proc_set_title(const char *fmt, ...)
{
	char	 buf[256];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* comm stays "outboxd" so pidof, pkill and ps -C find every
	 * process; the role goes into the argv area that ps shows. */
	if (proc_title_base == NULL || proc_title_len < 2)
		return;
	memset(proc_title_base, 0, proc_title_len);
	strncpy(proc_title_base, buf, proc_title_len - 1);
}

/* A stop (how: PROC_STOP or PROC_STOP_MASTER, see proc_worker_signals()). */
static void
proc_stop(int how)
{
	if (how == PROC_STOP_MASTER) {
		if (proc_sig.by_master)
			return;
		proc_sig.by_master = 1;
	}
	if (proc_sig.deadline) {
		/* The master's word after a SIGTERM: the same stop, now
		 * known to be all of outboxd's. */
		if (how == PROC_STOP_MASTER)
			proc_sig.on_stop(proc_sig.arg, how);
		return;
	}
	proc_sig.deadline = 1;
	log_info(proc_sig.stopping ? "stop signal: finishing work in hand "
	    "within shutdown_timeout" : "stop signal: finishing work in hand");
	proc_sig.stopping = 1;
	proc_sig.on_stop(proc_sig.arg, how);
}

static void
proc_on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	(void)arg;
	if (sig == PROC_SIG_RETIRE) {
		/* A reload: drain with no deadline, as nothing will kill us
		 * unless a stop follows (then SIGUSR2, below). */
		if (proc_sig.stopping)
			return;
		proc_sig.stopping = 1;
		log_info("retired by a reload: finishing work in hand");
		proc_sig.on_stop(proc_sig.arg, 0);
		return;
	}
	switch (sig) {
	case SIGTERM:
		/* Only a second SIGTERM cuts the drain short: the master's
		 * SIGUSR2 and a SIGTERM sent to the whole process group
		 * (systemd's default KillMode=control-group) make one stop,
		 * whichever libevent hands over first (it goes by signal
		 * number, not by arrival). */
		if (proc_sig.terms++ > 0) {
			log_info("second stop signal: exiting now");
			_exit(0);
		}
		proc_stop(PROC_STOP);
		break;
	case SIGUSR2:			/* the master's word to drain */
		proc_stop(PROC_STOP_MASTER);
		break;
	case SIGQUIT:
		_exit(0);
	case SIGUSR1:
		if (log_reopen() == -1)
			log_warn("log file reopen");
		break;
	}
}

void
proc_worker_done(void)
{
	sigset_t	set;
	size_t		i;

	/* The loop is over: what is left is freeing and exiting.  A stop
	 * signal now (the master's SIGTERM after one sent to the whole
	 * process group, say) would kill the worker on the default action
	 * once freeing the event base has restored it, and the master
	 * would log a clean exit as "killed by signal 15".  Held, it dies
	 * with the process. */
	sigemptyset(&set);
	for (i = 0; i < PROC_NSIGS; i++)
		sigaddset(&set, proc_worker_sigs[i]);
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (i = 0; i < PROC_NSIGS; i++) {
		if (proc_sig.ev[i] != NULL)
			event_free(proc_sig.ev[i]);
		proc_sig.ev[i] = NULL;
	}
	log_limit_flush();
}

void
proc_worker_sigset(sigset_t *set)
{
	size_t	i;

	sigemptyset(set);
	for (i = 0; i + 1 < PROC_NSIGS; i++)
		sigaddset(set, proc_worker_sigs[i]);
	sigaddset(set, PROC_SIG_RETIRE);
	sigaddset(set, SIGHUP);
}

long
proc_give_up_ms(const struct conf *c)
{
	/* Half: the master kills at the whole. */
	return c->shutdown_timeout / 2;
}

int
proc_give_up_arm(struct event *ev, const struct conf *c)
{
	struct timeval	tv;

	if (evtimer_pending(ev, NULL))
		return 0;
	tv = clock_tv(proc_give_up_ms(c));
	evtimer_add(ev, &tv);
	return 1;
}

int
proc_worker_signals(struct event_base *base, void (*on_stop)(void *, int),
    void *arg)
{
	sigset_t	set;
	size_t		i;

	proc_worker_sigs[PROC_NSIGS - 1] = PROC_SIG_RETIRE;
	proc_sig.on_stop = on_stop;
	proc_sig.arg = arg;
	proc_sig.stopping = 0;
	proc_sig.deadline = 0;
	proc_sig.by_master = 0;
	proc_sig.terms = 0;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	for (i = 0; i < PROC_NSIGS; i++) {
		proc_sig.ev[i] = evsignal_new(base, proc_worker_sigs[i],
		    proc_on_signal, NULL);
		if (proc_sig.ev[i] == NULL ||
		    evsignal_add(proc_sig.ev[i], NULL) == -1)
			return -1;
	}
	/* Blocked since the fork (master_child()): what came meanwhile is
	 * handled now. */
	proc_worker_sigset(&set);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	return 0;
}
