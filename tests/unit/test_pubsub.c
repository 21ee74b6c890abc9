/*
 * test_pubsub.c - the Pub/Sub codec (pubsub.c): the publish request as
 * Google's REST reference describes it (base64 data, attributes,
 * orderingKey), the reply's messageIds, Google's error JSON and what each
 * error means; and gcp_auth.c's pure parts: a service-account key, the
 * RS256 JWT assertion (verified with the key's public half), token
 * replies.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "outboxd.h"
#include "broker.h"

/* A literal and its length. */
#define LIT(s)	(s), strlen(s)

static struct outbox_header hdrs[] = {
	{ "tenant", "acme \"quoted\" \xc3\xa9" },
	{ "trace-id", "abc" },
};

static void
msg_init(struct outbox_msg *m, int64_t id, const char *payload,
    const char *key)
{
	memset(m, 0, sizeof(*m));
	m->id = id;
	m->event_type = "order.created";
	m->key = (char *)key;
	m->payload = (char *)payload;
	m->payload_len = strlen(payload);
	m->headers = hdrs;
	m->nheaders = 2;
}

static char *
b64decode(const char *s, int *len)
{
	unsigned char	*out = malloc(strlen(s) + 1);
	size_t		 n = strlen(s);

	assert_non_null(out);
	*len = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
	assert_true(*len >= 0);
	while (n > 0 && s[--n] == '=')
		(*len)--;
	out[*len] = '\0';
	return (char *)out;
}

static void
test_body(void **state)
{
	struct outbox_msg	 m[3];
	cJSON			*root, *arr, *e, *a;
	char			*body, *data;
	size_t			 len;
	int			 dlen;

	(void)state;
	msg_init(&m[0], 1, "{\"orderId\":\"1\",\"x\":\"\xe2\x82\xac\"}", "k1");
	msg_init(&m[1], 2, "{}", "k2");
	m[1].outcome = SINK_REJECTED;	/* the relay refused it */
	msg_init(&m[2], 3, "ab", "");
	assert_non_null(body = pubsub_publish_body(m, 3, 1, &len));
	assert_int_equal(len, strlen(body));
	assert_non_null(root = cJSON_Parse(body));
	arr = cJSON_GetObjectItemCaseSensitive(root, "messages");
	assert_int_equal(cJSON_GetArraySize(arr), 2);
	e = cJSON_GetArrayItem(arr, 0);
	data = b64decode(cJSON_GetObjectItem(e, "data")->valuestring, &dlen);
	assert_int_equal(dlen, (int)m[0].payload_len);
	assert_memory_equal(data, m[0].payload, m[0].payload_len);
	free(data);
	a = cJSON_GetObjectItem(e, "attributes");
	assert_string_equal(cJSON_GetObjectItem(a, "EventType")->valuestring,
	    "order.created");
	assert_string_equal(cJSON_GetObjectItem(a, "tenant")->valuestring,
	    hdrs[0].value);
	assert_string_equal(cJSON_GetObjectItem(e, "orderingKey")->valuestring,
	    "k1");
	/* An empty key is no ordering key. */
	e = cJSON_GetArrayItem(arr, 1);
	assert_null(cJSON_GetObjectItem(e, "orderingKey"));
	assert_string_equal(cJSON_GetObjectItem(e, "data")->valuestring,
	    "YWI=");
	cJSON_Delete(root);
	free(body);

	/* Without ordering, no orderingKey at all. */
	assert_non_null(body = pubsub_publish_body(m, 1, 0, &len));
	assert_null(strstr(body, "orderingKey"));
	free(body);
	/* Nothing left to send. */
	m[0].outcome = m[2].outcome = SINK_REJECTED;
	assert_null(pubsub_publish_body(m, 3, 1, &len));
}

static void
test_url(void **state)
{
	char	*u;

	(void)state;
	assert_non_null(u = pubsub_publish_url("https://pubsub.googleapis.com",
	    "my-project", "orders"));
	assert_string_equal(u, "https://pubsub.googleapis.com/v1/projects/"
	    "my-project/topics/orders:publish");
	free(u);
}

static void
test_check(void **state)
{
	struct outbox_msg	 m;
	struct outbox_header	 h[1];
	char			 why[300], big[1100], key[1100];

	(void)state;
	msg_init(&m, 1, "{}", "k");
	assert_int_equal(pubsub_message_check(&m, 1, why, sizeof(why)), 0);
	h[0].name = "googThing";
	h[0].value = "v";
	m.headers = h;
	m.nheaders = 1;
	assert_int_equal(pubsub_message_check(&m, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "goog"));
	memset(big, 'v', 1025);
	big[1025] = '\0';
	h[0].name = "n";
	h[0].value = big;
	assert_int_equal(pubsub_message_check(&m, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "1025 bytes"));
	assert_null(strstr(why, "vvvv"));	/* never the value */
	big[1024] = '\0';
	assert_int_equal(pubsub_message_check(&m, 1, why, sizeof(why)), 0);
	memset(key, 'k', 1025);
	key[1025] = '\0';
	m.key = key;
	assert_int_equal(pubsub_message_check(&m, 1, why, sizeof(why)), -1);
	assert_int_equal(pubsub_message_check(&m, 0, why, sizeof(why)), 0);
}

