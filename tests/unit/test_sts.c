/*
 * test_sts.c - the STS codec (sts.c): the AssumeRole and
 * AssumeRoleWithWebIdentity form bodies decoded back field by field, with
 * their required values refused when missing; the Credentials of each
 * reply, namespace prefixes, an ErrorResponse; and replies that must be
 * refused: the other action's root, a field missing, empty or twice, a
 * token over STS_TEXT_MAX, malformed, truncated, a DOCTYPE with entities.
 * The replies follow the examples of the AWS STS API reference.
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

#include "sts.h"

#define ROLE	"arn:aws:iam::123456789012:role/demo"
#define NS	"xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\""
#define CREDS	"<Credentials>" \
		"<SessionToken>AQoDYXdzEPT//////////wEXAMPLEtc764</SessionToken>" \
		"<SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY" \
		"</SecretAccessKey><Expiration>2011-07-15T23:28:33.359Z" \
		"</Expiration><AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>" \
		"</Credentials>"
#define AR_OK	"<AssumeRoleResponse " NS "><AssumeRoleResult>" \
		"<SourceIdentity>DevUser123</SourceIdentity>" \
		"<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/" \
		"demo/John</Arn><AssumedRoleId>ARO123EXAMPLE123:John" \
		"</AssumedRoleId></AssumedRoleUser>" CREDS \
		"<PackedPolicySize>8</PackedPolicySize></AssumeRoleResult>" \
		"<ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-" \
		"cbc7ccf896c7</RequestId></ResponseMetadata>" \
		"</AssumeRoleResponse>"
#define WI_OK	"<AssumeRoleWithWebIdentityResponse " NS ">" \
		"<AssumeRoleWithWebIdentityResult>" \
		"<SubjectFromWebIdentityToken>amzn1.account.AF6RHO7KZU5XRVQJ" \
		"GXK6HB56KR2A</SubjectFromWebIdentityToken>" \
		"<Audience>client.5498841531868486423.1548@apps.example.com" \
		"</Audience>" CREDS "<Provider>www.amazon.com</Provider>" \
		"</AssumeRoleWithWebIdentityResult>" \
		"</AssumeRoleWithWebIdentityResponse>"
#define ERR	"<ErrorResponse " NS "><Error><Type>Sender</Type>" \
		"<Code>InvalidIdentityToken</Code><Message>No OpenIDConnect " \
		"provider found in your account</Message></Error>" \
		"<RequestId>r-1</RequestId></ErrorResponse>"

/* The decoded value of key in the form body b (malloc'd), or NULL. */
static char *
form_get(const char *b, const char *key)
{
	size_t		 klen = strlen(key);
	const char	*p = b, *v, *e;
	char		*out, *o;
	unsigned int	 c;

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
	out = malloc((size_t)(e - v) + 1);
	assert_non_null(out);
	for (o = out; v < e; v++) {
		if (*v == '%') {
			assert_int_equal(sscanf(v + 1, "%2X", &c), 1);
			*o++ = (char)c;
			v += 2;
		} else
			*o++ = *v;
	}
	*o = '\0';
	return out;
}

static void
check_field(const char *body, const char *key, const char *want)
{
	char	*v = form_get(body, key);

	if (want == NULL) {
		assert_null(v);
		return;
	}
	assert_non_null(v);
	assert_string_equal(v, want);
	free(v);
}

static void
test_body_assume_role(void **state)
{
	char	*b;

	(void)state;
	b = sts_body(STS_ASSUME_ROLE, ROLE, "outboxd", "ext id/&=+", 900);
	assert_non_null(b);
	check_field(b, "Action", "AssumeRole");
	check_field(b, "Version", "2011-06-15");
	check_field(b, "RoleArn", ROLE);
	check_field(b, "RoleSessionName", "outboxd");
	check_field(b, "DurationSeconds", "900");
	check_field(b, "ExternalId", "ext id/&=+");
	check_field(b, "WebIdentityToken", NULL);
	/* reserved characters are encoded, RFC 3986 */
	assert_non_null(strstr(b, "ExternalId=ext%20id%2F%26%3D%2B"));
	assert_non_null(strstr(b, "RoleArn=arn%3Aaws%3Aiam%3A%3A"));
	free(b);
	b = sts_body(STS_ASSUME_ROLE, ROLE, "s", NULL, 0);
	assert_non_null(b);
	check_field(b, "ExternalId", NULL);
	check_field(b, "DurationSeconds", NULL);
	free(b);
}

