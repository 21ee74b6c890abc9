/*
 * fuzz_webhook.c - libFuzzer target for the webhook signing input:
 * src/sink_http.c's webhook_sign() with a secret (raw, or "whsec_" and
 * base64), an id, a timestamp and a body cut from the input.  It must
 * sign exactly when the key is usable (a raw secret that is not empty;
 * after "whsec_", base64 of 1 to 256 bytes, padding optional), and then
 * write "v1," and the 44 base64 characters of the HMAC-SHA256 that is
 * computed here again with OpenSSL from an independent decoding of the
 * key; it refuses an output buffer too small.  Built and run by
 * `make fuzz` (FUZZ_SECONDS); by hand, from the top of a configured tree
 * (config.h there):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc tests/fuzz/fuzz_webhook.c src/sink_http.c src/log.c src/clock.c -lcrypto -levent -lcurl -o fuzz_webhook && mkdir -p /tmp/fuzz-webhook && ./fuzz_webhook -max_total_time=300 /tmp/fuzz-webhook tests/fuzz/corpus/webhook
 *
 * Input: byte 0 bit 0 puts "whsec_" before the secret; bytes 1-8 are the
 * timestamp (host order, any value); the rest is secret NUL id NUL body
 * (the body may hold NUL bytes; a missing part is empty).
 * The httpc and metrics functions sink_http.c's publishing calls are
 * stubs: that path needs a loop and is not what is fuzzed here.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "outboxd.h"
#include "broker.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)
#define B64		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" \
			"0123456789+/"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
httpc_post(struct httpc *hc, const struct httpc_request *r, httpc_cb *cb,
    void *arg)
{
	(void)hc; (void)r; (void)cb; (void)arg;
	abort();
}

int
httpc_header(struct curl_slist **list, const char *fmt, ...)
{
	(void)list; (void)fmt;
	abort();
}

/*
 * The key of a "whsec_" secret, decoded here without OpenSSL: the
 * base64 text (s, after the prefix), '=' only at its end, up to 345
 * characters in all (sink_http.c's buffer), 1 to 256 bytes.  Returns
 * the length, or -1.
 */
static int
key_decode(const char *s, unsigned char *key)
{
	size_t		 len = strlen(s), n, i, bits = 0;
	uint32_t	 acc = 0;
	int		 k = 0;
	const char	*p;

	if (len == 0 || len + 3 >= 256 * 4 / 3 + 8)
		return -1;
	for (n = len; n > 0 && s[n - 1] == '='; n--)
		;
	if (n % 4 == 1)
		return -1;
	for (i = 0; i < n; i++) {
		if ((p = strchr(B64, s[i])) == NULL || s[i] == '\0')
			return -1;
		acc = acc << 6 | (uint32_t)(p - B64);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (k == 256)
				return -1;
			key[k++] = (unsigned char)(acc >> bits);
		}
	}
	return k == 0 ? -1 : k;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	unsigned char	 key[256], mac[32], b64[64];
	const void	*k = key;
	char		*secret, *buf, *id, *body, *data2, out[WEBHOOK_SIG_LEN + 8];
	const char	*raw;
	unsigned int	 maclen;
	size_t		 rest, blen, dlen;
	int64_t		 ts;
	int		 rv, keylen, whsec;

	if (len < 9)
		return 0;
	whsec = data[0] & 1;
	memcpy(&ts, data + 1, sizeof(ts));
	rest = len - 9;
	/* secret NUL id NUL body, each part its own allocation */
	CHECK((buf = malloc(rest + 2)) != NULL);
	memcpy(buf, data + 9, rest);
	buf[rest] = buf[rest + 1] = '\0';
	raw = buf;
	id = buf + strlen(buf) + 1;
	if ((size_t)(id - buf) > rest) {
		id = buf + rest + 1;	/* the empty string */
		body = NULL;
		blen = 0;
	} else {
		body = id + strlen(id) + 1;
		if ((size_t)(body - buf) > rest) {
			body = NULL;
			blen = 0;
		} else
			blen = rest - (size_t)(body - buf);
	}
	CHECK(asprintf(&secret, "%s%s", whsec ? "whsec_" : "", raw) != -1);
	if (blen != 0) {
		CHECK((data2 = malloc(blen)) != NULL);
		memcpy(data2, body, blen);
		body = data2;
	} else
		data2 = body = NULL;

	memset(out, 'x', sizeof(out));
	rv = webhook_sign(secret, id, ts, body, blen, out, sizeof(out));
	CHECK(rv == 0 || rv == -1);
	if (strncmp(secret, "whsec_", 6) == 0)
		keylen = key_decode(secret + 6, key);
	else {
		keylen = (int)strlen(secret);
		k = secret;
	}
	if (keylen <= 0) {
		CHECK(rv == -1);
		goto done;
	}
	CHECK(rv == 0);
	CHECK(strlen(out) == WEBHOOK_SIG_LEN && strncmp(out, "v1,", 3) == 0);
	CHECK(strspn(out + 3, B64) == 43 && out[46] == '=');

	/* the same HMAC, computed here */
	{
		char	*msg;
		int	 head;

		head = asprintf(&msg, "%s.%" PRId64 ".", id, ts);
		CHECK(head != -1);
		dlen = (size_t)head + blen;
		CHECK((msg = realloc(msg, dlen + 1)) != NULL);
		if (blen != 0)
			memcpy(msg + head, body, blen);
		CHECK(HMAC(EVP_sha256(), k, keylen,
		    (unsigned char *)msg, dlen, mac, &maclen) != NULL &&
		    maclen == 32);
		EVP_EncodeBlock(b64, mac, 32);
		CHECK(strcmp(out + 3, (char *)b64) == 0);
		free(msg);
	}
	/* one byte short of "v1," + 44 + NUL is refused */
	CHECK(webhook_sign(secret, id, ts, body, blen, out,
	    WEBHOOK_SIG_LEN) == -1);
done:
	free(data2);
	free(secret);
	free(buf);
	return 0;
}