static void
test_reply(void **state)
{
	struct outbox_msg	 m[3];
	char			 why[200];
	const char		*ok = "{\"messageIds\":[\"11\",\"12\"]}";

	(void)state;
	msg_init(&m[0], 1, "a", "k");
	msg_init(&m[1], 2, "b", "k");
	msg_init(&m[2], 3, "c", "k");
	m[0].outcome = m[2].outcome = SINK_RETRY;
	m[1].outcome = SINK_REJECTED;
	assert_int_equal(pubsub_publish_parse(ok, strlen(ok), m, 3, why,
	    sizeof(why)), 2);
	assert_int_equal(m[0].outcome, SINK_SENT);
	assert_int_equal(m[1].outcome, SINK_REJECTED);
	assert_int_equal(m[2].outcome, SINK_SENT);
	/* One ID short: nothing is taken as sent. */
	m[0].outcome = m[2].outcome = SINK_RETRY;
	assert_int_equal(pubsub_publish_parse(LIT("{\"messageIds\":[\"1\"]}"),
	    m, 3, why, sizeof(why)), -1);
	assert_int_equal(m[0].outcome, SINK_RETRY);
	assert_int_equal(pubsub_publish_parse(LIT("{}"), m, 3, why,
	    sizeof(why)), -1);
	assert_int_equal(pubsub_publish_parse(LIT("{\"messageIds\":[1,2]}"),
	    m, 3, why, sizeof(why)), -1);
}

static void
test_errors(void **state)
{
	struct pubsub_error	 e;
	const char		*nf = "{\"error\": {\"code\": 404, \"message\": "
				    "\"Resource not found (resource=gone).\", "
				    "\"status\": \"NOT_FOUND\"}}";

	(void)state;
	assert_int_equal(pubsub_error_parse(nf, strlen(nf), &e), 0);
	assert_int_equal(e.code, 404);
	assert_string_equal(e.status, "NOT_FOUND");
	assert_string_equal(e.message, "Resource not found (resource=gone).");
	assert_int_equal(pubsub_error_parse(LIT("<html>"), &e), -1);
	assert_string_equal(e.status, "");

	assert_int_equal(pubsub_outcome(404, "NOT_FOUND"), SINK_REJECTED);
	assert_int_equal(pubsub_outcome(400, "INVALID_ARGUMENT"),
	    SINK_REJECTED);
	assert_int_equal(pubsub_outcome(403, "PERMISSION_DENIED"),
	    SINK_REJECTED);
	assert_int_equal(pubsub_reason(403, "PERMISSION_DENIED"),
	    SINK_REASON_REJECTED);
	assert_int_equal(pubsub_outcome(503, "UNAVAILABLE"), SINK_RETRY);
	assert_int_equal(pubsub_reason(503, "UNAVAILABLE"), SINK_REASON_SERVER);
	assert_int_equal(pubsub_outcome(504, "DEADLINE_EXCEEDED"), SINK_RETRY);
	assert_int_equal(pubsub_outcome(429, "RESOURCE_EXHAUSTED"),
	    SINK_RETRY);
	assert_int_equal(pubsub_reason(429, ""), SINK_REASON_THROTTLED);
	assert_int_equal(pubsub_outcome(500, ""), SINK_RETRY);
	assert_int_equal(pubsub_outcome(0, ""), SINK_RETRY);
	assert_int_equal(pubsub_reason(0, ""), SINK_REASON_TRANSPORT);
	assert_int_equal(pubsub_outcome(401, "UNAUTHENTICATED"), SINK_RETRY);
	assert_int_equal(pubsub_reason(401, "UNAUTHENTICATED"),
	    SINK_REASON_CLIENT);
	assert_int_equal(pubsub_outcome(400, ""), SINK_REJECTED);
}

/* A fresh RSA key as a service-account key file's JSON. */
static char *
sa_key_json(EVP_PKEY **pub)
{
	EVP_PKEY	*k = EVP_RSA_gen(2048);
	BIO		*b = BIO_new(BIO_s_mem());
	char		*pem, *json;
	long		 n;
	cJSON		*o = cJSON_CreateObject();

	assert_non_null(k);
	assert_int_equal(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL,
	    NULL), 1);
	n = BIO_get_mem_data(b, &pem);
	cJSON_AddStringToObject(o, "type", "service_account");
	cJSON_AddStringToObject(o, "client_email", "relay@p.iam.example");
	cJSON_AddStringToObject(o, "private_key_id", "kid1");
	pem = strndup(pem, (size_t)n);
	cJSON_AddStringToObject(o, "private_key", pem);
	free(pem);
	cJSON_AddStringToObject(o, "token_uri", "http://127.0.0.1:1/token");
	json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	BIO_free(b);
	*pub = k;
	return json;
}

