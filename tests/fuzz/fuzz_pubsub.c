/*
 * fuzz_pubsub.c - libFuzzer target for what outboxd reads from Google
 * and writes to Pub/Sub (src/pubsub.c, src/gcp_auth.c): the same bytes as
 * a publish reply read into the outcomes of a batch
 * (pubsub_publish_parse), as Google's error JSON (pubsub_error_parse),
 * as a token endpoint's or metadata server's reply (gcp_token_parse), as
 * a service-account key file (gcp_sa_key_parse), and as the payload,
 * ordering key and a header value of a publish body
 * (pubsub_publish_body).  Checked: a reply either marks every message
 * not decided before SINK_SENT and returns their number, or returns -1
 * and touches no outcome; a message decided before is left alone; error
 * fields are NUL-terminated and the status is upper-case letters and
 * '_'; a token is non-empty, at most 4096 bytes of the characters an
 * HTTP header may carry, with a lifetime of 1 s to 7 days; a key parsed
 * has an RSA key, a client_email and an http(s) token_uri, a key refused
 * leaves nothing allocated (LeakSanitizer) and an error that does not
 * quote the input; the body is JSON whose data decodes back to the
 * payload byte for byte and whose attributes and orderingKey are the
 * input.  The same bytes as an authorized_user or external_account file
 * (gcp_cred_parse, src/gcp_external.c): refused, nothing is left
 * allocated and the error quotes nothing but a type; taken, the fields
 * a flow needs are there, and the refresh and STS form bodies built
 * from it decode back to its values and a subject token; as a subject
 * token's text or JSON (gcp_subject_parse) and a generateAccessToken
 * reply (gcp_iam_parse): a token of the header's characters, a life
 * of 1 s to 7 days.  Built and run by `make fuzz` (FUZZ_SECONDS); by hand, from the
 * top of a configured tree:
 *
 *   make fuzz-build FUZZ_TARGETS=pubsub && mkdir -p /tmp/fuzz-pubsub && tests/fuzz/build/fuzz_pubsub -max_total_time=300 /tmp/fuzz-pubsub tests/fuzz/corpus/pubsub
 *
 * Input: byte 0 gives n, the messages of the batch (1 + byte % 10), with
 * its high bit the message with id 3 is decided before (rejected), with
 * bit 0x40 the body has ordering keys; the rest is the text.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <openssl/evp.h>

#include "outboxd.h"
#include "broker.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
fz_publish_parse(const char *text, size_t len, int n, int pre)
{
	struct outbox_msg	 msgs[10];
	char			 why[200];
	int			 i, sent, want = 0;

	memset(msgs, 0, sizeof msgs);
	for (i = 0; i < n; i++) {
		msgs[i].id = i + 1;
		msgs[i].outcome = SINK_RETRY;
	}
	if (pre) {
		msgs[2].outcome = SINK_REJECTED;
		msgs[2].reason = SINK_REASON_TOO_LARGE;
	}
	for (i = 0; i < n; i++)
		if (msgs[i].outcome != SINK_REJECTED)
			want++;
	why[0] = 'x';
	sent = pubsub_publish_parse(text, len, msgs, n, why, sizeof why);
	CHECK(sent == -1 || sent == want);
	if (sent == -1)
		CHECK(memchr(why, '\0', sizeof why) != NULL);
	for (i = 0; i < n; i++) {
		CHECK(msgs[i].error == NULL);
		if (pre && i == 2) {
			CHECK(msgs[i].outcome == SINK_REJECTED);
			CHECK(msgs[i].reason == SINK_REASON_TOO_LARGE);
		} else
			CHECK(msgs[i].outcome == (sent == -1 ? SINK_RETRY :
			    SINK_SENT));
	}
}

static void
fz_error_parse(const char *text, size_t len)
{
	struct pubsub_error	e;
	const char		*p;

	if (pubsub_error_parse(text, len, &e) == -1) {
		CHECK(e.code == 0 && e.status[0] == '\0' &&
		    e.message[0] == '\0');
		return;
	}
	CHECK(e.code >= 0 && e.code < 1000);
	CHECK(memchr(e.status, '\0', sizeof e.status) != NULL);
	CHECK(memchr(e.message, '\0', sizeof e.message) != NULL);
	for (p = e.status; *p != '\0'; p++)
		CHECK((*p >= 'A' && *p <= 'Z') || *p == '_');
	/* whatever the status, it maps to an outcome and a reason */
	CHECK(pubsub_outcome(e.code, e.status) != SINK_SENT ||
	    e.status[0] == '\0');
	CHECK(pubsub_reason(e.code, e.status) < SINK_NREASONS);
}

