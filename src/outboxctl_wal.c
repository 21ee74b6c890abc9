/*
 * outboxctl_wal.c - outboxctl wal-drop: drop the replication slot and the
 * publication of relay.mode = "wal" (relay.wal_slot,
 * relay.wal_publication).  outboxd never drops them itself: a slot
 * nobody reads keeps WAL on the server's disk, and this is the explicit
 * way to give wal mode up.  A slot a relay is streaming is refused.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <libpq-fe.h>

#include "outboxd.h"
#include "outboxctl.h"

int
ctl_wal_drop(struct conf *c, int argc, char **argv)
{
	const char	*p[1] = { c->relay.wal_slot };
	char		 err[1024], sql[256];
	PGresult	*res;
	PGconn		*conn;
	int		 dropped = 0, rv = CTL_EX_SERVICE;

	(void)argc;
	(void)argv;
	if ((conn = db_connect(c->database, "outboxctl", err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "outboxctl: cannot connect to PostgreSQL: %s\n",
		    err);
		return CTL_EX_SERVICE;
	}
	res = PQexecParams(conn, "SELECT active, coalesce(active_pid, 0) FROM "
	    "pg_replication_slots WHERE slot_name = $1", 1, NULL, p, NULL,
	    NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fprintf(stderr, "outboxctl: reading the slots: %s\n",
		    db_result_error(err, sizeof(err), res, conn));
		goto out;
	}
	if (PQntuples(res) > 0 && strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
		fprintf(stderr, "outboxctl: slot %s is being streamed (server "
		    "pid %s): stop outboxd, or set relay.mode = \"table\" and "
		    "reload it, first\n", c->relay.wal_slot,
		    PQgetvalue(res, 0, 1));
		rv = CTL_EX_NOTFOUND;
		goto out;
	}
	if (PQntuples(res) > 0) {
		PQclear(res);
		res = PQexecParams(conn, "SELECT pg_drop_replication_slot($1)",
		    1, NULL, p, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			fprintf(stderr, "outboxctl: dropping slot %s: %s\n",
			    c->relay.wal_slot, db_result_error(err,
			    sizeof(err), res, conn));
			goto out;
		}
		printf("dropped replication slot %s\n", c->relay.wal_slot);
		dropped++;
	} else
		printf("no replication slot %s\n", c->relay.wal_slot);
	PQclear(res);
	/* The name is [a-z0-9_] (conf_wal.c). */
	snprintf(sql, sizeof(sql), "SELECT 1 FROM pg_publication WHERE "
	    "pubname = '%s'", c->relay.wal_publication);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0) {
		PQclear(res);
		snprintf(sql, sizeof(sql), "DROP PUBLICATION %s",
		    c->relay.wal_publication);
		res = PQexec(conn, sql);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			fprintf(stderr, "outboxctl: dropping publication %s: "
			    "%s\n", c->relay.wal_publication,
			    db_result_error(err, sizeof(err), res, conn));
			goto out;
		}
		printf("dropped publication %s\n", c->relay.wal_publication);
		dropped++;
	} else if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		fprintf(stderr, "outboxctl: reading the publications: %s\n",
		    db_result_error(err, sizeof(err), res, conn));
		goto out;
	} else
		printf("no publication %s\n", c->relay.wal_publication);
	rv = dropped > 0 ? CTL_EX_FOUND : CTL_EX_NOTFOUND;
out:
	PQclear(res);
	PQfinish(conn);
	return rv;
}
