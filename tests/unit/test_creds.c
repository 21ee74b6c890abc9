/* test_creds.c - the AWS credential chain's pure parts (creds*.c): its
 * order, the shared files, the container URL rule, the credentials JSON
 * and Expiration times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "outboxd.h"
#include "creds.h"

static char	dir[] = "/tmp/test_creds.XXXXXX";
static char	cred_path[128], conf_path[128];

static void
put(const char *path, const char *text)
{
	FILE	*f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
env_clear(void)
{
	static const char *const v[] = { "AWS_ACCESS_KEY_ID",
	    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
	    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
	    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
	    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_ROLE_ARN",
	    "AWS_ROLE_SESSION_NAME",
	    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_EC2_METADATA_DISABLED",
	    "AWS_EC2_METADATA_SERVICE_ENDPOINT", "OUTBOXD_ECS_ENDPOINT" };
	size_t	i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++)
		unsetenv(v[i]);
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred_path, 1);
	setenv("AWS_CONFIG_FILE", conf_path, 1);
}

/* The kind the chain picks for conf c now (-1: refused), described
 * (or the error) in desc. */
static int
pick(struct conf *c, char *desc, size_t len)
{
	struct creds_plan	p;
	char			err[400];
	int			k;

	if (creds_plan_make(c, &p, err, sizeof err) == -1) {
		creds_plan_clear(&p);
		snprintf(desc, len, "error: %s", err);
		return (-1);
	}
	creds_plan_describe(&p, desc, len);
	k = (int)p.kind;
	creds_plan_clear(&p);
	return (k);
}

/* One case per adjacent pair of the chain: the earlier source wins. */
static void
test_order(void **state)
{
	struct conf	c;
	char		d[512];

	(void)state;
	memset(&c, 0, sizeof c);
	env_clear();
	unlink(cred_path);
	unlink(conf_path);
	assert_int_equal(pick(&c, d, sizeof d), CREDS_IMDS);
	assert_non_null(strstr(d, "http://169.254.169.254"));
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	assert_int_equal(pick(&c, d, sizeof d), CREDS_NONE);
	unsetenv("AWS_EC2_METADATA_DISABLED");

	/* container over IMDS */
	setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds/x", 1);
	assert_int_equal(pick(&c, d, sizeof d), CREDS_CONTAINER);
	assert_non_null(strstr(d, "169.254.170.2"));
	/* web identity over container: STS, which needs a region */
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/t", 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/r", 1);
	assert_int_equal(pick(&c, d, sizeof d), -1);
	assert_non_null(strstr(d, "STS needs aws.region"));
	c.aws.region = "eu-west-1";
	c.aws.sts_endpoint = "https://sts.eu-west-1.amazonaws.com";
	assert_int_equal(pick(&c, d, sizeof d), CREDS_WEB_IDENTITY);
	assert_string_equal(d, "STS AssumeRoleWithWebIdentity, role "
	    "arn:aws:iam::1:role/r, token file /t, "
	    "https://sts.eu-west-1.amazonaws.com");
	unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
	/* profile over container */
	put(cred_path, "[default]\naws_access_key_id = PKEY\n"
	    "aws_secret_access_key = PSECRET\n");
	assert_int_equal(pick(&c, d, sizeof d), CREDS_PROFILE);
	assert_null(strstr(d, "PSECRET"));
	/* environment over profile */
	setenv("AWS_ACCESS_KEY_ID", "EKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ESECRET", 1);
	assert_int_equal(pick(&c, d, sizeof d), CREDS_ENV);
	/* aws.role_arn on top of the source found */
	c.aws.role_arn = "arn:aws:iam::2:role/x";
	c.aws.external_id = "ext-9";
	assert_int_equal(pick(&c, d, sizeof d), CREDS_ENV);
	assert_string_equal(d, "static keys from AWS_ACCESS_KEY_ID and "
	    "AWS_SECRET_ACCESS_KEY, then STS AssumeRole, role "
	    "arn:aws:iam::2:role/x (aws.role_arn) with an external id");
	assert_null(strstr(d, "ext-9"));
	c.aws.role_arn = NULL;
	c.aws.external_id = NULL;
	/* the aws section over the environment */
	c.aws.access_key_id = "CKEY";
	c.aws.secret_access_key = "CSECRET";
	assert_int_equal(pick(&c, d, sizeof d), CREDS_CONF);
	assert_null(strstr(d, "CSECRET"));
	env_clear();
}

