/*
 * test_handoff.c - handoff.c's framing over a real socket pair: a row
 * sent is the row received (strings not NUL-terminated, an empty key, a
 * payload with NUL bytes), rows keep their boundaries and order, an empty
 * socket says so, a row larger than HANDOFF_MAX is refused with EMSGSIZE
 * before anything is sent, a receive buffer too small for a row skips it
 * with EMSGSIZE, and the kept ends decide who may send and receive.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "outboxd.h"

static struct claimed_row
row_make(int64_t id, const char *type, const char *key, const char *payload,
    size_t payload_len)
{
	struct claimed_row	r;

	memset(&r, 0, sizeof(r));
	r.claim = INT64_MAX - id;
	r.claimed_us = 123456789012LL + id;
	r.id = id;
	r.created_ms = 1796040000000LL + id;
	r.lease_ms = 30000;
	r.type = type;
	r.type_len = strlen(type);
	r.key = key;
	r.key_len = strlen(key);
	r.payload = payload;
	r.payload_len = payload_len;
	return r;
}

static void
row_equal(const struct claimed_row *a, const struct claimed_row *b)
{
	assert_int_equal(a->claim, b->claim);
	assert_int_equal(a->claimed_us, b->claimed_us);
	assert_int_equal(a->id, b->id);
	assert_int_equal(a->created_ms, b->created_ms);
	assert_int_equal(a->lease_ms, b->lease_ms);
	assert_int_equal(a->type_len, b->type_len);
	assert_memory_equal(a->type, b->type, a->type_len);
	assert_int_equal(a->key_len, b->key_len);
	if (a->key_len > 0)
		assert_memory_equal(a->key, b->key, a->key_len);
	assert_int_equal(a->payload_len, b->payload_len);
	assert_memory_equal(a->payload, b->payload, a->payload_len);
}

static int
setup(void **state)
{
	(void)state;
	return handoff_open();
}

static int
teardown(void **state)
{
	(void)state;
	handoff_close();
	return 0;
}

static void
test_round_trip(void **state)
{
	static char		 buf[HANDOFF_MAX];
	static const char	 bin[] = "{\"a\":\"\0x\"}";
	struct claimed_row	 a, b, got;

	(void)state;
	a = row_make(1, "order.created", "8f14e45f-ceea-467f-a0e6-0d2a1b2c3d4e",
	    "{\"orderId\":1}", 13);
	b = row_make(2, "t", "", bin, sizeof(bin) - 1);
	assert_int_equal(handoff_send(&a), 0);
	assert_int_equal(handoff_send(&b), 0);
	assert_int_equal(handoff_recv(&got, buf, sizeof(buf)), 1);
	row_equal(&a, &got);
	assert_int_equal(handoff_recv(&got, buf, sizeof(buf)), 1);
	row_equal(&b, &got);
	assert_int_equal(handoff_recv(&got, buf, sizeof(buf)), 0);
}

static void
test_too_large(void **state)
{
	static char		 buf[HANDOFF_MAX];
	struct claimed_row	 r, got;
	char			*big;

	(void)state;
	assert_non_null(big = malloc(HANDOFF_MAX));
	memset(big, 'x', HANDOFF_MAX);
	r = row_make(3, "order.created", "k", big, HANDOFF_MAX);
	errno = 0;
	assert_int_equal(handoff_send(&r), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(handoff_recv(&got, buf, sizeof(buf)), 0);

	/* The largest that fits goes through whole. */
	r.payload_len = HANDOFF_MAX - 200;
	assert_int_equal(handoff_send(&r), 0);
	assert_int_equal(handoff_recv(&got, buf, sizeof(buf)), 1);
	row_equal(&r, &got);
	free(big);
}

static void
test_short_buffer(void **state)
{
	static char		 buf[HANDOFF_MAX];
	struct claimed_row	 r, got;

	(void)state;
	r = row_make(4, "order.created", "k", "{\"orderId\":4}", 13);
	assert_int_equal(handoff_send(&r), 0);
	assert_int_equal(handoff_send(&r), 0);
	/* Too small for the row: it is consumed and reported, the next one
	 * still arrives whole. */
	errno = 0;
	assert_int_equal(handoff_recv(&got, buf, 40), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(handoff_recv(&got, buf, sizeof(buf)), 1);
	row_equal(&r, &got);
}

static void
test_ends(void **state)
{
	struct claimed_row	r;

	(void)state;
	r = row_make(5, "t", "k", "{}", 2);
	assert_true(handoff_can_send());
	assert_true(handoff_fd() != -1);
	handoff_keep(HANDOFF_RECEIVER);
	assert_false(handoff_can_send());
	assert_true(handoff_fd() != -1);
	errno = 0;
	assert_int_equal(handoff_send(&r), -1);
	assert_int_equal(errno, EBADF);
	handoff_keep(HANDOFF_NONE);
	assert_int_equal(handoff_fd(), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_too_large, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_short_buffer, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_ends, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
