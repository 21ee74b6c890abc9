/*
 * creds_process.c - credential_process (AWS SDKs and Tools Reference
 * Guide, "Process credential provider"): run the profile's command and
 * read its standard output, a JSON object with Version 1, AccessKeyId,
 * SecretAccessKey, SessionToken and Expiration (ISO 8601; absent: never
 * expires), through the worker's event loop, never waiting for it.
 *
 * The command runs under /bin/sh -c, with standard input and error on
 * /dev/null: its error output may quote secrets, so none of it reaches
 * our log; a failure is told by its exit status.  One run at a time.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "outboxd.h"
#include "creds.h"

#define CREDS_PROCESS_MAX	(64 * 1024)	/* bytes of output */
#define CREDS_PROCESS_REAP	20		/* ms between waitpid tries */

static struct {
	pid_t		 pid;
	int		 fd;
	int		 eof;
	struct event	*ev;
	struct event	*timer;		/* the deadline */
	struct event	*reap;
	char		*buf;
	size_t		 len;
	creds_done_cb	*done;
} cp = { .pid = -1, .fd = -1 };

static void
creds_process_clear(int kill_it)
{
	int	st;

	if (cp.ev != NULL)
		event_free(cp.ev);
	if (cp.timer != NULL)
		event_free(cp.timer);
	if (cp.reap != NULL)
		event_free(cp.reap);
	if (cp.fd != -1)
		close(cp.fd);
	if (cp.pid > 0 && kill_it) {
		/* The command's children too (its process group), or a
		 * "sh -c" killed would leave them to run on. */
		if (kill(-cp.pid, SIGKILL) == -1)
			kill(cp.pid, SIGKILL);
		while (waitpid(cp.pid, &st, 0) == -1 && errno == EINTR)
			;
	}
	if (cp.buf != NULL) {
		explicit_bzero(cp.buf, cp.len);
		free(cp.buf);
	}
	memset(&cp, 0, sizeof cp);
	cp.pid = -1;
	cp.fd = -1;
}

static void
creds_process_fail(const char *what, const char *arg)
{
	creds_done_cb	*done = cp.done;
	char		 err[256];

	snprintf(err, sizeof err, "credential_process %s%s", what, arg);
	creds_process_clear(1);
	done(NULL, err);
}

/* The child is gone and its output read: its answer. */
static void
creds_process_end(int status)
{
	creds_done_cb	*done = cp.done;
	char		 err[128];
	char		*buf = cp.buf;
	size_t		 len = cp.len;

	cp.pid = -1;
	cp.buf = NULL;
	creds_process_clear(0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, sizeof err, "credential_process %s %d",
		    WIFEXITED(status) ? "exited with status" :
		    "was killed by signal", WIFEXITED(status) ?
		    WEXITSTATUS(status) : WTERMSIG(status));
		done(NULL, err);
	} else
		creds_json_done(buf != NULL ? buf : "", len,
		    "credential_process", done);
	if (buf != NULL) {
		explicit_bzero(buf, len);
		free(buf);
	}
}

static void
creds_process_reap(evutil_socket_t fd, short what, void *arg)
{
	struct timeval	tv = clock_tv(CREDS_PROCESS_REAP);
	int		st;
	pid_t		r;

	(void)fd;
	(void)what;
	(void)arg;
	while ((r = waitpid(cp.pid, &st, WNOHANG)) == -1 && errno == EINTR)
		;
	if (r == cp.pid) {
		creds_process_end(st);
		return;
	}
	if (r == -1) {
		creds_process_fail("waitpid: ",
		    strerror(errno));
		return;
	}
	/* Output closed, still running: the deadline bounds the wait. */
	evtimer_add(cp.reap, &tv);
}

static void
creds_process_read(evutil_socket_t fd, short what, void *arg)
{
	char	*p;
	ssize_t	 n;

	(void)what;
	(void)arg;
	if (cp.len + 4096 + 1 > CREDS_PROCESS_MAX) {
		creds_process_fail("wrote more bytes than ",
		    "65536");
		return;
	}
	if ((p = realloc(cp.buf, cp.len + 4096 + 1)) == NULL) {
		creds_process_fail("", ": out of memory");
		return;
	}
	cp.buf = p;
	if ((n = read(fd, cp.buf + cp.len, 4096)) == -1) {
		if (errno == EINTR || errno == EAGAIN)
			return;
		creds_process_fail("read: ",
		    strerror(errno));
		return;
	}
	cp.len += (size_t)n;
	cp.buf[cp.len] = '\0';
	if (n == 0) {
		event_del(cp.ev);
		close(cp.fd);
		cp.fd = -1;
		creds_process_reap(-1, 0, NULL);
	}
}

static void
creds_process_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	creds_process_fail("did not finish within (ms) ",
	    (const char *)arg);
}

int
creds_process_fetch(struct event_base *base, const char *command,
    long timeout, creds_done_cb *done)
{
	static char	 tmo[24];
	struct timeval	 tv = clock_tv(timeout);
	sigset_t	 all;
	int		 fds[2], nul, fd, max;

	if (cp.pid > 0)
		return (-1);
	snprintf(tmo, sizeof tmo, "%ld", timeout);
	if (pipe2(fds, O_CLOEXEC) == -1) {
		log_warn("credential_process: pipe");
		return (-1);
	}
	switch (cp.pid = fork()) {
	case -1:
		log_warn("credential_process: fork");
		close(fds[0]);
		close(fds[1]);
		cp.pid = -1;
		return (-1);
	case 0:
		/* A group of its own, so that a hung command goes with all it
		 * started (creds_process_end()'s kill of the group). */
		(void)setpgid(0, 0);
		/* The worker's blocked signals and handlers are its own. */
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		if ((nul = open("/dev/null", O_RDWR)) == -1 ||
		    dup2(nul, 0) == -1 || dup2(fds[1], 1) == -1 ||
		    dup2(nul, 2) == -1)
			_exit(126);
		max = (int)sysconf(_SC_OPEN_MAX);
		if (max < 0 || max > 65536)
			max = 65536;
		for (fd = 3; fd < max; fd++)
			close(fd);
		execl("/bin/sh", "sh", "-c", command, (char *)NULL);
		_exit(127);
	}
	(void)setpgid(cp.pid, cp.pid);	/* before any kill of the group */
	close(fds[1]);
	cp.fd = fds[0];
	cp.done = done;
	if (fcntl(cp.fd, F_SETFL, O_NONBLOCK) == -1 ||
	    (cp.ev = event_new(base, cp.fd, EV_READ | EV_PERSIST,
	    creds_process_read, NULL)) == NULL ||
	    (cp.timer = evtimer_new(base, creds_process_deadline, tmo)) ==
	    NULL || (cp.reap = evtimer_new(base, creds_process_reap, NULL)) ==
	    NULL || event_add(cp.ev, NULL) == -1 ||
	    evtimer_add(cp.timer, &tv) == -1) {
		log_warnx("credential_process: cannot watch its output");
		creds_process_clear(1);
		return (-1);
	}
	return (0);
}

void
creds_process_abort(void)
{
	if (cp.pid > 0 || cp.fd != -1)
		creds_process_clear(1);
}