static void
test_body_web_identity(void **state)
{
	char	*b;

	(void)state;
	b = sts_body(STS_ASSUME_ROLE_WEB_IDENTITY, ROLE, "pod-1",
	    "eyJhbGciOi.eyJzdWIi.c2ln+/=", 3600);
	assert_non_null(b);
	check_field(b, "Action", "AssumeRoleWithWebIdentity");
	check_field(b, "Version", "2011-06-15");
	check_field(b, "RoleArn", ROLE);
	check_field(b, "RoleSessionName", "pod-1");
	check_field(b, "WebIdentityToken", "eyJhbGciOi.eyJzdWIi.c2ln+/=");
	check_field(b, "ExternalId", NULL);
	free(b);
	/* the token, the role and the session name are required */
	assert_null(sts_body(STS_ASSUME_ROLE_WEB_IDENTITY, ROLE, "s", NULL, 0));
	assert_null(sts_body(STS_ASSUME_ROLE_WEB_IDENTITY, ROLE, "s", "", 0));
	assert_null(sts_body(STS_ASSUME_ROLE, NULL, "s", NULL, 0));
	assert_null(sts_body(STS_ASSUME_ROLE, "", "s", NULL, 0));
	assert_null(sts_body(STS_ASSUME_ROLE, ROLE, "", NULL, 0));
	assert_null(sts_body(STS_ASSUME_ROLE, ROLE, NULL, NULL, 0));
}

