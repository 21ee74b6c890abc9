/*
 * outboxctl.h - shared by outboxctl.c (main, fulfillment) and
 * outboxctl_ops.c (the outbox commands): exit codes and the commands.
 */
#ifndef OUTBOXCTL_H
#define OUTBOXCTL_H

struct conf;

/* Exit status (man/outboxctl.8); 78 is OUTBOXD_EX_CONFIG. */
#define CTL_EX_FOUND		0	/* done, found */
#define CTL_EX_NOTFOUND		1	/* nothing found or nothing done */
#define CTL_EX_USAGE		2
#define CTL_EX_SERVICE		3	/* database, AWS or transport error */
#define CTL_EX_AWS		CTL_EX_SERVICE

/* Each takes the operands after its name; returns the exit status. */
int	ctl_status(struct conf *, int, char **);
int	ctl_failed(struct conf *, int, char **);
int	ctl_redrive(struct conf *, int, char **);
int	ctl_pause(struct conf *, int, char **);
int	ctl_resume(struct conf *, int, char **);
int	ctl_replay(struct conf *, int, char **);
int	ctl_replays(struct conf *, int, char **);
/* outboxctl_wal.c */
int	ctl_wal_drop(struct conf *, int, char **);

#endif /* OUTBOXCTL_H */