static void
test_profile(void **state)
{
	struct conf		 c;
	struct creds_plan	 p;
	char			 err[512], *r;

	(void)state;
	memset(&c, 0, sizeof c);
	env_clear();
	put(cred_path, "# comment\n[other]\naws_access_key_id = O\n"
	    "aws_secret_access_key = other-secret-9f3c\n");
	put(conf_path, "[default]\nregion = eu-north-1\n"
	    "[profile proc]\ncredential_process = /bin/echo '{}'\n"
	    "region = ap-east-1\ns3 =\n  max_concurrent_requests = 2\n"
	    "[profile role]\nrole_arn = arn:aws:iam::1:role/r\n"
	    "source_profile = other\nexternal_id = ext-1\n"
	    "[profile web]\nrole_arn = arn:aws:iam::1:role/w\n"
	    "web_identity_token_file = /var/run/token\n"
	    "role_session_name = pod-a\n"
	    "[profile badsrc]\nrole_arn = arn:aws:iam::1:role/r\n"
	    "source_profile = proc\n"
	    "[profile nosrc]\nrole_arn = arn:aws:iam::1:role/r\n"
	    "[profile emptysrc]\nrole_arn = arn:aws:iam::1:role/r\n"
	    "source_profile = regiononly\n"
	    "[profile regiononly]\nregion = eu-west-3\n");
	c.aws.region = "eu-west-1";
	c.aws.sts_endpoint = "http://127.0.0.1:9";
	c.aws.profile = "proc";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.kind, CREDS_PROCESS);
	assert_string_equal(p.command, "/bin/echo '{}'");
	assert_string_equal(p.path, conf_path);
	creds_plan_clear(&p);
	r = creds_profile_region("proc", NULL);
	assert_string_equal(r, "ap-east-1");
	free(r);
	r = creds_profile_region(NULL, NULL);
	assert_string_equal(r, "eu-north-1");
	free(r);
	c.aws.profile = "other";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.kind, CREDS_PROFILE);
	assert_string_equal(p.access_key_id, "O");
	creds_plan_clear(&p);
	/* role_arn + source_profile: AssumeRole signed with its keys */
	c.aws.profile = "role";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.kind, CREDS_ASSUME_ROLE);
	assert_string_equal(p.role_arn, "arn:aws:iam::1:role/r");
	assert_string_equal(p.source_profile, "other");
	assert_string_equal(p.access_key_id, "O");
	assert_string_equal(p.secret_access_key, "other-secret-9f3c");
	assert_string_equal(p.external_id, "ext-1");
	assert_string_equal(p.path, cred_path);
	assert_string_equal(p.region, "eu-west-1");
	assert_int_equal(strncmp(p.session_name, "outboxd-", 8), 0);
	creds_plan_describe(&p, err, sizeof err);
	assert_non_null(strstr(err, "STS AssumeRole, role "
	    "arn:aws:iam::1:role/r, source profile other"));
	assert_null(strstr(err, "other-secret-9f3c"));
	creds_plan_clear(&p);
	/* role_arn + web_identity_token_file */
	c.aws.profile = "web";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.kind, CREDS_WEB_IDENTITY);
	assert_string_equal(p.token_file, "/var/run/token");
	assert_string_equal(p.session_name, "pod-a");
	assert_string_equal(p.sts_endpoint, "http://127.0.0.1:9");
	creds_plan_clear(&p);
	/* a source with credential_process: its answer signs AssumeRole */
	c.aws.profile = "badsrc";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.kind, CREDS_ASSUME_ROLE);
	assert_int_equal(p.src, CREDS_PROCESS);
	assert_string_equal(p.command, "/bin/echo '{}'");
	creds_plan_clear(&p);
	/* a source that holds nothing, no source at all: refused */
	c.aws.profile = "emptysrc";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "source_profile regiononly of AWS profile "
	    "emptysrc holds no aws_access_key_id"));
	creds_plan_clear(&p);
	c.aws.profile = "nosrc";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "without source_profile"));
	creds_plan_clear(&p);
	c.aws.profile = "missing";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "AWS profile missing is in neither"));
	creds_plan_clear(&p);
	env_clear();
}

