/*
 * test_webhook.c - the webhook sink's pure parts (sink_http.c): the
 * Standard Webhooks signature against the specification's reference
 * vector, raw and "whsec_" secrets (padded and not, long ones), bad
 * secrets, a body that is not NUL-terminated, and the HTTP status ->
 * outcome mapping.
 *
 * Expected values other than the reference vector were computed with
 * Python's hmac/hashlib/base64, an implementation independent of ours.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "outboxd.h"
#include "broker.h"

/* https://github.com/standard-webhooks/standard-webhooks (spec and the
 * reference libraries' tests) */
#define REF_SECRET	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define REF_ID		"msg_p5jXN8AQM9LWM0D4loKWxJek"
#define REF_TS		1614265330
#define REF_BODY	"{\"test\": 2432232314}"
#define REF_SIG		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static void
sign_ok(const char *secret, const char *id, int64_t ts, const char *body,
    size_t len, const char *want)
{
	char	out[WEBHOOK_SIG_LEN + 1];

	memset(out, 'X', sizeof(out));
	assert_int_equal(webhook_sign(secret, id, ts, body, len, out,
	    sizeof(out)), 0);
	assert_string_equal(out, want);
	assert_int_equal(strlen(out), WEBHOOK_SIG_LEN);
}

static void
test_reference_vector(void **state)
{
	(void)state;
	sign_ok(REF_SECRET, REF_ID, REF_TS, REF_BODY, strlen(REF_BODY),
	    REF_SIG);
}

/* The keyed MACs kept for a few secrets: more secrets than are kept, in
 * turn, twice, each time the same signature; the reference vector after
 * its secret was let go and made again; and the secret checks. */
static void
test_secrets_in_turn(void **state)
{
	char	secret[6][40], first[6][WEBHOOK_SIG_LEN + 1];
	char	out[WEBHOOK_SIG_LEN + 1];
	int	round, i;

	(void)state;
	for (i = 0; i < 6; i++)
		snprintf(secret[i], sizeof(secret[i]), "raw-secret-%d", i);
	for (round = 0; round < 2; round++)
		for (i = 0; i < 6; i++) {
			assert_int_equal(webhook_sign(secret[i], REF_ID, REF_TS,
			    REF_BODY, strlen(REF_BODY), out, sizeof(out)), 0);
			if (round == 0)
				memcpy(first[i], out, sizeof(out));
			else
				assert_string_equal(out, first[i]);
			assert_true(i == 0 || strcmp(first[i], first[i - 1]) !=
			    0);
		}
	sign_ok(REF_SECRET, REF_ID, REF_TS, REF_BODY, strlen(REF_BODY),
	    REF_SIG);
	assert_true(webhook_secret_ok(REF_SECRET));
	assert_true(webhook_secret_ok("plain"));
	assert_false(webhook_secret_ok(""));
	assert_false(webhook_secret_ok("whsec_"));
	assert_false(webhook_secret_ok("whsec_%%%"));
	assert_false(webhook_secret_ok(NULL));
}

static void
test_every_input_counts(void **state)
{
	char	out[WEBHOOK_SIG_LEN + 1];

	(void)state;
	/* A change in id, timestamp, body or key changes the signature. */
	assert_int_equal(webhook_sign(REF_SECRET, "msg_other", REF_TS,
	    REF_BODY, strlen(REF_BODY), out, sizeof(out)), 0);
	assert_string_not_equal(out, REF_SIG);
	assert_int_equal(webhook_sign(REF_SECRET, REF_ID, REF_TS + 1,
	    REF_BODY, strlen(REF_BODY), out, sizeof(out)), 0);
	assert_string_not_equal(out, REF_SIG);
	assert_int_equal(webhook_sign(REF_SECRET, REF_ID, REF_TS,
	    "{\"test\": 2432232315}", strlen(REF_BODY), out, sizeof(out)), 0);
	assert_string_not_equal(out, REF_SIG);
	assert_int_equal(webhook_sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx",
	    REF_ID, REF_TS, REF_BODY, strlen(REF_BODY), out, sizeof(out)), 0);
	assert_string_not_equal(out, REF_SIG);
}

static void
test_raw_secret(void **state)
{
	(void)state;
	/* No "whsec_" prefix: the secret's bytes are the key. */
	sign_ok("my-raw-secret", "42", 1700000000, "{\"orderId\":\"a\"}",
	    15, "v1,Q+J2zReP9ofl4+AFRRev6KJ3WuBjM5bh1MxIC4hE0/Q=");
	sign_ok("my-raw-secret", "42", 1700000000, "", 0,
	    "v1,iW34Ud8ueETwHpc87VC2a9B5N+giDunRLY4kW6DkRR4=");
	sign_ok("my-raw-secret", "42", 1700000000, NULL, 0,
	    "v1,iW34Ud8ueETwHpc87VC2a9B5N+giDunRLY4kW6DkRR4=");
}

