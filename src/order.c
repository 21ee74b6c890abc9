/*
 * order.c - the order API's pure part: validating a POST /orders body,
 * checking an order id, and building the JSON the API answers with.  No
 * I/O, so every rule is unit-tested (tests/unit/test_order.c).
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "outboxd.h"

/* Stable error codes: clients match on these, so never rename one.  A
 * code may have more than one entry, each with its own message. */
static const struct order_error order_errors[] = {
	{ "malformed_json", "request body is not valid JSON" },
	{ "duplicate_member", "request body names a member twice in one "
	    "object" },
	{ "not_an_object", "request body must be a JSON object" },
	{ "customer_id_missing", "customerId is required" },
	{ "customer_id_not_string", "customerId must be a string" },
	{ "customer_id_empty", "customerId must not be empty" },
	{ "customer_id_empty", "customerId must not be blank (only white "
	    "space or invisible characters)" },
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
	ORDER_E_DUPLICATE,
	ORDER_E_NOT_OBJECT,
	ORDER_E_CID_MISSING,
	ORDER_E_CID_NOT_STRING,
	ORDER_E_CID_EMPTY,
	ORDER_E_CID_BLANK,
	ORDER_E_CID_TOO_LONG,
	ORDER_E_CID_INVALID,
	ORDER_E_AMT_MISSING,
	ORDER_E_AMT_NOT_NUMBER,
	ORDER_E_AMT_NOT_INTEGER,
	ORDER_E_AMT_NEGATIVE,
	ORDER_E_AMT_TOO_LARGE,
	ORDER_E_OK = -1
};

static int
order_fail(struct order_error *err, int which)
{
	if (err != NULL)
		*err = order_errors[which];
	return -1;
}

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, <= U+10FFFF.
 * PostgreSQL rejects anything else, which would turn a client's mistake
 * into a database error. */
int
order_utf8_valid(const unsigned char *s, size_t len)
{
	const unsigned char	*end = s + len;
	size_t			 n;

	while (s < end) {
		if (*s < 0x80)
			n = 1;
		else if ((n = json_utf8_len(s, end)) == 0)
			return 0;
		s += n;
	}
	return 1;
}

/*
 * What a person cannot see: Unicode White_Space and
 * Default_Ignorable_Code_Point (Unicode 15 PropList.txt and
 * DerivedCoreProperties.txt), such as U+00A0, U+2000-200A, U+3000, the
 * zero-width U+200B-200D, U+2060, U+FEFF, U+180E and U+00AD, the
 * direction marks and the variation selectors.  Sorted ranges.
 */
static const struct {
	unsigned int	lo, hi;
} order_blank_ranges[] = {
	{ 0x0009, 0x000d }, { 0x0020, 0x0020 }, { 0x0085, 0x0085 },
	{ 0x00a0, 0x00a0 }, { 0x00ad, 0x00ad }, { 0x034f, 0x034f },
	{ 0x061c, 0x061c }, { 0x115f, 0x1160 }, { 0x1680, 0x1680 },
	{ 0x17b4, 0x17b5 }, { 0x180b, 0x180f }, { 0x2000, 0x200f },
	{ 0x2028, 0x202f }, { 0x205f, 0x206f }, { 0x3000, 0x3000 },
	{ 0x3164, 0x3164 }, { 0xfe00, 0xfe0f }, { 0xfeff, 0xfeff },
	{ 0xffa0, 0xffa0 }, { 0xfff0, 0xfff8 }, { 0x1bca0, 0x1bca3 },
	{ 0x1d173, 0x1d17a }, { 0xe0000, 0xe0fff },
};

/* 1 if the len bytes at s (valid UTF-8) hold only such characters. */
static int
order_blank(const unsigned char *s, size_t len)
{
	size_t		i = 0, k;
	unsigned int	c;

	while (i < len) {
		c = s[i];
		if (c < 0x80)
			i += 1;
		else if (c < 0xe0) {
			c = (c & 0x1f) << 6 | (s[i + 1] & 0x3f);
			i += 2;
		} else if (c < 0xf0) {
			c = (c & 0x0f) << 12 | (s[i + 1] & 0x3f) << 6 |
			    (s[i + 2] & 0x3f);
			i += 3;
		} else {
			c = (c & 0x07) << 18 | (s[i + 1] & 0x3f) << 12 |
			    (s[i + 2] & 0x3f) << 6 | (s[i + 3] & 0x3f);
			i += 4;
		}
		for (k = 0; k < sizeof(order_blank_ranges) /
		    sizeof(order_blank_ranges[0]); k++)
			if (c <= order_blank_ranges[k].hi)
				break;
		if (k == sizeof(order_blank_ranges) /
		    sizeof(order_blank_ranges[0]) ||
		    c < order_blank_ranges[k].lo)
			return 0;
	}
	return 1;
}

