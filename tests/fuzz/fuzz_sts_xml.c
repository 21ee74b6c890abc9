/*
 * fuzz_sts_xml.c - libFuzzer target for what outboxd reads from STS and
 * writes to it (src/sts.c): a reply read as the Credentials of
 * AssumeRole and of AssumeRoleWithWebIdentity (sts_creds_parse), the
 * same bytes as an ErrorResponse (sts_error_parse), and as the web
 * identity token and external id of a request body (sts_body).  Checked:
 * credentials are all there and non-empty, or none is and a reason is
 * given; error fields are NUL-terminated; the body holds only RFC 3986
 * unreserved characters, '%XX', '&' and '=' and its WebIdentityToken
 * decodes back to the input.  Built and run by `make fuzz`; by hand,
 * from the top of a configured tree:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc tests/fuzz/fuzz_sts_xml.c src/sts.c -lexpat -lcurl -o fuzz_sts_xml && mkdir -p /tmp/fuzz-sts && ./fuzz_sts_xml -max_total_time=300 /tmp/fuzz-sts tests/fuzz/corpus/sts_xml
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sts.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
fz_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	abort();		/* only upper-case hex is sent */
}

/* The decoded value of key in the form body b (malloc'd), or NULL. */
static char *
fz_form_get(const char *b, const char *key)
{
	size_t		 klen = strlen(key);
	const char	*p = b, *v, *e;
	char		*out, *o;

	for (;;) {
		if (strncmp(p, key, klen) == 0 && p[klen] == '=')
			break;
		if ((p = strchr(p, '&')) == NULL)
			return NULL;
		p++;
	}
	v = p + klen + 1;
	if ((e = strchr(v, '&')) == NULL)
		e = v + strlen(v);
	CHECK((out = malloc((size_t)(e - v) + 1)) != NULL);
	for (o = out; v < e; v++) {
		if (*v == '%') {
			CHECK(v + 2 < e);
			*o++ = (char)(fz_hex(v[1]) * 16 + fz_hex(v[2]));
			v += 2;
		} else
			*o++ = *v;
	}
	*o = '\0';
	return out;
}

static void
fz_creds(enum sts_action a, const char *xml, size_t len)
{
	struct sts_creds	 c;
	const char		*why = NULL;

	if (sts_creds_parse(a, xml, len, &c, &why) == 0) {
		CHECK(c.access_key_id != NULL && *c.access_key_id != '\0');
		CHECK(c.secret_access_key != NULL &&
		    *c.secret_access_key != '\0');
		CHECK(c.session_token != NULL && *c.session_token != '\0');
		CHECK(c.expiration != NULL && *c.expiration != '\0');
		CHECK(strlen(c.session_token) <= STS_TEXT_MAX);
		sts_creds_clear(&c);
		CHECK(c.access_key_id == NULL && c.session_token == NULL);
	} else {
		CHECK(why != NULL);
		CHECK(c.access_key_id == NULL && c.secret_access_key == NULL &&
		    c.session_token == NULL && c.expiration == NULL);
	}
}

static void
fz_body(const uint8_t *data, size_t size)
{
	char		*text, *body, *back;
	const char	*p;

	CHECK((text = malloc(size + 1)) != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	body = sts_body(STS_ASSUME_ROLE_WEB_IDENTITY,
	    "arn:aws:iam::0:role/r", "s", text, 900);
	if (*text == '\0') {
		CHECK(body == NULL);	/* a token is required */
		free(text);
		return;
	}
	CHECK(body != NULL);
	for (p = body; *p != '\0'; p++)
		CHECK((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~%&=", *p) != NULL);
	back = fz_form_get(body, "WebIdentityToken");
	CHECK(back != NULL && strcmp(back, text) == 0);
	free(back);
	free(body);
	body = sts_body(STS_ASSUME_ROLE, "arn:aws:iam::0:role/r", "s", text, 0);
	CHECK(body != NULL);
	back = fz_form_get(body, "ExternalId");
	CHECK(back != NULL && strcmp(back, text) == 0);
	free(back);
	free(body);
	free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sts_error	 e;
	const char		*xml = (const char *)data;

	fz_creds(STS_ASSUME_ROLE, xml, size);
	fz_creds(STS_ASSUME_ROLE_WEB_IDENTITY, xml, size);
	if (sts_error_parse(xml, size, &e) == 0) {
		CHECK(memchr(e.type, '\0', sizeof e.type) != NULL);
		CHECK(memchr(e.code, '\0', sizeof e.code) != NULL);
		CHECK(memchr(e.message, '\0', sizeof e.message) != NULL);
	} else
		CHECK(e.code[0] == '\0');
	fz_body(data, size);
	return 0;
}
