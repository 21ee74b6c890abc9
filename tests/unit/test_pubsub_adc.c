/*
 * test_pubsub_adc.c - gcp_external.c's pure parts: authorized_user and
 * external_account files (AIP-4117) as Google's libraries read them,
 * the kinds refused by name, subject tokens (text, JSON), the refresh
 * and STS token-exchange form bodies, generateAccessToken's body and
 * reply; and that no error quotes a secret.
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
#include <curl/curl.h>

#include "outboxd.h"
#include "broker.h"

#define LIT(s)	(s), strlen(s)

/* The form body's value of name, decoded (caller frees); NULL if none. */
static char *
form_get(const char *body, const char *name)
{
	const char	*p = body;
	size_t		 n = strlen(name);
	char		*v, *d;
	int		 len;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, name, n) == 0 && p[n] == '=') {
			p += n + 1;
			v = strndup(p, strcspn(p, "&"));
			d = curl_easy_unescape(NULL, v, 0, &len);
			free(v);
			v = strdup(d);
			curl_free(d);
			return v;
		}
		p = strchr(p, '&');
		if (p != NULL)
			p++;
	}
	return NULL;
}

static void
assert_form(const char *body, const char *name, const char *want)
{
	char	*v = form_get(body, name);

	if (want == NULL) {
		assert_null(v);
		return;
	}
	assert_non_null(v);
	assert_string_equal(v, want);
	free(v);
}

/* parse_fails(JSON, WHY): refused, the error holds WHY, no secret. */
static void
parse_fails(const char *json, const char *why)
{
	struct gcp_cred	c;
	char		err[300];

	assert_int_equal(gcp_cred_parse(LIT(json), &c, err, sizeof(err)), -1);
	if (strstr(err, why) == NULL)
		fail_msg("\"%s\" not in \"%s\"", why, err);
	assert_null(strstr(err, "SECRET"));
	assert_null(c.client_id);
	assert_null(c.client_secret);
}

static void
test_user(void **state)
{
	struct gcp_cred	 c;
	char		 err[300], desc[300], *b;

	(void)state;
	/* As gcloud writes it: no token_uri. */
	assert_int_equal(gcp_cred_parse(LIT("{\"type\":\"authorized_user\","
	    "\"client_id\":\"cid\",\"client_secret\":\"SECRET-cs\","
	    "\"refresh_token\":\"1//SECRET&rt=\",\"quota_project_id\":\"p\"}"),
	    &c, err, sizeof(err)), 0);
	assert_int_equal(c.type, GCP_CRED_USER);
	assert_string_equal(c.token_uri, "https://oauth2.googleapis.com/token");
	gcp_cred_describe(&c, desc, sizeof(desc));
	assert_non_null(strstr(desc, "authorized user (client_id cid)"));
	assert_null(strstr(desc, "SECRET"));
	assert_non_null(b = gcp_refresh_body(&c));
	assert_form(b, "grant_type", "refresh_token");
	assert_form(b, "client_id", "cid");
	assert_form(b, "client_secret", "SECRET-cs");
	/* Percent-encoded: '&' and '=' do not split the form. */
	assert_form(b, "refresh_token", "1//SECRET&rt=");
	free(b);
	gcp_cred_clear(&c);
	assert_null(c.refresh_token);

	parse_fails("{\"type\":\"authorized_user\",\"client_id\":\"c\","
	    "\"client_secret\":\"SECRET\"}", "no refresh_token");
	parse_fails("{\"type\":\"authorized_user\",\"client_secret\":\"SECRET\","
	    "\"refresh_token\":\"SECRET\"}", "no client_id");
	parse_fails("{\"type\":\"authorized_user\",\"client_id\":\"c\","
	    "\"client_secret\":\"SECRET\",\"refresh_token\":\"SECRET\","
	    "\"token_uri\":\"file:///etc/passwd\"}", "token_uri is not");
	parse_fails("{\"type\":\"impersonated_service_account\"}",
	    "type \"impersonated_service_account\" is not supported");
	parse_fails("{\"type\":\"external_account_authorized_user\"}",
	    "is not supported");
	parse_fails("[1]", "not a JSON object");
	parse_fails("{}", "no type");
}