/*
 * amountCents from its raw JSON number (tok, len bytes, already in RFC
 * 8259 number form), from its digits, never through a double: a double
 * rounds 4999.0000000000001 to 4999 and 1e-400 to 0, and would store
 * that.  An amount is an integer token, digits only: a fraction or an
 * exponent is refused even where its value is whole (4999.0, 1e3), so
 * that no reader of the same body can see another amount; a minus sign
 * is refused as negative (-0 too).  Sets *out and returns ORDER_E_OK, or
 * returns ORDER_E_AMT_NEGATIVE, ORDER_E_AMT_NOT_INTEGER or
 * ORDER_E_AMT_TOO_LARGE (more than 2^53 - 1, checked on the digits).
 */
static int
order_amount(const char *tok, size_t len, int64_t *out)
{
	uint64_t	v = 0;
	size_t		i;

	if (len > 0 && tok[0] == '-')
		return ORDER_E_AMT_NEGATIVE;
	for (i = 0; i < len; i++)
		if (tok[i] < '0' || tok[i] > '9')
			return ORDER_E_AMT_NOT_INTEGER;
	/* No leading zeros in JSON: 17 digits are more than 2^53 - 1. */
	if (len > 16)
		return ORDER_E_AMT_TOO_LARGE;
	for (i = 0; i < len; i++)
		v = v * 10 + (uint64_t)(tok[i] - '0');
	if (v > (uint64_t)ORDER_AMOUNT_MAX)
		return ORDER_E_AMT_TOO_LARGE;
	*out = (int64_t)v;
	return ORDER_E_OK;
}

/*
 * Validate a POST /orders body (len bytes at body, need not be
 * NUL-terminated): one JSON text in RFC 8259's grammar exactly (json.c;
 * \u0000 refused too), with no object naming a member twice, that is an
 * object with "customerId", a UTF-8 string of at most
 * ORDER_CUSTOMER_ID_MAX bytes that is not empty or blank, and
 * "amountCents", an integer 0..ORDER_AMOUNT_MAX taken exactly from its
 * digits (order_amount()).  Other members are ignored.  Fills *out (no
 * memory to free) and returns 0, or returns -1 with *err set to a static
 * code and message.
 */
int
order_parse(const char *body, size_t len, struct order_input *out,
    struct order_error *err)
{
	struct json_member	 want[] = {
		{ "customerId", NULL, 0 },
		{ "amountCents", NULL, 0 },
	};
	struct json_error	 jerr;
	cJSON			*root, *cid, *amt;
	size_t			 n;
	int64_t			 v = 0;
	int			 rv = -1, which;

	if ((root = json_parse(body, len, want, 2, &jerr)) == NULL) {
		/* bytes that are not UTF-8 inside the customerId string keep
		 * their own code */
		if (jerr.fault == JSON_E_UTF8 && jerr.member == 0)
			return order_fail(err, ORDER_E_CID_INVALID);
		which = jerr.fault == JSON_E_DUPLICATE ? ORDER_E_DUPLICATE :
		    ORDER_E_MALFORMED;
		order_fail(err, which);
		if (err != NULL && which == ORDER_E_MALFORMED)
			err->message = json_message(jerr.fault);
		return -1;
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
	if (order_blank((const unsigned char *)cid->valuestring, n)) {
		order_fail(err, ORDER_E_CID_BLANK);
		goto done;
	}

	amt = cJSON_GetObjectItemCaseSensitive(root, "amountCents");
	if (amt == NULL) {
		order_fail(err, ORDER_E_AMT_MISSING);
		goto done;
	}
	if (!cJSON_IsNumber(amt) || want[1].value == NULL) {
		order_fail(err, ORDER_E_AMT_NOT_NUMBER);
		goto done;
	}
	if ((which = order_amount(want[1].value, want[1].len, &v)) !=
	    ORDER_E_OK) {
		order_fail(err, which);
		goto done;
	}

	memcpy(out->customer_id, cid->valuestring, n + 1);
	out->customer_id_len = n;
	out->amount_cents = v;
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