/* source_profile chains, credential_source, cycles, duration_seconds */
static void
test_chain(void **state)
{
	struct conf		 c;
	struct creds_plan	 p;
	char			 err[1024];

	(void)state;
	memset(&c, 0, sizeof c);
	env_clear();
	put(cred_path, "[base]\naws_access_key_id = BKEY\n"
	    "aws_secret_access_key = BSECRET\n");
	put(conf_path, "[profile app]\nrole_arn = arn:aws:iam::1:role/app\n"
	    "source_profile = mid\nduration_seconds = 900\n"
	    "[profile mid]\nrole_arn = arn:aws:iam::1:role/mid\n"
	    "source_profile = base\nexternal_id = ext-mid\n"
	    "role_session_name = mid-s\n"
	    "[profile onenv]\nrole_arn = arn:aws:iam::1:role/env\n"
	    "credential_source = Environment\n"
	    "[profile onimds]\nrole_arn = arn:aws:iam::1:role/imds\n"
	    "credential_source = Ec2InstanceMetadata\n"
	    "[profile onecs]\nrole_arn = arn:aws:iam::1:role/ecs\n"
	    "credential_source = EcsContainer\n"
	    "[profile onmidenv]\nrole_arn = arn:aws:iam::1:role/top\n"
	    "source_profile = onenv\n"
	    "[profile bad]\nrole_arn = arn:aws:iam::1:role/b\n"
	    "credential_source = Ec2Metadata\n"
	    "[profile both]\nrole_arn = arn:aws:iam::1:role/b\n"
	    "credential_source = Environment\nsource_profile = base\n"
	    "[profile cyc-a]\nrole_arn = arn:aws:iam::1:role/a\n"
	    "source_profile = cyc-b\n"
	    "[profile cyc-b]\nrole_arn = arn:aws:iam::1:role/b\n"
	    "source_profile = cyc-a\n"
	    "[profile short]\nrole_arn = arn:aws:iam::1:role/s\n"
	    "source_profile = base\nduration_seconds = 899\n"
	    "[profile long]\nrole_arn = arn:aws:iam::1:role/l\n"
	    "source_profile = base\nduration_seconds = 43201\n"
	    "[profile chainlong]\nrole_arn = arn:aws:iam::1:role/cl\n"
	    "source_profile = mid\nduration_seconds = 7200\n"
	    "[profile webid]\nrole_arn = arn:aws:iam::1:role/w\n"
	    "web_identity_token_file = /var/run/t\nduration_seconds = 1800\n"
	    "[profile onweb]\nrole_arn = arn:aws:iam::1:role/ow\n"
	    "source_profile = webid\n");
	c.aws.region = "eu-west-1";
	c.aws.sts_endpoint = "http://127.0.0.1:9";

	/* app -> mid (a role) -> base (static keys): chained AssumeRole */
	c.aws.profile = "app";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.kind, CREDS_ASSUME_ROLE);
	assert_int_equal(p.src, CREDS_PROFILE);
	assert_string_equal(p.access_key_id, "BKEY");
	assert_int_equal(p.n_roles, 1);
	assert_string_equal(p.roles[0].role_arn, "arn:aws:iam::1:role/mid");
	assert_string_equal(p.roles[0].external_id, "ext-mid");
	assert_string_equal(p.roles[0].session_name, "mid-s");
	assert_string_equal(p.role_arn, "arn:aws:iam::1:role/app");
	assert_int_equal(p.duration, 900);
	creds_plan_describe(&p, err, sizeof err);
	assert_non_null(strstr(err, "STS AssumeRole, role "
	    "arn:aws:iam::1:role/app for 900 s, source profile mid: AssumeRole, "
	    "role arn:aws:iam::1:role/mid, source profile base ("));
	assert_non_null(strstr(err, "credentials), http://127.0.0.1:9"));
	assert_null(strstr(err, "BSECRET"));
	creds_plan_clear(&p);
	c.aws.profile = "onenv";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "credential_source Environment, but "
	    "AWS_ACCESS_KEY_ID"));
	creds_plan_clear(&p);
	setenv("AWS_ACCESS_KEY_ID", "EKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ESECRET", 1);
	/* the environment's keys win over any profile: AWS_PROFILE is only
	 * read when they are absent, so plan the profile itself */
	assert_int_equal(creds_profile_plan(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.kind, CREDS_ASSUME_ROLE);
	assert_int_equal(p.src, CREDS_ENV);
	assert_string_equal(p.access_key_id, "EKEY");
	creds_plan_describe(&p, err, sizeof err);
	assert_non_null(strstr(err, "role arn:aws:iam::1:role/env, "
	    "credential_source Environment (AWS_ACCESS_KEY_ID"));
	assert_null(strstr(err, "ESECRET"));
	creds_plan_clear(&p);
	/* a role source whose own source is credential_source */
	c.aws.profile = "onmidenv";
	assert_int_equal(creds_profile_plan(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.src, CREDS_ENV);
	assert_int_equal(p.n_roles, 1);
	assert_null(p.roles[0].source);
	creds_plan_clear(&p);
	env_clear();
	c.aws.profile = "onimds";
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:7/", 1);
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.src, CREDS_IMDS);
	assert_string_equal(p.url, "http://127.0.0.1:7");
	creds_plan_describe(&p, err, sizeof err);
	assert_non_null(strstr(err, "credential_source Ec2InstanceMetadata "
	    "(http://127.0.0.1:7)"));
	creds_plan_clear(&p);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "instance metadata is off"));
	creds_plan_clear(&p);
	c.aws.profile = "onecs";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "EcsContainer, but neither"));
	creds_plan_clear(&p);
	setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/c", 1);
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.src, CREDS_CONTAINER);
	assert_string_equal(p.url, "http://169.254.170.2/v2/c");
	creds_plan_clear(&p);
	env_clear();
	c.aws.profile = "bad";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "not Environment, Ec2InstanceMetadata or "
	    "EcsContainer"));
	creds_plan_clear(&p);
	c.aws.profile = "both";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "sets both source_profile and "
	    "credential_source"));
	creds_plan_clear(&p);
	/* a cycle, named */
	c.aws.profile = "cyc-a";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "make a cycle: cyc-a -> cyc-b -> cyc-a"));
	creds_plan_clear(&p);
	/* duration_seconds: STS's range, one hour when chained */
	c.aws.profile = "short";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "duration_seconds of AWS profile short is "
	    "not a number of seconds from 900 to 43200"));
	creds_plan_clear(&p);
	c.aws.profile = "long";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "from 900 to 43200"));
	creds_plan_clear(&p);
	c.aws.profile = "chainlong";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "role arn:aws:iam::1:role/cl is over 3600 "
	    "s, but it is assumed with role credentials"));
	creds_plan_clear(&p);
	/* a web identity profile as the source */
	c.aws.profile = "onweb";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.src, CREDS_WEB_IDENTITY);
	assert_string_equal(p.src_role_arn, "arn:aws:iam::1:role/w");
	assert_int_equal(p.src_duration, 1800);
	assert_string_equal(p.token_file, "/var/run/t");
	creds_plan_clear(&p);
	c.aws.profile = "webid";
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.kind, CREDS_WEB_IDENTITY);
	assert_int_equal(p.duration, 1800);
	creds_plan_clear(&p);
	/* aws.duration_seconds on aws.role_arn */
	c.aws.profile = "base";
	c.aws.role_arn = "arn:aws:iam::2:role/top";
	c.aws.duration_seconds = 1200;
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), 0);
	assert_int_equal(p.top.duration, 1200);
	creds_plan_describe(&p, err, sizeof err);
	assert_non_null(strstr(err, "(aws.role_arn) for 1200 s"));
	creds_plan_clear(&p);
	c.aws.profile = "app";
	c.aws.duration_seconds = 3601;
	assert_int_equal(creds_plan_make(&c, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "arn:aws:iam::2:role/top is over 3600"));
	creds_plan_clear(&p);
	env_clear();
}