static char *
b64url_decode(const char *s, size_t n, int *len)
{
	char	*t = malloc(n + 4), *out;
	size_t	 i;

	for (i = 0; i < n; i++)
		t[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (i % 4 != 0)
		t[i++] = '=';
	t[i] = '\0';
	out = b64decode(t, len);
	free(t);
	return out;
}

static void
test_jwt(void **state)
{
	struct gcp_sa_key	 k;
	EVP_PKEY		*pub;
	EVP_MD_CTX		*ctx;
	char			*json, *jwt, *claims, *sig, err[200];
	const char		*d1, *d2;
	cJSON			*c;
	int			 clen, slen;

	(void)state;
	json = sa_key_json(&pub);
	assert_int_equal(gcp_sa_key_parse(json, strlen(json), &k, err,
	    sizeof(err)), 0);
	assert_string_equal(k.client_email, "relay@p.iam.example");
	assert_non_null(jwt = gcp_jwt_assertion(&k, 1700000000));
	assert_non_null(d1 = strchr(jwt, '.'));
	assert_non_null(d2 = strchr(d1 + 1, '.'));
	claims = b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), &clen);
	assert_non_null(c = cJSON_Parse(claims));
	assert_string_equal(cJSON_GetObjectItem(c, "iss")->valuestring,
	    "relay@p.iam.example");
	assert_string_equal(cJSON_GetObjectItem(c, "aud")->valuestring,
	    "http://127.0.0.1:1/token");
	assert_string_equal(cJSON_GetObjectItem(c, "scope")->valuestring,
	    GCP_AUTH_SCOPE);
	assert_int_equal((long)cJSON_GetObjectItem(c, "exp")->valuedouble,
	    1700000000L + 3600);
	cJSON_Delete(c);
	/* The signature verifies with the public half. */
	sig = b64url_decode(d2 + 1, strlen(d2 + 1), &slen);
	assert_non_null(ctx = EVP_MD_CTX_new());
	assert_int_equal(EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL,
	    pub), 1);
	assert_int_equal(EVP_DigestVerify(ctx, (unsigned char *)sig,
	    (size_t)slen, (unsigned char *)jwt, (size_t)(d2 - jwt)), 1);
	/* ... and not over other bytes. */
	assert_int_not_equal(EVP_DigestVerify(ctx, (unsigned char *)sig,
	    (size_t)slen, (unsigned char *)jwt, (size_t)(d2 - jwt - 1)), 1);
	EVP_MD_CTX_free(ctx);
	free(sig);
	free(claims);
	free(jwt);
	gcp_sa_key_clear(&k);
	EVP_PKEY_free(pub);
	free(json);

	assert_int_equal(gcp_sa_key_parse(LIT("{\"type\":\"authorized_user\"}"),
	    &k, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "service_account"));
	assert_int_equal(gcp_sa_key_parse(LIT("{\"type\":\"service_account\","
	    "\"client_email\":\"a@b\",\"private_key\":\"SECRETKEY\"}"), &k,
	    err, sizeof(err)), -1);
	assert_null(strstr(err, "SECRETKEY"));
	/* An encrypted key is refused without asking for a pass phrase
	 * (OpenSSL's default would prompt on the terminal). */
	assert_int_equal(gcp_sa_key_parse(LIT("{\"type\":\"service_account\","
	    "\"client_email\":\"a@b\",\"private_key\":\"-----BEGIN ENCRYPTED "
	    "PRIVATE KEY-----\\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQww"
	    "\\n-----END ENCRYPTED PRIVATE KEY-----\\n\"}"), &k, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "encrypted"));
}

static void
test_token(void **state)
{
	char	*t;
	long	 life = 0;

	(void)state;
	t = gcp_token_parse(LIT("{\"access_token\":\"ya29.a-b_c\",\"expires_in\":"
	    "3599,\"token_type\":\"Bearer\"}"), &life);
	assert_non_null(t);
	assert_string_equal(t, "ya29.a-b_c");
	assert_int_equal(life, 3599);
	free(t);
	/* A token that would break the header line, or no lifetime. */
	assert_null(gcp_token_parse(LIT("{\"access_token\":\"a\\r\\nX: y\","
	    "\"expires_in\":60}"), &life));
	assert_null(gcp_token_parse(LIT("{\"access_token\":\"abc\"}"),
	    &life));
	assert_null(gcp_token_parse(LIT("{\"access_token\":\"abc\","
	    "\"expires_in\":60,\"token_type\":\"MAC\"}"), &life));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_body),
		cmocka_unit_test(test_url),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_reply),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_jwt),
		cmocka_unit_test(test_token),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
