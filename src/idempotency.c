/*
 * idempotency.c - the pure part of POST /orders' Idempotency-Key: reading
 * the field's value and the fingerprint of the order it comes with.  No
 * I/O, so every rule is unit-tested (tests/unit/test_idempotency.c); the
 * statement that stores and finds keys is http_orders.c's.
 *
 * Source: draft-ietf-httpapi-idempotency-key-header-06, section 2 (the
 * field is an Item Structured Field whose value is a String), and RFC 8941
 * section 3.3.3 (sf-string) and 4.2.5 (parsing a String).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "outboxd.h"
#include "http.h"

/* RFC 9110 section 5.6.2 tchar, and the ':' and '/' of RFC 8941's
 * sf-token. */
static int
idempotency_token_char(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
	    (c >= 'a' && c <= 'z') || strchr("!#$%&'*+-.^_`|~:/", c) != NULL;
}

/*
 * The key in the field value v (NUL-terminated, as evhttp gives it) into
 * key (IDEMPOTENCY_KEY_MAX + 1 bytes, NUL-terminated), the value of the
 * quoted string unescaped, or the bare token as it is.  Leading and
 * trailing SP and HTAB are not part of it (RFC 9110 OWS, RFC 8941 4.2).
 * Nothing may follow the string: the draft defines no parameters, and a
 * list ("a", "b") is two keys.  Returns 0, or -1 with *why set to a
 * static message for the 400.
 */
int
idempotency_key_parse(const char *v, char *key, const char **why)
{
	const unsigned char	*p = (const unsigned char *)v, *end;
	size_t			 n = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	end = p + strlen((const char *)p);
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*why = "Idempotency-Key must be a quoted string of printable ASCII "
	    "characters (an RFC 8941 sf-string) or a bare token";
	if (p == end) {
		*why = "Idempotency-Key must not be empty";
		return -1;
	}
	if (*p != '"') {
		for (; p < end; p++) {
			if (!idempotency_token_char(*p))
				return -1;
			if (n == IDEMPOTENCY_KEY_MAX)
				goto too_long;
			key[n++] = (char)*p;
		}
		key[n] = '\0';
		return 0;
	}
	for (p++; p < end && *p != '"'; p++) {
		if (*p == '\\') {
			/* Only \" and \\ are escapes (RFC 8941 4.2.5). */
			if (++p == end || (*p != '"' && *p != '\\'))
				return -1;
		} else if (*p < 0x20 || *p > 0x7e)
			return -1;
		if (n == IDEMPOTENCY_KEY_MAX)
			goto too_long;
		key[n++] = (char)*p;
	}
	if (p == end || p + 1 != end)	/* unterminated, or more after it */
		return -1;
	if (n == 0) {
		*why = "Idempotency-Key must not be empty";
		return -1;
	}
	key[n] = '\0';
	return 0;
too_long:
	*why = "Idempotency-Key must be at most 255 characters";
	return -1;
}

/*
 * The fingerprint of an order: SHA-256 of its fields as parsed, so that
 * the same order sent again is recognised however the client wrote its
 * JSON (member order, white space, escapes, members outboxd ignores):
 * customerId's UTF-8 bytes, a NUL byte (customerId holds none), then
 * amountCents in decimal without leading zeros.  Written into out
 * (IDEMPOTENCY_FP_LEN + 1 bytes) as PostgreSQL's bytea hex input,
 * "\x" and 64 lowercase hex digits.  Returns 0, or -1 if libcrypto fails.
 * Source: FIPS 180-4 through OpenSSL EVP_Digest(); PostgreSQL manual
 * 8.4.1 (bytea hex format).
 */
int
idempotency_fingerprint(const struct order_input *in, char *out)
{
	unsigned char	 buf[ORDER_CUSTOMER_ID_MAX + 1 + 24];
	unsigned char	 md[EVP_MAX_MD_SIZE];
	unsigned int	 mdlen, i;
	int		 n;

	memcpy(buf, in->customer_id, in->customer_id_len);
	buf[in->customer_id_len] = '\0';
	n = snprintf((char *)buf + in->customer_id_len + 1, 24, "%lld",
	    (long long)in->amount_cents);
	if (n < 0 || n >= 24 ||
	    EVP_Digest(buf, in->customer_id_len + 1 + (size_t)n, md, &mdlen,
	    EVP_sha256(), NULL) != 1 || mdlen != 32)
		return -1;
	out[0] = '\\';
	out[1] = 'x';
	for (i = 0; i < mdlen; i++)
		snprintf(out + 2 + 2 * i, 3, "%02x", md[i]);
	return 0;
}