static void
test_container_url(void **state)
{
	(void)state;
	assert_int_equal(creds_container_url_ok("http://127.0.0.1:8/c"), 0);
	assert_int_equal(creds_container_url_ok("http://127.9.9.9/c"), 0);
	assert_int_equal(creds_container_url_ok("http://localhost/c"), 0);
	assert_int_equal(creds_container_url_ok("http://[::1]:80/c"), 0);
	assert_int_equal(creds_container_url_ok(
	    "http://169.254.170.23/v1/credentials"), 0);
	assert_int_equal(creds_container_url_ok("http://[fd00:ec2::23]/"), 0);
	assert_int_equal(creds_container_url_ok("https://creds.example/"), 0);
	assert_int_equal(creds_container_url_ok("http://10.0.0.1/c"), -1);
	assert_int_equal(creds_container_url_ok("http://128.0.0.1/c"), -1);
	assert_int_equal(creds_container_url_ok(
	    "http://127.0.0.1.evil.example/"), -1);
	assert_int_equal(creds_container_url_ok("http://u@127.0.0.1/"), -1);
	assert_int_equal(creds_container_url_ok("ftp://127.0.0.1/"), -1);
}

static void
test_time(void **state)
{
	(void)state;
	assert_int_equal(creds_time_parse("1970-01-01T00:01:00Z"), 60);
	assert_int_equal(creds_time_parse("2024-05-01T12:00:00Z"),
	    1714564800);
	assert_int_equal(creds_time_parse("2024-05-01T12:00:00.123Z"),
	    1714564800);
	assert_int_equal(creds_time_parse("2024-05-01T14:00:00+02:00"),
	    1714564800);
	assert_int_equal(creds_time_parse("2024-05-01 12:00:00Z"), -1);
	assert_int_equal(creds_time_parse("2024-05-01T12:00:00"), -1);
	assert_int_equal(creds_time_parse("2024-13-01T12:00:00Z"), -1);
	assert_int_equal(creds_time_parse("2024-05-01T12:00:00Zjunk"), -1);
}