#define EXT	"{\"type\":\"external_account\",\"audience\":\"//iam/aud\"," \
		"\"subject_token_type\":\"urn:ietf:params:oauth:token-type:jwt\","

static void
test_external(void **state)
{
	struct gcp_cred	 c;
	char		 err[300], desc[400], *b;

	(void)state;
	assert_int_equal(gcp_cred_parse(LIT(EXT "\"token_url\":"
	    "\"https://sts.example/v1/token\",\"credential_source\":{\"file\":"
	    "\"/var/run/token\"},\"service_account_impersonation_url\":"
	    "\"https://iam.example/v1/projects/-/serviceAccounts/a@b:"
	    "generateAccessToken\",\"service_account_impersonation\":"
	    "{\"token_lifetime_seconds\":1200}}"), &c, err, sizeof(err)), 0);
	assert_int_equal(c.type, GCP_CRED_EXTERNAL);
	assert_string_equal(c.src_file, "/var/run/token");
	assert_null(c.src_url);
	assert_null(c.src_field);
	assert_int_equal(c.lifetime_s, 1200);
	gcp_cred_describe(&c, desc, sizeof(desc));
	assert_non_null(strstr(desc, "subject token from file /var/run/token"));
	assert_non_null(strstr(desc, "impersonating with https://iam.example"));
	assert_non_null(b = gcp_sts_body(&c, "SUBJECT+/="));
	assert_form(b, "grant_type",
	    "urn:ietf:params:oauth:grant-type:token-exchange");
	assert_form(b, "requested_token_type",
	    "urn:ietf:params:oauth:token-type:access_token");
	assert_form(b, "audience", "//iam/aud");
	/* Impersonating: the STS token must reach IAM Credentials. */
	assert_form(b, "scope",
	    "https://www.googleapis.com/auth/cloud-platform");
	assert_form(b, "subject_token", "SUBJECT+/=");
	assert_form(b, "subject_token_type",
	    "urn:ietf:params:oauth:token-type:jwt");
	assert_form(b, "options", NULL);
	free(b);
	assert_non_null(b = gcp_iam_body(&c));
	assert_string_equal(b, "{\"scope\":[\"https://www.googleapis.com/auth/"
	    "pubsub\"],\"lifetime\":\"1200s\"}");
	free(b);
	gcp_cred_clear(&c);

	/* URL-sourced JSON, headers; default token_url; workforce. */
	assert_int_equal(gcp_cred_parse(LIT(EXT "\"credential_source\":{"
	    "\"url\":\"http://169.254.169.254/token?x=1\",\"headers\":"
	    "{\"Metadata\":\"True\"},\"format\":{\"type\":\"json\","
	    "\"subject_token_field_name\":\"access_token\"}},"
	    "\"workforce_pool_user_project\":\"proj-1\"}"), &c, err,
	    sizeof(err)), 0);
	assert_string_equal(c.token_uri, "https://sts.googleapis.com/v1/token");
	assert_string_equal(c.src_url, "http://169.254.169.254/token?x=1");
	assert_int_equal(c.src_nheaders, 1);
	assert_string_equal(c.src_headers[0], "Metadata: True");
	assert_string_equal(c.src_field, "access_token");
	assert_int_equal(c.lifetime_s, 3600);
	assert_non_null(b = gcp_sts_body(&c, "s"));
	assert_form(b, "scope", "https://www.googleapis.com/auth/pubsub");
	assert_form(b, "options", "{\"userProject\":\"proj-1\"}");
	free(b);
	gcp_cred_clear(&c);

	parse_fails(EXT "\"credential_source\":{\"environment_id\":\"aws1\"}}",
	    "credential_source is AWS-sourced (environment_id): not supported");
	parse_fails(EXT "\"credential_source\":{\"executable\":{\"command\":"
	    "\"x\"}}}", "credential_source is executable-sourced: not "
	    "supported");
	parse_fails(EXT "\"credential_source\":{}}",
	    "exactly one of file and url");
	parse_fails(EXT "\"credential_source\":{\"file\":\"/a\",\"url\":"
	    "\"http://x/\"}}", "exactly one of file and url");
	parse_fails(EXT "\"credential_source\":{\"url\":\"ftp://x/\"}}",
	    "credential_source.url is not");
	parse_fails(EXT "\"credential_source\":{\"url\":\"http://x/\","
	    "\"headers\":{\"A\":\"b\\r\\nX: y\"}}}", "not a header's");
	parse_fails(EXT "\"credential_source\":{\"file\":\"/a\",\"format\":"
	    "{\"type\":\"json\"}}}", "without subject_token_field_name");
	parse_fails(EXT "\"credential_source\":{\"file\":\"/a\",\"format\":"
	    "{\"type\":\"xml\"}}}", "neither \"text\" nor \"json\"");
	parse_fails(EXT "\"credential_source\":{\"file\":\"/a\"},"
	    "\"service_account_impersonation\":{\"token_lifetime_seconds\":"
	    "60}}", "not 600 to 43200");
	parse_fails(EXT "\"credential_source\":{\"file\":\"/a\"},"
	    "\"client_id\":\"c\"}", "client_id and client_secret go together");
	parse_fails("{\"type\":\"external_account\",\"subject_token_type\":"
	    "\"t\",\"credential_source\":{\"file\":\"/a\"}}", "no audience");
	parse_fails("{\"type\":\"external_account\",\"audience\":\"a\","
	    "\"credential_source\":{\"file\":\"/a\"}}",
	    "no subject_token_type");
	parse_fails(EXT "\"credential_source\":\"/a\"}",
	    "no credential_source object");
}