static void
fz_token_parse(const char *text, size_t len)
{
	char	*tok;
	long	 life = -1;

	if ((tok = gcp_token_parse(text, len, &life)) == NULL) {
		CHECK(life == -1);
		return;
	}
	CHECK(life >= 1 && life <= 86400L * 7);
	CHECK(tok[0] != '\0' && strlen(tok) <= 4096);
	CHECK(strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789-._~+/=") == strlen(tok));
	free(tok);
}

static void
fz_sa_key_parse(const char *text, size_t len)
{
	static const struct gcp_sa_key	 zero;
	struct gcp_sa_key		 k;
	char				 err[200];

	if (gcp_sa_key_parse(text, len, &k, err, sizeof err) == -1) {
		CHECK(memcmp(&k, &zero, sizeof k) == 0);
		CHECK(memchr(err, '\0', sizeof err) != NULL && err[0] != '\0');
		/* the reasons are fixed text: none quotes the file */
		CHECK(strchr(err, '"') == NULL ||
		    strstr(err, "\"service_account\"") != NULL);
		return;
	}
	CHECK(k.pkey != NULL);
	CHECK(EVP_PKEY_base_id(k.pkey) == EVP_PKEY_RSA);
	CHECK(k.client_email != NULL && k.client_email[0] != '\0');
	CHECK(k.token_uri != NULL && (strncmp(k.token_uri, "https://", 8) ==
	    0 || strncmp(k.token_uri, "http://", 7) == 0));
	CHECK(k.private_key_id == NULL || k.private_key_id[0] != '\0');
	gcp_sa_key_clear(&k);
	CHECK(memcmp(&k, &zero, sizeof k) == 0);
}

/* The form body's value of name decoded equals want. */
static void
fz_form_is(const char *body, const char *name, const char *want)
{
	const char	*p = body;
	size_t		 n = strlen(name);
	char		*d;
	int		 len;

	for (; p != NULL; p = strchr(p, '&'), p = p != NULL ? p + 1 : NULL)
		if (strncmp(p, name, n) == 0 && p[n] == '=')
			break;
	CHECK(p != NULL);
	p += n + 1;
	CHECK((d = curl_easy_unescape(NULL, p, (int)strcspn(p, "&"), &len)) !=
	    NULL);
	CHECK((size_t)len == strlen(want) && memcmp(d, want, (size_t)len) ==
	    0);
	curl_free(d);
}

static int
fz_is_url(const char *u)
{
	return u != NULL && (strncmp(u, "https://", 8) == 0 ||
	    strncmp(u, "http://", 7) == 0);
}

static void
fz_cred_parse(const char *text, size_t len)
{
	static const struct gcp_cred	 zero;
	struct gcp_cred			 c;
	char				 err[300], *b, sub[64];
	cJSON				*j;

	if (gcp_cred_parse(text, len, &c, err, sizeof err) == -1) {
		CHECK(memcmp(&c, &zero, sizeof c) == 0);
		CHECK(memchr(err, '\0', sizeof err) != NULL && err[0] != '\0');
		CHECK(strchr(err, '"') == NULL || strncmp(err, "type \"", 6) ==
		    0 || strstr(err, "\"text\" nor \"json\"") != NULL);
		return;
	}
	CHECK(fz_is_url(c.token_uri));
	if (c.type == GCP_CRED_USER) {
		CHECK(c.client_id != NULL && c.client_secret != NULL &&
		    c.refresh_token != NULL);
		CHECK((b = gcp_refresh_body(&c)) != NULL);
		fz_form_is(b, "grant_type", "refresh_token");
		fz_form_is(b, "client_id", c.client_id);
		fz_form_is(b, "client_secret", c.client_secret);
		fz_form_is(b, "refresh_token", c.refresh_token);
		free(b);
	} else {
		CHECK(c.type == GCP_CRED_EXTERNAL);
		CHECK(c.audience != NULL && c.subject_token_type != NULL);
		CHECK((c.src_file == NULL) != (c.src_url == NULL));
		CHECK(c.src_url == NULL || fz_is_url(c.src_url));
		CHECK(c.src_nheaders == 0 || c.src_url != NULL);
		CHECK(c.impersonation_url == NULL ||
		    fz_is_url(c.impersonation_url));
		CHECK(c.lifetime_s >= 600 && c.lifetime_s <= 43200);
		CHECK((c.client_id == NULL) == (c.client_secret == NULL));
		/* A subject token with the characters a form must encode. */
		snprintf(sub, sizeof sub, "s&u=b+%zu", len);
		b = gcp_sts_body(&c, sub);
		CHECK(b != NULL || (c.user_project != NULL &&
		    strpbrk(c.user_project, "\"\\") != NULL));
		if (b != NULL) {
			fz_form_is(b, "audience", c.audience);
			fz_form_is(b, "subject_token", sub);
			fz_form_is(b, "subject_token_type",
			    c.subject_token_type);
			free(b);
		}
		CHECK((b = gcp_iam_body(&c)) != NULL);
		CHECK((j = cJSON_Parse(b)) != NULL);
		cJSON_Delete(j);
		free(b);
	}
	gcp_cred_describe(&c, err, sizeof err);
	gcp_cred_clear(&c);
	CHECK(memcmp(&c, &zero, sizeof c) == 0);
}

static void
fz_subject_iam(const char *text, size_t len)
{
	char	 err[200], *t;
	long	 life = -1;

	if ((t = gcp_subject_parse(text, len, NULL, err, sizeof err)) != NULL) {
		CHECK(t[0] != '\0' && strlen(t) <= len);
		free(t);
	} else
		CHECK(memchr(err, '\0', sizeof err) != NULL);
	if ((t = gcp_subject_parse(text, len, "token", err, sizeof err)) !=
	    NULL) {
		CHECK(t[0] != '\0');
		free(t);
	}
	if ((t = gcp_iam_parse(text, len, 1700000000, &life)) == NULL) {
		CHECK(life == -1);
		return;
	}
	CHECK(life >= 1 && life <= 86400L * 7);
	CHECK(gcp_token_valid(t));
	free(t);
}

/* The string member name of o, which must be there. */
static const char *
fz_get(const cJSON *o, const char *name)
{
	const cJSON	*v = cJSON_GetObjectItemCaseSensitive(o, name);

	CHECK(cJSON_IsString(v));
	return v->valuestring;
}

static void
fz_body(const uint8_t *data, size_t size, int ordering)
{
	struct outbox_header	 h = { "trace", NULL };
	struct outbox_msg	 m[2];
	cJSON			*root, *msgs, *msg, *attrs;
	unsigned char		*back;
	char			*text, *body;
	const char		*b64;
	size_t			 blen, b64len, pad, declen;
	int			 n;

	/* a header value and a key are C strings (the schema keeps NUL out
	 * of text); the payload is bytes */
	CHECK((text = malloc(size + 1)) != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	memset(m, 0, sizeof m);
	m[0].id = 1;
	m[0].outcome = SINK_REJECTED;	/* left out of the body */
	m[1].id = 2;
	m[1].event_type = "order.created";
	m[1].key = text;
	m[1].payload = text;		/* all size bytes, NULs too */
	m[1].payload_len = size;
	h.value = text;
	m[1].headers = &h;
	m[1].nheaders = 1;
	body = pubsub_publish_body(m, 2, ordering, &blen);
	CHECK(body != NULL && strlen(body) == blen);
	CHECK((root = cJSON_ParseWithLength(body, blen)) != NULL);
	msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
	CHECK(cJSON_IsArray(msgs) && (n = cJSON_GetArraySize(msgs)) == 1);
	msg = cJSON_GetArrayItem(msgs, 0);
	b64 = fz_get(msg, "data");
	b64len = strlen(b64);
	CHECK(b64len % 4 == 0 && b64len == (size + 2) / 3 * 4);
	pad = b64len >= 1 && b64[b64len - 1] == '=' ?
	    (b64len >= 2 && b64[b64len - 2] == '=' ? 2 : 1) : 0;
	CHECK((back = malloc(b64len / 4 * 3 + 1)) != NULL);
	declen = (size_t)EVP_DecodeBlock(back, (const unsigned char *)b64,
	    (int)b64len);
	CHECK(declen - pad == size && memcmp(back, data, size) == 0);
	free(back);
	attrs = cJSON_GetObjectItemCaseSensitive(msg, "attributes");
	CHECK(cJSON_IsObject(attrs) && cJSON_GetArraySize(attrs) == 2);
	CHECK(strcmp(fz_get(attrs, PUBSUB_EVENT_TYPE_ATTR), "order.created")
	    == 0);
	CHECK(strcmp(fz_get(attrs, "trace"), text) == 0);
	if (ordering && text[0] != '\0')
		CHECK(strcmp(fz_get(msg, "orderingKey"), text) == 0);
	else
		CHECK(cJSON_GetObjectItemCaseSensitive(msg, "orderingKey") ==
		    NULL);
	cJSON_Delete(root);
	free(body);
	free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char	*text;
	size_t		 len;
	int		 n, pre;

	if (size < 1)
		return 0;
	n = 1 + data[0] % 10;
	pre = (data[0] & 0x80) != 0 && n >= 3;
	text = (const char *)data + 1;
	len = size - 1;

	fz_publish_parse(text, len, n, pre);
	fz_error_parse(text, len);
	fz_token_parse(text, len);
	fz_sa_key_parse(text, len);
	fz_cred_parse(text, len);
	fz_subject_iam(text, len);
	fz_body(data + 1, len, (data[0] & 0x40) != 0);
	return 0;
}
