/*
 * test_idempotency.c - the Idempotency-Key field value (src/idempotency.c):
 * quoted sf-strings and bare tokens accepted, everything else refused
 * with its own message, the length limit exact; the fingerprint is the
 * documented SHA-256 of the parsed fields.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "outboxd.h"
#include "http.h"

static const char *const msg_empty = "Idempotency-Key must not be empty";
static const char *const msg_long = "Idempotency-Key must be at most 255 "
    "characters";
static const char *const msg_syntax = "Idempotency-Key must be a quoted "
    "string of printable ASCII characters (an RFC 8941 sf-string) or a "
    "bare token";

static void
expect_key(const char *v, const char *want)
{
	char		 key[IDEMPOTENCY_KEY_MAX + 1];
	const char	*why = NULL;

	memset(key, 0xa5, sizeof(key));
	if (idempotency_key_parse(v, key, &why) != 0)
		fail_msg("refused [%s]: %s", v, why);
	assert_string_equal(key, want);
}

static void
expect_refused(const char *v, const char *msg)
{
	char		 key[IDEMPOTENCY_KEY_MAX + 1];
	const char	*why = NULL;

	if (idempotency_key_parse(v, key, &why) != -1)
		fail_msg("accepted [%s]", v);
	assert_non_null(why);
	assert_string_equal(why, msg);
}

static void
test_quoted(void **state)
{
	(void)state;
	expect_key("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
	    "8e03978e-40d5-43e8-bc93-6894a57f9324");
	expect_key("  \"a b\"\t", "a b");
	expect_key("\"a\\\"b\\\\c\"", "a\"b\\c");
	expect_key("\" !#~\"", " !#~");
	expect_key("\"a,b;c=d\"", "a,b;c=d");
}

static void
test_bare(void **state)
{
	(void)state;
	expect_key("8e03978e-40d5-43e8-bc93-6894a57f9324",
	    "8e03978e-40d5-43e8-bc93-6894a57f9324");
	expect_key(" key_1.2:3/4+5 ", "key_1.2:3/4+5");
	expect_key("*", "*");
}

static void
test_refused(void **state)
{
	(void)state;
	expect_refused("", msg_empty);
	expect_refused(" \t ", msg_empty);
	expect_refused("\"\"", msg_empty);
	expect_refused("\"abc", msg_syntax);		/* unterminated */
	expect_refused("\"abc\\\"", msg_syntax);	/* escaped end */
	expect_refused("\"a\\qb\"", msg_syntax);	/* not an escape */
	expect_refused("\"a\tb\"", msg_syntax);	/* control character */
	expect_refused("\"\xc3\xa9\"", msg_syntax);	/* not ASCII */
	expect_refused("\"a\x7f\"", msg_syntax);
	expect_refused("\"a\";p=1", msg_syntax);	/* parameters */
	expect_refused("\"a\", \"b\"", msg_syntax);	/* a list */
	expect_refused("\"a\" x", msg_syntax);
	expect_refused("a b", msg_syntax);		/* bare: not a token */
	expect_refused("a\"b", msg_syntax);
	expect_refused("a=b", msg_syntax);
	expect_refused("\xc3\xa9", msg_syntax);
	expect_refused("a,b", msg_syntax);
}

static void
test_length(void **state)
{
	char	v[IDEMPOTENCY_KEY_MAX + 8], want[IDEMPOTENCY_KEY_MAX + 2];

	(void)state;
	memset(want, 'k', IDEMPOTENCY_KEY_MAX);
	want[IDEMPOTENCY_KEY_MAX] = '\0';
	expect_key(want, want);
	snprintf(v, sizeof(v), "\"%s\"", want);
	expect_key(v, want);
	/* Escapes count once: 254 characters and one escaped quote. */
	snprintf(v, sizeof(v), "\"%.*s\\\"\"", IDEMPOTENCY_KEY_MAX - 1, want);
	want[IDEMPOTENCY_KEY_MAX - 1] = '"';
	expect_key(v, want);
	memset(want, 'k', IDEMPOTENCY_KEY_MAX + 1);
	want[IDEMPOTENCY_KEY_MAX + 1] = '\0';
	expect_refused(want, msg_long);
	snprintf(v, sizeof(v), "\"%s\"", want);
	expect_refused(v, msg_long);
}

/* The documented fingerprint: SHA-256 of customerId, NUL, amountCents
 * (printf 'c1\0004999' | sha256sum). */
static void
test_fingerprint(void **state)
{
	struct order_input	in;
	char			fp[IDEMPOTENCY_FP_LEN + 1], fp2[sizeof(fp)];

	(void)state;
	memset(&in, 0, sizeof(in));
	strcpy(in.customer_id, "c1");
	in.customer_id_len = 2;
	in.amount_cents = 4999;
	assert_int_equal(idempotency_fingerprint(&in, fp), 0);
	assert_int_equal(strlen(fp), IDEMPOTENCY_FP_LEN);
	assert_string_equal(fp, "\\x"
	    "9d7403865c5ad0d86e3026d97534e0cee65ed1ad2a94359616c40ba2f5f6bd35");
	/* Another amount, or the NUL moved ("c14" and 999), differs. */
	in.amount_cents = 4998;
	assert_int_equal(idempotency_fingerprint(&in, fp2), 0);
	assert_string_not_equal(fp, fp2);
	strcpy(in.customer_id, "c14");
	in.customer_id_len = 3;
	in.amount_cents = 999;
	assert_int_equal(idempotency_fingerprint(&in, fp2), 0);
	assert_string_not_equal(fp, fp2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quoted),
		cmocka_unit_test(test_bare),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_length),
		cmocka_unit_test(test_fingerprint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
