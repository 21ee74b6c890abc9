/*
 * order.c - the order API's pure part: validating a POST /orders body,
 * checking an order id, and building the JSON the API answers with.  No
 * I/O, so every rule is unit-tested (tests/unit/test_order.c).
 */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "outboxd.h"

/* Stable error codes: clients match on these, so never rename one. */
static const struct order_error order_errors[] = {
	{ "malformed_json", "request body is not valid JSON" },
	{ "not_an_object", "request body must be a JSON object" },
	{ "customer_id_missing", "customerId is required" },
	{ "customer_id_not_string", "customerId must be a string" },
	{ "customer_id_empty", "customerId must not be empty" },
	{ "customer_id_too_long", "customerId must be at most 256 bytes" },
	{ "customer_id_invalid", "customerId must be valid UTF-8 without "
	    "NUL characters" },
	{ "amount_cents_missing", "amountCents is required" },
	{ "amount_cents_not_number", "amountCents must be a number" },
	{ "amount_cents_not_integer", "amountCents must be an integer" },
	{ "amount_cents_negative", "amountCents must not be negative" },
	{ "amount_cents_too_large", "amountCents must be at most "
	    "9007199254740991" },
};

enum {
	ORDER_E_MALFORMED,
	ORDER_E_NOT_OBJECT,
	ORDER_E_CID_MISSING,
	ORDER_E_CID_NOT_STRING,
	ORDER_E_CID_EMPTY,
	ORDER_E_CID_TOO_LONG,
	ORDER_E_CID_INVALID,
	ORDER_E_AMT_MISSING,
	ORDER_E_AMT_NOT_NUMBER,
	ORDER_E_AMT_NOT_INTEGER,
	ORDER_E_AMT_NEGATIVE,
	ORDER_E_AMT_TOO_LARGE
};

static int
order_fail(struct order_error *err, int which)
{
	if (err != NULL)
		*err = order_errors[which];
	return -1;
}

/*
 * cJSON turns "\u0000" and a raw NUL byte into a NUL inside the decoded
 * string, silently cutting it short; PostgreSQL text cannot hold NUL
 * either.  Find both in the raw body.  Outside strings a backslash is
 * invalid JSON anyway, so pairing escapes from the start is exact for
 * every body cJSON accepts.
 */
static int
order_has_nul(const char *p, size_t len)
{
	size_t	i;

	if (memchr(p, '\0', len) != NULL)
		return 1;
	for (i = 0; i < len; i++) {
		if (p[i] != '\\')
			continue;
		if (i + 5 < len && p[i + 1] == 'u' && p[i + 2] == '0' &&
		    p[i + 3] == '0' && p[i + 4] == '0' && p[i + 5] == '0')
			return 1;
		i++;	/* skip the escaped character */
	}
	return 0;
}

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, <= U+10FFFF.
 * PostgreSQL rejects anything else, which would turn a client's mistake
 * into a database error. */
int
order_utf8_valid(const unsigned char *s, size_t len)
{
	size_t		i = 0, n, k;
	unsigned int	c, min;

	while (i < len) {
		c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			c &= 0x1f;
			min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			c &= 0x0f;
			min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			c &= 0x07;
			min = 0x10000;
		} else
			return 0;
		if (len - i <= n)
			return 0;
		for (k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			c = (c << 6) | (s[i + k] & 0x3f);
		}
		if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return 0;
		i += n + 1;
	}
	return 1;
}

/*
 * Validate a POST /orders body (len bytes at body, need not be
 * NUL-terminated): a JSON object with "customerId", a non-empty UTF-8
 * string of at most ORDER_CUSTOMER_ID_MAX bytes, and "amountCents", an
 * integer 0..ORDER_AMOUNT_MAX.  Other members are ignored; a repeated
 * member counts once (the first).  Numbers are IEEE 754 doubles as RFC 8259
 * section 6 and JavaScript have them, so 4999.0 is the integer 4999 and
 * 2^53 itself is rejected.  Fills *out (no memory to free) and returns 0,
 * or returns -1 with *err set to a static code and message.
 */
int
order_parse(const char *body, size_t len, struct order_input *out,
    struct order_error *err)
{
	cJSON		*root, *cid, *amt;
	const char	*end;
	size_t		 n;
	double		 d;
	int		 rv = -1;

	if (body == NULL || order_has_nul(body, len))
		return order_fail(err, ORDER_E_MALFORMED);
	root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
	if (root == NULL)
		return order_fail(err, ORDER_E_MALFORMED);
	/* cJSON stops after the first value: anything but whitespace after
	 * it makes the body malformed. */
	while (end < body + len && (*end == ' ' || *end == '\t' ||
	    *end == '\n' || *end == '\r'))
		end++;
	if (end != body + len) {
		order_fail(err, ORDER_E_MALFORMED);
		goto done;
	}
	if (!cJSON_IsObject(root)) {
		order_fail(err, ORDER_E_NOT_OBJECT);
		goto done;
	}