static void
test_long_secrets(void **state)
{
	char	raw[301], b64[350], out[WEBHOOK_SIG_LEN + 1];

	(void)state;
	/* A raw key longer than the SHA-256 block (HMAC hashes it). */
	memset(raw, 'k', 300);
	raw[300] = '\0';
	sign_ok(raw, "9", 5, "{}", 2,
	    "v1,S6DjuY7vgf1Hc/yQ+Lu91FTkWRASV7887KjUm1we/jY=");
	/* A whsec_ key of 257 bytes is refused, not cut short. */
	memcpy(b64, "whsec_", 6);
	memset(b64 + 6, 'A', 344);
	b64[6 + 344 - 1] = '\0';	/* 343 characters: 257 bytes */
	assert_int_equal(webhook_sign(b64, "9", 5, "{}", 2, out,
	    sizeof(out)), -1);
}

static void
test_whsec_padding(void **state)
{
	static const char	want[] =
	    "v1,UhmlhRJP7ZZagkrGBvvwxAZVFm9ui4wNHIY5VWcvHFo=";

	(void)state;
	/* Key = bytes 0..15; with and without the base64 padding.  The
	 * key holds NUL bytes: it must not be treated as a string. */
	sign_ok("whsec_AAECAwQFBgcICQoLDA0ODw==", "7", 1, "x", 1, want);
	sign_ok("whsec_AAECAwQFBgcICQoLDA0ODw", "7", 1, "x", 1, want);
}

static void
test_body_is_len_bytes(void **state)
{
	static const char	buf[] = REF_BODY "TRAILING GARBAGE";

	(void)state;
	/* Exactly len bytes are signed, whatever follows them. */
	sign_ok(REF_SECRET, REF_ID, REF_TS, buf, strlen(REF_BODY), REF_SIG);
}

static void
test_bad_input(void **state)
{
	char	out[WEBHOOK_SIG_LEN + 1], small[WEBHOOK_SIG_LEN];

	(void)state;
	/* not base64 after whsec_ */
	assert_int_equal(webhook_sign("whsec_not*base64!", "1", 1, "x", 1,
	    out, sizeof(out)), -1);
	assert_int_equal(webhook_sign("whsec_MfKQ 9r8G", "1", 1, "x", 1,
	    out, sizeof(out)), -1);
	assert_int_equal(webhook_sign("whsec_Mf=Q9r8G", "1", 1, "x", 1,
	    out, sizeof(out)), -1);
	/* one base64 character left over (6 bits) cannot be a key */
	assert_int_equal(webhook_sign("whsec_MfKQ9", "1", 1, "x", 1,
	    out, sizeof(out)), -1);
	/* empty keys */
	assert_int_equal(webhook_sign("whsec_", "1", 1, "x", 1, out,
	    sizeof(out)), -1);
	assert_int_equal(webhook_sign("", "1", 1, "x", 1, out, sizeof(out)),
	    -1);
	assert_int_equal(webhook_sign(NULL, "1", 1, "x", 1, out, sizeof(out)),
	    -1);
	/* no room for the NUL */
	assert_int_equal(webhook_sign(REF_SECRET, REF_ID, REF_TS, REF_BODY,
	    strlen(REF_BODY), small, sizeof(small)), -1);
}

static void
test_outcome(void **state)
{
	(void)state;
	assert_int_equal(webhook_outcome(200), SINK_SENT);
	assert_int_equal(webhook_outcome(201), SINK_SENT);
	assert_int_equal(webhook_outcome(204), SINK_SENT);
	assert_int_equal(webhook_outcome(299), SINK_SENT);
	assert_int_equal(webhook_outcome(0), SINK_RETRY);
	assert_int_equal(webhook_outcome(408), SINK_RETRY);
	assert_int_equal(webhook_outcome(429), SINK_RETRY);
	assert_int_equal(webhook_outcome(500), SINK_RETRY);
	assert_int_equal(webhook_outcome(502), SINK_RETRY);
	assert_int_equal(webhook_outcome(503), SINK_RETRY);
	assert_int_equal(webhook_outcome(599), SINK_RETRY);
	assert_int_equal(webhook_outcome(301), SINK_REJECTED);
	assert_int_equal(webhook_outcome(307), SINK_REJECTED);
	assert_int_equal(webhook_outcome(400), SINK_REJECTED);
	assert_int_equal(webhook_outcome(401), SINK_REJECTED);
	assert_int_equal(webhook_outcome(404), SINK_REJECTED);
	assert_int_equal(webhook_outcome(409), SINK_REJECTED);
	assert_int_equal(webhook_outcome(413), SINK_REJECTED);
	assert_int_equal(webhook_outcome(199), SINK_REJECTED);
	assert_int_equal(webhook_outcome(600), SINK_REJECTED);
}

int
main(void)
{
	const struct CMUnitTest	tests[] = {
		cmocka_unit_test(test_reference_vector),
		cmocka_unit_test(test_every_input_counts),
		cmocka_unit_test(test_secrets_in_turn),
		cmocka_unit_test(test_raw_secret),
		cmocka_unit_test(test_long_secrets),
		cmocka_unit_test(test_whsec_padding),
		cmocka_unit_test(test_body_is_len_bytes),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_outcome),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