static void
check_creds(const struct sts_creds *c)
{
	assert_string_equal(c->access_key_id, "ASIAIOSFODNN7EXAMPLE");
	assert_string_equal(c->secret_access_key,
	    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY");
	assert_string_equal(c->session_token,
	    "AQoDYXdzEPT//////////wEXAMPLEtc764");
	assert_string_equal(c->expiration, "2011-07-15T23:28:33.359Z");
}

static void
test_parse_ok(void **state)
{
	struct sts_creds	 c;
	const char		*why = "x";
	const char		*pre = "<?xml version=\"1.0\"?>\n<s:AssumeRoleResponse "
	    "xmlns:s=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
	    "<s:AssumeRoleResult><s:Credentials>"
	    "<s:AccessKeyId>ASIAIOSFODNN7EXAMPLE</s:AccessKeyId>"
	    "<s:SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
	    "</s:SecretAccessKey><s:SessionToken>AQoDYXdzEPT//////////"
	    "wEXAMPLEtc764</s:SessionToken><s:Expiration>2011-07-15T23:28:"
	    "33.359Z</s:Expiration></s:Credentials></s:AssumeRoleResult>"
	    "</s:AssumeRoleResponse>";

	(void)state;
	assert_int_equal(sts_creds_parse(STS_ASSUME_ROLE, AR_OK,
	    strlen(AR_OK), &c, &why), 0);
	check_creds(&c);
	sts_creds_clear(&c);
	assert_null(c.access_key_id);
	assert_null(c.session_token);
	assert_int_equal(sts_creds_parse(STS_ASSUME_ROLE_WEB_IDENTITY, WI_OK,
	    strlen(WI_OK), &c, &why), 0);
	check_creds(&c);
	sts_creds_clear(&c);
	/* a prefix names the namespace: the local names count */
	assert_int_equal(sts_creds_parse(STS_ASSUME_ROLE, pre, strlen(pre),
	    &c, &why), 0);
	check_creds(&c);
	sts_creds_clear(&c);
	sts_creds_clear(&c);	/* twice: nothing left to free */
}

static void
refused(enum sts_action a, const char *xml, size_t len, const char *reason)
{
	struct sts_creds	 c;
	const char		*why = NULL;

	assert_int_equal(sts_creds_parse(a, xml, len, &c, &why), -1);
	assert_null(c.access_key_id);
	assert_null(c.secret_access_key);
	assert_null(c.session_token);
	assert_null(c.expiration);
	assert_non_null(why);
	if (reason != NULL)
		assert_non_null(strstr(why, reason));
	/* never the reply's text */
	assert_null(strstr(why, "EXAMPLE"));
}

static char *
replace(const char *s, const char *from, const char *to)
{
	const char	*p = strstr(s, from);
	char		*out;

	assert_non_null(p);
	out = malloc(strlen(s) - strlen(from) + strlen(to) + 1);
	assert_non_null(out);
	sprintf(out, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
	return out;
}

static void
test_parse_refused(void **state)
{
	char	*x, *big;
	size_t	 n;

	(void)state;
	/* the other action's reply, an error reply */
	refused(STS_ASSUME_ROLE, WI_OK, strlen(WI_OK), "root");
	refused(STS_ASSUME_ROLE_WEB_IDENTITY, AR_OK, strlen(AR_OK), "root");
	refused(STS_ASSUME_ROLE, ERR, strlen(ERR), "root");
	/* truncated, empty, not XML */
	refused(STS_ASSUME_ROLE, AR_OK, strlen(AR_OK) - 10, NULL);
	refused(STS_ASSUME_ROLE, AR_OK, 0, NULL);
	refused(STS_ASSUME_ROLE, "{\"Credentials\":{}}", 18, NULL);
	/* a field missing, empty, or twice */
	x = replace(AR_OK, "<SessionToken>AQoDYXdzEPT//////////wEXAMPLEtc764"
	    "</SessionToken>", "");
	refused(STS_ASSUME_ROLE, x, strlen(x), "lacks");
	free(x);
	x = replace(AR_OK, "<AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>",
	    "<AccessKeyId></AccessKeyId>");
	refused(STS_ASSUME_ROLE, x, strlen(x), "lacks");
	free(x);
	x = replace(AR_OK, "</Credentials>", "<AccessKeyId>ASIAOTHEREXAMPLE"
	    "</AccessKeyId></Credentials>");
	refused(STS_ASSUME_ROLE, x, strlen(x), "twice");
	free(x);
	x = replace(AR_OK, "</AssumeRoleResult>", CREDS "</AssumeRoleResult>");
	refused(STS_ASSUME_ROLE, x, strlen(x), "twice");
	free(x);
	/* Credentials elsewhere than in the Result do not count */
	big = replace(AR_OK, "<AssumeRoleResult>", "<Other>");
	x = replace(big, "</AssumeRoleResult>", "</Other>");
	free(big);
	refused(STS_ASSUME_ROLE, x, strlen(x), "lacks");
	free(x);
	/* a token longer than STS_TEXT_MAX is refused, not cut */
	n = STS_TEXT_MAX + 2;
	big = malloc(n + 1);
	assert_non_null(big);
	memset(big, 'A', n);
	big[n] = '\0';
	x = replace(AR_OK, "AQoDYXdzEPT//////////wEXAMPLEtc764", big);
	refused(STS_ASSUME_ROLE, x, strlen(x), "too long");
	free(x);
	/* ... while one of STS_TEXT_MAX bytes is taken */
	big[STS_TEXT_MAX] = '\0';
	x = replace(AR_OK, "AQoDYXdzEPT//////////wEXAMPLEtc764", big);
	{
		struct sts_creds	 c;
		const char		*why;

		assert_int_equal(sts_creds_parse(STS_ASSUME_ROLE, x, strlen(x),
		    &c, &why), 0);
		assert_int_equal(strlen(c.session_token), STS_TEXT_MAX);
		sts_creds_clear(&c);
	}
	free(x);
	free(big);
}

static void
test_doctype(void **state)
{
	const char	*laughs = "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY a "
	    "\"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]>"
	    "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>"
	    "&b;</AccessKeyId></Credentials></AssumeRoleResult>"
	    "</AssumeRoleResponse>";
	const char	*ext = "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x "
	    "SYSTEM \"file:///etc/passwd\">]><ErrorResponse><Error><Code>&x;"
	    "</Code></Error></ErrorResponse>";
	struct sts_error e;

	(void)state;
	refused(STS_ASSUME_ROLE, laughs, strlen(laughs), "document type");
	assert_int_equal(sts_error_parse(ext, strlen(ext), &e), -1);
	assert_string_equal(e.code, "");
}

static void
test_error(void **state)
{
	struct sts_error	 e;
	char			*x, *big;

	(void)state;
	assert_int_equal(sts_error_parse(ERR, strlen(ERR), &e), 0);
	assert_string_equal(e.type, "Sender");
	assert_string_equal(e.code, "InvalidIdentityToken");
	assert_string_equal(e.message,
	    "No OpenIDConnect provider found in your account");
	/* not an error reply: cleared */
	assert_int_equal(sts_error_parse(AR_OK, strlen(AR_OK), &e), -1);
	assert_string_equal(e.code, "");
	assert_int_equal(sts_error_parse(ERR, strlen(ERR) - 5, &e), -1);
	assert_string_equal(e.type, "");
	/* a long message is cut, NUL-terminated */
	big = malloc(STS_ERR_LEN * 3);
	assert_non_null(big);
	memset(big, 'm', STS_ERR_LEN * 3 - 1);
	big[STS_ERR_LEN * 3 - 1] = '\0';
	x = replace(ERR, "No OpenIDConnect provider found in your account", big);
	assert_int_equal(sts_error_parse(x, strlen(x), &e), 0);
	assert_int_equal(strlen(e.message), STS_ERR_LEN - 1);
	assert_string_equal(e.code, "InvalidIdentityToken");
	free(x);
	free(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_body_assume_role),
		cmocka_unit_test(test_body_web_identity),
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_parse_refused),
		cmocka_unit_test(test_doctype),
		cmocka_unit_test(test_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