static void
test_subject(void **state)
{
	char	err[200], *t;

	(void)state;
	assert_non_null(t = gcp_subject_parse(LIT("eyJ.SUB.x\r\n"), NULL, err,
	    sizeof(err)));
	assert_string_equal(t, "eyJ.SUB.x");
	free(t);
	assert_null(gcp_subject_parse(LIT(" \n"), NULL, err, sizeof(err)));
	assert_string_equal(err, "empty");
	assert_non_null(t = gcp_subject_parse(LIT("{\"access_token\":"
	    "\"SECRET-s\",\"x\":1}"), "access_token", err, sizeof(err)));
	assert_string_equal(t, "SECRET-s");
	free(t);
	assert_null(gcp_subject_parse(LIT("{\"id_token\":\"SECRET\"}"),
	    "access_token", err, sizeof(err)));
	assert_non_null(strstr(err, "no string member \"access_token\""));
	assert_null(strstr(err, "SECRET"));
	assert_null(gcp_subject_parse(LIT("SECRET"), "f", err, sizeof(err)));
	assert_non_null(strstr(err, "not a JSON object"));
	assert_null(strstr(err, "SECRET"));
}

static void
test_iam_reply(void **state)
{
	char	*t;
	long	 life = 0;
	int64_t	 now = 1700000000;	/* 2023-11-14T22:13:20Z */

	(void)state;
	assert_non_null(t = gcp_iam_parse(LIT("{\"accessToken\":\"ya29.c\","
	    "\"expireTime\":\"2023-11-14T23:13:20Z\"}"), now, &life));
	assert_string_equal(t, "ya29.c");
	assert_int_equal(life, 3600);
	free(t);
	/* Fractions of a second, as Google writes them. */
	assert_non_null(t = gcp_iam_parse(LIT("{\"accessToken\":\"a\","
	    "\"expireTime\":\"2023-11-14T22:23:20.123456Z\"}"), now, &life));
	assert_int_equal(life, 600);
	free(t);
	/* Expired, no expiry, a token that would break the header. */
	assert_null(gcp_iam_parse(LIT("{\"accessToken\":\"a\",\"expireTime\":"
	    "\"2023-11-14T22:13:20Z\"}"), now, &life));
	assert_null(gcp_iam_parse(LIT("{\"accessToken\":\"a\"}"), now, &life));
	assert_null(gcp_iam_parse(LIT("{\"accessToken\":\"a\\nb\","
	    "\"expireTime\":\"2023-11-14T23:13:20Z\"}"), now, &life));
	assert_null(gcp_iam_parse(LIT("{\"access_token\":\"a\",\"expires_in\":"
	    "60}"), now, &life));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_user),
		cmocka_unit_test(test_external),
		cmocka_unit_test(test_subject),
		cmocka_unit_test(test_iam_reply),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