static struct creds_got	last;
static char		last_err[256];
static int		calls;

static void
got_cb(const struct creds_got *g, const char *err)
{
	calls++;
	memset(&last, 0, sizeof last);
	last_err[0] = '\0';
	if (g != NULL) {
		last.expiration = g->expiration;
		last.session_token = g->session_token != NULL ? "set" : NULL;
	} else
		snprintf(last_err, sizeof last_err, "%s", err);
}

#define JSON(s)	creds_json_done(s, strlen(s), "t", got_cb)

static void
test_json(void **state)
{
	(void)state;
	JSON("{\"Code\":\"Success\",\"AccessKeyId\":\"A\",\"SecretAccessKey\":"
	    "\"S\",\"Token\":\"T\",\"Expiration\":\"1970-01-01T00:02:00Z\"}");
	assert_int_equal(last.expiration, 120);
	assert_non_null(last.session_token);
	JSON("{\"Version\":1,\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\"}");
	assert_int_equal(last.expiration, 0);
	assert_string_equal(last_err, "");
	JSON("{\"Version\":2,\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\"}");
	assert_non_null(strstr(last_err, "Version is not 1"));
	/* Container and IMDS credentials always expire. */
	JSON("{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\",\"Token\":\"T\"}");
	assert_non_null(strstr(last_err, "no Expiration"));
	JSON("{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"TOPSECRET\","
	    "\"Expiration\":\"soon\"}");
	assert_non_null(strstr(last_err, "not an ISO 8601"));
	assert_null(strstr(last_err, "TOPSECRET"));
	JSON("{\"Code\":\"Failure\",\"AccessKeyId\":\"A\"}");
	assert_non_null(strstr(last_err, "Code is"));
	JSON("SECRET not json");
	assert_null(strstr(last_err, "SECRET"));
	assert_int_equal(calls, 7);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_profile),
		cmocka_unit_test(test_chain),
		cmocka_unit_test(test_container_url),
		cmocka_unit_test(test_time),
		cmocka_unit_test(test_json),
	};
	int	rv;

	if (mkdtemp(dir) == NULL)
		return (1);
	snprintf(cred_path, sizeof cred_path, "%s/credentials", dir);
	snprintf(conf_path, sizeof conf_path, "%s/config", dir);
	rv = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(cred_path);
	unlink(conf_path);
	rmdir(dir);
	return (rv);
}
