/*
 * claim.c - the claim on an outbox row, below both workers that take
 * one: the claim token, and giving claimed rows back unpublished.
 *
 * A relay's claim (outbox_claim() in sql/schema.sql) and an HTTP worker's
 * order written already claimed for relay 1 (handoff.c) set the same two
 * columns: claim, a random token, and available_at, pushed out by the
 * lease.  Every later change to the row is guarded by the token its
 * holder took (WHERE claim = token), so a holder whose lease ran out can
 * never undo what the row's next holder did.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "outboxd.h"

/* id = ANY: an index condition whatever the statistics say (see
 * relay_mark_sql in relay_claim.c). */
const char claim_give_back_sql[] =
	"UPDATE outbox o SET claim = NULL, available_at = now() "
	"FROM unnest($1::bigint[], $2::bigint[]) AS d(id, claim) "
	"WHERE o.id = ANY ($1::bigint[]) AND o.id = d.id "
	"AND o.claim = d.claim";

int64_t
claim_token(void)
{
	/* Unique enough per claim; only compared for equality. */
	return (((int64_t)random() << 31) ^ random() ^
	    ((int64_t)time(NULL) << 20)) & INT64_MAX;
}