	cid = cJSON_GetObjectItemCaseSensitive(root, "customerId");
	if (cid == NULL) {
		order_fail(err, ORDER_E_CID_MISSING);
		goto done;
	}
	if (!cJSON_IsString(cid) || cid->valuestring == NULL) {
		order_fail(err, ORDER_E_CID_NOT_STRING);
		goto done;
	}
	n = strlen(cid->valuestring);
	if (n == 0) {
		order_fail(err, ORDER_E_CID_EMPTY);
		goto done;
	}
	if (n > ORDER_CUSTOMER_ID_MAX) {
		order_fail(err, ORDER_E_CID_TOO_LONG);
		goto done;
	}
	if (!order_utf8_valid((const unsigned char *)cid->valuestring, n)) {
		order_fail(err, ORDER_E_CID_INVALID);
		goto done;
	}

	amt = cJSON_GetObjectItemCaseSensitive(root, "amountCents");
	if (amt == NULL) {
		order_fail(err, ORDER_E_AMT_MISSING);
		goto done;
	}
	if (!cJSON_IsNumber(amt)) {
		order_fail(err, ORDER_E_AMT_NOT_NUMBER);
		goto done;
	}
	d = amt->valuedouble;
	/* Beyond 2^53 every double is an integer; below, the cast is exact
	 * only for integers (and needs no libm). */
	if (isnan(d) || (fabs(d) < 9007199254740992.0 &&
	    d != (double)(int64_t)d)) {
		order_fail(err, ORDER_E_AMT_NOT_INTEGER);
		goto done;
	}
	if (d < 0) {
		order_fail(err, ORDER_E_AMT_NEGATIVE);
		goto done;
	}
	if (d > (double)ORDER_AMOUNT_MAX) {
		order_fail(err, ORDER_E_AMT_TOO_LARGE);
		goto done;
	}

	memcpy(out->customer_id, cid->valuestring, n + 1);
	out->customer_id_len = n;
	out->amount_cents = (int64_t)d;
	rv = 0;
done:
	cJSON_Delete(root);
	return rv;
}

/*
 * 1 if the len bytes at s are an order id in canonical UUID form
 * (8-4-4-4-12 hexadecimal digits, either case, RFC 9562 section 4), else 0.
 * Anything else cannot name an order, so the API answers 404 without
 * asking the database.
 */
int
order_uuid_valid(const char *s, size_t len)
{
	size_t	i;

	if (s == NULL || len != ORDER_UUID_LEN)
		return 0;
	for (i = 0; i < len; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f') ||
		    (s[i] >= 'A' && s[i] <= 'F')))
			return 0;
	}
	return 1;
}

/*
 * The body of every 4xx/5xx answer: {"error": code, "message": message}.
 * Returns a NUL-terminated string the caller frees with free(), or NULL
 * when out of memory.
 */
char *
order_error_json(const char *code, const char *message)
{
	return order_error_json_detail(code, message, NULL, NULL);
}

/*
 * The same with the server's "detail" and "hint" members when they are
 * not NULL (PostgreSQL's DETAIL and HINT of a refused order, the members
 * PostgREST names the same way).
 */
char *
order_error_json_detail(const char *code, const char *message,
    const char *detail, const char *hint)
{
	cJSON	*o;
	char	*s = NULL;

	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	if (cJSON_AddStringToObject(o, "error", code) != NULL &&
	    cJSON_AddStringToObject(o, "message", message) != NULL &&
	    (detail == NULL ||
	    cJSON_AddStringToObject(o, "detail", detail) != NULL) &&
	    (hint == NULL || cJSON_AddStringToObject(o, "hint", hint) != NULL))
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

/*
 * The order as the API shows it, {"id", "customer_id", "amount_cents",
 * "created_at"}, from the text columns of an orders row; amount_cents
 * (decimal text of a bigint) becomes a JSON number written digit for
 * digit, never in exponent form.  Writes a NUL-terminated string into buf
 * (size bytes; ORDER_JSON_MAX always suffices) and returns its length, or
 * -1 if amount_cents is not an integer or buf is too small.
 */
int
order_json(char *buf, size_t size, const char *id, const char *customer_id,
    const char *amount_cents, const char *created_at)
{
	cJSON		*o;
	char		 num[24], *end;
	long long	 v;
	int		 rv = -1;

	if (amount_cents == NULL || *amount_cents == '\0' || size > INT_MAX)
		return -1;
	v = strtoll(amount_cents, &end, 10);
	if (*end != '\0')
		return -1;
	snprintf(num, sizeof(num), "%lld", v);
	if ((o = cJSON_CreateObject()) == NULL)
		return -1;
	if (cJSON_AddStringToObject(o, "id", id) != NULL &&
	    cJSON_AddStringToObject(o, "customer_id", customer_id) != NULL &&
	    cJSON_AddRawToObject(o, "amount_cents", num) != NULL &&
	    cJSON_AddStringToObject(o, "created_at", created_at) != NULL &&
	    cJSON_PrintPreallocated(o, buf, (int)size, 0))
		rv = (int)strlen(buf);
	cJSON_Delete(o);
	return rv;
}
