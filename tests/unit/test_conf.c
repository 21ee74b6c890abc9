/*
 * test_conf.c - configuration loading: a good file, defaults, the
 * environment fallback for AWS settings, and each kind of bad file with
 * the FILE:LINE the operator needs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "outboxd.h"
#include "broker.h"
#include "conf.h"

static char	tmpl[] = "/tmp/outboxd-conf-XXXXXX";
static char	path[64];

/* Write text to a fresh temporary file; path holds its name. */
static const char *
write_conf(const char *text)
{
	FILE	*fp;
	int	 fd;

	snprintf(path, sizeof(path), "%s", tmpl);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	return path;
}

static void
clear_env(void)
{
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");
	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_ENDPOINT_URL_SQS");
	unsetenv("AWS_ENDPOINT_URL_DYNAMODB");
	unsetenv("AWS_ENDPOINT_URL_SNS");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("PUBSUB_EMULATOR_HOST");
	/* The rest of the credential chain (creds.c), absent. */
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
	unsetenv("AWS_EC2_METADATA_DISABLED");
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
}

static const char good[] =
    "###\n"
    "database = \"postgresql://u@127.0.0.1:5432/db\"\n"
    "shutdown_timeout = 5000\n"
    "http {\n"
    "	listen = \"127.0.0.1:18080\"\n"
    "	workers = 3\n"
    "	max_body_size = 4096\n"
    "}\n"
    "relay { workers = 4 batch_size = 10 poll_interval = 250 }\n"
    "consumer { workers = 2 wait_time = 5 }\n"
    "aws {\n"
    "	region = \"eu-west-1\"\n"
    "	endpoint_url = \"http://127.0.0.1:4566/\"\n"
    "	access_key_id = \"AKID\"\n"
    "	secret_access_key = \"SECRET\"\n"
    "	session_token = \"TOKEN\"\n"
    "}\n"
    "sqs { queue_url = \"http://127.0.0.1:4566/000000000000/q\" }\n"
    "dynamodb {\n"
    "	table = \"fulfillments\"\n"
    "	endpoint_url = \"http://127.0.0.1:8000\"\n"
    "}\n";

static void
test_good_file(void **state)
{
	struct conf	*c;
	char		 err[512];

	(void)state;
	clear_env();
	assert_int_equal(conf_load(write_conf(good), &c, err, sizeof(err)),
	    0);
	unlink(path);
	assert_string_equal(c->database, "postgresql://u@127.0.0.1:5432/db");
	assert_int_equal(c->shutdown_timeout, 5000);
	assert_string_equal(c->http.host, "127.0.0.1");
	assert_string_equal(c->http.port, "18080");
	assert_int_equal(c->http.workers, 3);
	assert_int_equal(c->http.max_body_size, 4096);
	assert_int_equal(c->relay.workers, 4);
	assert_int_equal(c->relay.poll_interval, 250);
	assert_int_equal(c->consumer.workers, 2);
	assert_int_equal(c->consumer.wait_time, 5);
	assert_string_equal(c->aws.region, "eu-west-1");
	/* trailing '/' trimmed; per-service setting beats the global one */
	assert_string_equal(c->aws.sqs_endpoint, "http://127.0.0.1:4566");
	assert_string_equal(c->aws.dynamodb_endpoint, "http://127.0.0.1:8000");
	assert_string_equal(c->aws.session_token, "TOKEN");
	assert_string_equal(c->dynamodb_table, "fulfillments");
	conf_free(c);
}

static void
test_defaults_and_env(void **state)
{
	struct conf	*c;
	char		 err[512];

	(void)state;
	clear_env();
	setenv("AWS_DEFAULT_REGION", "ap-south-1", 1);
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
	setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9324", 1);
	assert_int_equal(conf_load(write_conf(
	    "database = \"dbname=x\"\n"
	    "sqs { queue_url = \"https://sqs.ap-south-1.amazonaws.com/1/q\" }\n"),
	    &c, err, sizeof(err)), 0);
	unlink(path);
	assert_int_equal(c->http.workers, 2);
	assert_int_equal(c->relay.batch_size, 100);
	assert_int_equal(c->relay.poll_interval, 1000);
	assert_int_equal(c->consumer.wait_time, 20);
	assert_int_equal(c->http.max_body_size, 65536);
	assert_string_equal(c->aws.region, "ap-south-1");
	/* The environment's keys are the chain's, not the file's. */
	assert_null(c->aws.access_key_id);
	assert_null(c->aws.session_token);
	assert_non_null(strstr(c->aws.source, "AWS_ACCESS_KEY_ID"));
	assert_null(strstr(c->aws.source, "ENVSECRET"));
	assert_string_equal(c->aws.sqs_endpoint, "http://127.0.0.1:9324");
	/* no endpoint anywhere: the real AWS endpoint of the region */
	assert_string_equal(c->aws.dynamodb_endpoint,
	    "https://dynamodb.ap-south-1.amazonaws.com");
	assert_string_equal(c->aws.sns_endpoint,
	    "https://sns.ap-south-1.amazonaws.com");
	conf_free(c);

	/* SNS: sns.endpoint_url, then aws.endpoint_url, then
	 * AWS_ENDPOINT_URL_SNS, then AWS_ENDPOINT_URL */
	setenv("AWS_ENDPOINT_URL_SNS", "http://127.0.0.1:9911/", 1);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9999", 1);
	assert_int_equal(conf_load(write_conf(
	    "database = \"dbname=x\"\n"
	    "sqs { queue_url = \"https://sqs.ap-south-1.amazonaws.com/1/q\" }\n"),
	    &c, err, sizeof(err)), 0);
	unlink(path);
	assert_string_equal(c->aws.sns_endpoint, "http://127.0.0.1:9911");
	conf_free(c);
	assert_int_equal(conf_load(write_conf(
	    "database = \"dbname=x\"\n"
	    "aws { endpoint_url = \"http://127.0.0.1:4566\" }\n"
	    "sqs { queue_url = \"https://sqs.ap-south-1.amazonaws.com/1/q\" }\n"),
	    &c, err, sizeof(err)), 0);
	unlink(path);
	assert_string_equal(c->aws.sns_endpoint, "http://127.0.0.1:4566");
	conf_free(c);
	assert_int_equal(conf_load(write_conf(
	    "database = \"dbname=x\"\n"
	    "aws { endpoint_url = \"http://127.0.0.1:4566\" }\n"
	    "sns { endpoint_url = \"http://127.0.0.1:4575/\" }\n"
	    "sqs { queue_url = \"https://sqs.ap-south-1.amazonaws.com/1/q\" }\n"),
	    &c, err, sizeof(err)), 0);
	unlink(path);
	assert_string_equal(c->aws.sns_endpoint, "http://127.0.0.1:4575");
	conf_free(c);
	unsetenv("AWS_ENDPOINT_URL_SNS");
	assert_int_equal(conf_load(write_conf(
	    "database = \"dbname=x\"\n"
	    "sqs { queue_url = \"https://sqs.ap-south-1.amazonaws.com/1/q\" }\n"),
	    &c, err, sizeof(err)), 0);
	unlink(path);
	assert_string_equal(c->aws.sns_endpoint, "http://127.0.0.1:9999");
	conf_free(c);
	unsetenv("AWS_ENDPOINT_URL");

	/* the file wins over the environment */
	setenv("AWS_REGION", "us-west-2", 1);
	assert_int_equal(conf_load(write_conf(
	    "database = \"dbname=x\"\n"
	    "aws { access_key_id = \"FILEKEY\" secret_access_key = \"S\" }\n"
	    "sqs { queue_url = \"https://sqs.us-west-2.amazonaws.com/1/q\" }\n"),
	    &c, err, sizeof(err)), 0);
	unlink(path);
	assert_string_equal(c->aws.region, "us-west-2");
	assert_string_equal(c->aws.access_key_id, "FILEKEY");
	assert_non_null(strstr(c->aws.source, "aws section"));
	conf_free(c);
	clear_env();
}

/* A bad file is refused with the expected "FILE:LINE: ..." text. */
static void	expect_error_env(const char *, int, const char *);

static void
expect_error(const char *text, int line, const char *fragment)
{
	clear_env();
	expect_error_env(text, line, fragment);
}

/* expect_error in the environment as the caller left it. */
static void
expect_error_env(const char *text, int line, const char *fragment)
{
	struct conf	*c = NULL;
	char		 err[512], want[128];

	assert_int_equal(conf_load(write_conf(text), &c, err, sizeof(err)),
	    -1);
	unlink(path);
	assert_null(c);
	if (line > 0)
		snprintf(want, sizeof(want), "%s:%d: ", path, line);
	else
		snprintf(want, sizeof(want), "%s: ", path);
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("error \"%s\" does not start with \"%s\"", err, want);
	if (strstr(err, fragment) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", err, fragment);
}

#define AWSOK								\
    "aws { region = \"us-east-1\" access_key_id = \"a\" "		\
    "secret_access_key = \"s\" }\n"					\
    "sqs { queue_url = \"http://127.0.0.1:1/0/q\" }\n"

static void
test_bad_files(void **state)
{
	(void)state;
	expect_error("database = \"x\"\nbogus = 1\n", 2, "bogus");
	expect_error("database = \"x\"\nhttp {\n  workers = \"x\"\n}\n", 3,
	    "workers");
	/* libconfuse's text, with what a boolean takes. */
	expect_error("database = \"x\"\nrelay {\n  handoff = maybe\n}\n", 3,
	    "invalid boolean value for option 'handoff' (expected true or "
	    "false; also yes/no, on/off)");
	expect_error("database = \"x\"\nhttp { workers = 0 }\n"
	    "relay { workers = 65 }\n", 3, "out of range");
	expect_error("# c\ndatabase = \"unterminated\nhttp { workers = 1 }\n",
	    2, "unterminated string");
	/* comments do not shift line numbers (libconfuse 3.3 alone
	 * counts each comment line more than once) */
	expect_error("# one\n# two\n// three\n/* four\nfive */\n"
	    "database = \"x\" # tail\nbogus = 1\n", 7, "bogus");
	/* an unterminated string is reported where it opens, even when
	 * later quotes pair up after it */
	expect_error("# c\n# c\ndatabase = \"x\nhttp {\n listen = \"a:1\"\n"
	    " workers = 2\n}\nsqs { queue_url = \"http://q\" }\n", 3,
	    "unterminated string");
	/* '#' inside a string is not a comment */
	expect_error("database = \"a#b\"\nhttp { workers = -1 }\n", 2,
	    "out of range");
	expect_error("database = \"x\"\nhttp { listen = \"nohostport\" }\n", 2,
	    "host:port");
	expect_error("database = \"x\"\nhttp { listen = \"h:99999\" }\n", 2,
	    "host:port");
	/* brackets hold an IPv6 address */
	expect_error("database = \"x\"\nhttp { listen = \"[zz]:80\" }\n", 2,
	    "listen = \"[zz]:80\": expected \"host:port\"");
	/* checks made once the file is read, at their key's line */
	expect_error("database = \"x\"\nconsumer { workers = 0 }\n"
	    "relay { workers = 0 }\nadmin {\n\tlisten = \"127.0.0.1:1\"\n"
	    "\ttoken = \"short\"\n}\n", 6,
	    "admin.token is shorter than 16 characters");
	expect_error("database = \"x\"\nconsumer { workers = 0 }\n"
	    "relay { workers = 0 }\nadmin {\n\tlisten = \"127.0.0.1:1\"\n}\n",
	    5, "admin.listen is set but admin.token is not");
	expect_error("database = \"x\"\nsqs { queue_url = \"http://h/0/q\" }\n"
	    "aws {\n\taccess_key_id = \"a\"\n\tsecret_access_key = \"s\"\n"
	    "\tregion = \"Not_A_Region\"\n}\n", 6, "the region from "
	    "aws.region is not a region name");
	expect_error("database = \"x\"\nsqs { queue_url = \"http://h/0/q\" }\n"
	    "aws {\n\tregion = \"us-east-1\"\n\trole_arn = \"nope\"\n}\n", 5,
	    "aws.role_arn is not an ARN");
	expect_error("database = \"x\"\nconsumer { wait_time = 21 }\n", 2,
	    "wait_time");
	expect_error("database = \"x\"\nlog_level = \"loud\"\n", 2,
	    "log_level");
	expect_error("database = \"x\"\nsqs { queue_url = \"ftp://q\" }\n", 2,
	    "queue_url");
	expect_error("database = \"x\"\nrelay { workers = 99999999999999999999"
	    " }\n", 2, "");
	expect_error("http { workers = 1 }\n", 0, "database is not set");
	expect_error("database = \"x\"\nrelay { lease = 5000 timeout = 5000 }\n"
	    AWSOK, 2, "relay.lease");
	/* Longer than the timeout is not enough: claims and the wait for a
	 * free request need their share of the lease too. */
	expect_error("database = \"x\"\nrelay { lease = 5000 timeout = 3000 }\n"
	    AWSOK, 2, "at least twice the sink's timeout (relay.timeout");
	/* at webhook.timeout's line: relay.lease is not written */
	expect_error("database = \"x\"\nrelay { sink = \"http\" }\n"
	    "webhook { url = \"http://h/\" secret = \"s\" timeout = 20000 }\n",
	    3, "(webhook.timeout = 20000 ms)");
	expect_error("database = \"x\"\n", 0, "sqs.queue_url is not set");
	expect_error("database = \"x\"\nrelay { sink = \"http\" }\n", 0,
	    "webhook.url");
	expect_error("database = \"x\"\nrelay { sink = \"http\" }\n"
	    "webhook { url = \"http://h/\" secret = \"whsec_%%%\" }\n", 0,
	    "webhook.secret");
	expect_error("database = \"x\"\nrelay { sink = \"kafka\" }\n", 2,
	    "relay.sink");
	/* No region anywhere: instance metadata is the last source
	 * (the workers read it), so only with it off is that fatal. */
	clear_env();
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	expect_error_env("database = \"x\"\n"
	    "sqs { queue_url = \"http://h/0/q\" }\n", 0, "aws.region");
	/* Instance metadata may come later: only its absence is fatal. */
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	expect_error_env("database = \"x\"\nsqs { queue_url = \"http://h/0/q\" }\n"
	    "aws { region = \"r\" }\n", 0, "no AWS credentials");
	expect_error("database = \"x\"\nsqs { queue_url = \"http://h/0/q\" }\n"
	    "aws { region = \"r\" access_key_id = \"A\" }\n", 0,
	    "aws section sets an access key id but not the secret");
	setenv("AWS_PROFILE", "nosuch", 1);
	expect_error_env("database = \"x\"\nsqs { queue_url = \"http://h/0/q\" }\n"
	    "aws { region = \"r\" }\n", 0, "AWS profile nosuch is in neither");
	clear_env();
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.0.0.1/creds", 1);
	expect_error_env("database = \"x\"\nsqs { queue_url = \"http://h/0/q\" }\n"
	    "aws { region = \"r\" }\n", 0, "refuse over plain http");
	clear_env();
}

static void
test_missing_file(void **state)
{
	struct conf	*c;
	char		 err[512];

	(void)state;
	assert_int_equal(conf_load("/nonexistent/outbox.conf", &c, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/outbox.conf: "));
	assert_non_null(strstr(err, "No such file"));
}

/* Like write_conf, but len bytes of text, NUL bytes included. */
static const char *
write_conf_len(const char *text, size_t len)
{
	int	fd;

	snprintf(path, sizeof(path), "%s", tmpl);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

/* conf_load(p) fails with an error that starts with "p:" (line > 0:
 * "p:line:") and holds fragment. */
static void
expect_refused(const char *p, int line, const char *fragment)
{
	struct conf	*c = NULL;
	char		 err[512], want[160];

	clear_env();
	assert_int_equal(conf_load(p, &c, err, sizeof(err)), -1);
	assert_null(c);
	if (line > 0)
		snprintf(want, sizeof(want), "%s:%d: ", p, line);
	else
		snprintf(want, sizeof(want), "%s: ", p);
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("error \"%s\" does not start with \"%s\"", err, want);
	if (strstr(err, fragment) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", err, fragment);
}

/* A URL that is refused is not echoed past its scheme: its userinfo may
 * be a password. */
static void
test_url_not_echoed(void **state)
{
	struct conf	*c = NULL;
	char		 err[512];

	(void)state;
	clear_env();
	assert_int_equal(conf_load(write_conf("database = \"x\"\nwebhook { "
	    "url = \"ftp://user:LEAK18@h/x\" }\n"), &c, err, sizeof(err)),
	    -1);
	unlink(path);
	assert_null(c);
	assert_non_null(strstr(err, "expected an http:// or https:// URL"));
	assert_null(strstr(err, "LEAK18"));
}

/* A comment marker glued to a bare value would cut it (libconfuse reads
 * the rest as a comment): refused with the line, never a cut secret. */
static void
test_glued_comment(void **state)
{
	(void)state;
	expect_error("database = \"x\"\nadmin { token = abcdefghijklmnop#qrst"
	    "uvwxyz0123456789 }\n", 2, "quote the value");
	expect_error("database = postgresql://u:pw@127.0.0.1:1/db\n", 1,
	    "quote the value");
	expect_error("database = \"x\"\nhttp { workers = 2/* c */ }\n", 2,
	    "quote the value");
}

/* Only a regular file is read: the others are refused by kind, at once
 * (a FIFO without a writer would block an open without O_NONBLOCK). */
static void
test_not_regular(void **state)
{
	char	dir[] = "/tmp/outboxd-conf-dir-XXXXXX", fifo[64];

	(void)state;
	assert_non_null(mkdtemp(dir));
	expect_refused(dir, 0, "is a directory, not a regular file");
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	expect_refused(fifo, 0, "is a FIFO (named pipe), not a regular file");
	unlink(fifo);
	rmdir(dir);
	expect_refused("/dev/null", 0, "is a character device, not a "
	    "regular file");
	expect_refused("/dev/zero", 0, "is a character device");
}

/* CONF_MAX_SIZE bytes are read; one more is refused. */
static void
test_size_limit(void **state)
{
	static const char	 head[] = "database = \"x\"\n"
				    "relay { workers = 0 }\n"
				    "consumer { workers = 0 }\n";
	struct conf		*c;
	char			*text, err[512];

	(void)state;
	clear_env();
	assert_non_null(text = malloc(CONF_MAX_SIZE + 1));
	memset(text, ' ', CONF_MAX_SIZE + 1);
	memcpy(text, head, sizeof(head) - 1);
	assert_int_equal(conf_load(write_conf_len(text, CONF_MAX_SIZE), &c,
	    err, sizeof(err)), 0);
	unlink(path);
	conf_free(c);
	expect_refused(write_conf_len(text, CONF_MAX_SIZE + 1), 0,
	    "is larger than 1048576 bytes (1 MiB)");
	unlink(path);
	free(text);
}

/* A NUL byte would end the file for libconfuse: it is an error, with its
 * line, wherever it is. */
static void
test_nul_byte(void **state)
{
	static const char	mid[] = "database = \"x\"\n"
				    "relay { workers = 0 }\n"
				    "consumer { wor\0kers = 0 }\n"
				    "bogus = 1\n";
	static const char	comment[] = "database = \"x\"\n"
				    "relay { workers = 0 }\n"
				    "consumer { workers = 0 }\n"
				    "#\0\n"
				    "sqs { queue_url = \"http://h/0/q\" }\n";

	(void)state;
	expect_refused(write_conf_len(mid, sizeof(mid) - 1), 3,
	    "the file holds a NUL byte");
	unlink(path);
	expect_refused(write_conf_len(comment, sizeof(comment) - 1), 4,
	    "the file holds a NUL byte");
	unlink(path);
	expect_refused(write_conf_len("\0", 1), 1, "NUL byte");
	unlink(path);
}

/* An error on a line that sets a secret never shows the line's text. */
static void
expect_no_secret(const char *text, int line, const char *key,
    const char *secret)
{
	char	frag[128], err[512];
	struct conf	*c = NULL;

	snprintf(frag, sizeof(frag), "the value of %s is malformed", key);
	expect_error(text, line, frag);
	clear_env();
	assert_int_equal(conf_load(write_conf(text), &c, err, sizeof(err)),
	    -1);
	unlink(path);
	if (strstr(err, secret) != NULL)
		fail_msg("error \"%s\" shows \"%s\"", err, secret);
}

static void
test_secret_not_in_errors(void **state)
{
	(void)state;
	expect_no_secret("database = \"x\"\naws {\n"
	    "  secret_access_key = AWS/SECRET+X\n}\n", 3,
	    "aws.secret_access_key", "SECRET");
	expect_no_secret("database = \"x\"\naws {\n"
	    "  secret_access_key = AWS/SECRET+X\n}\n", 3,
	    "aws.secret_access_key", "X'");
	expect_no_secret("database = \"x\"\naws { session_token = "
	    "TOKPART1 TOKPART2 }\n", 2, "aws.session_token", "TOKPART");
	expect_no_secret("database = \"x\"\nwebhook {\n secret =\n"
	    "  whsec_abc def\n}\n", 4, "webhook.secret", "def");
	expect_no_secret("database = \"x\"\nadmin { token = "
	    "0123456789abcdef = 5 }\n", 2, "admin.token", "0123456789");
	expect_no_secret("database = host=h password=hunter22 dbname=d\n",
	    1, "database", "hunter22");
	/* a key elsewhere keeps its usual message */
	expect_error("database = \"x\"\naws { secret_access_key = \"s\" }\n"
	    "bogus = 1\n", 3, "no such option 'bogus'");
}

/* A file every user can read gets a warning when it holds a secret; the
 * warning names the file, the mode and the keys, never a value. */
static void
expect_warning(const char *text, mode_t mode, const char *fragment)
{
	struct conf	*c;
	char		 err[512], want[160];

	clear_env();
	write_conf(text);
	assert_int_equal(chmod(path, mode), 0);
	if (conf_load(path, &c, err, sizeof(err)) != 0)
		fail_msg("conf_load: %s", err);
	unlink(path);
	if (fragment == NULL) {
		if (c->mode_warning != NULL)
			fail_msg("unexpected warning \"%s\"", c->mode_warning);
		conf_free(c);
		return;
	}
	assert_non_null(c->mode_warning);
	snprintf(want, sizeof(want), "%s: mode %04o lets every user read",
	    path, (unsigned)mode);
	if (strncmp(c->mode_warning, want, strlen(want)) != 0)
		fail_msg("warning \"%s\" does not start with \"%s\"",
		    c->mode_warning, want);
	if (strstr(c->mode_warning, fragment) == NULL)
		fail_msg("warning \"%s\" lacks \"%s\"", c->mode_warning,
		    fragment);
	if (strstr(c->mode_warning, "SeCrEt") != NULL)
		fail_msg("warning \"%s\" shows a secret", c->mode_warning);
	conf_free(c);
}

#define NOAWS	"relay { workers = 0 }\nconsumer { workers = 0 }\n"

static void
test_mode_warning(void **state)
{
	(void)state;
	expect_warning("database = \"x\"\n" NOAWS
	    "admin { token = \"SeCrEt0123456789abcdef\" }\n", 0644,
	    "(admin.token)");
	expect_warning("database = \"x\"\n" NOAWS
	    "admin { token = \"SeCrEt0123456789abcdef\" }\n", 0640, NULL);
	expect_warning("database = \"x\"\n" NOAWS
	    "admin { token = \"SeCrEt0123456789abcdef\" }\n", 0600, NULL);
	expect_warning("database = \"x\"\n" NOAWS, 0644, NULL);
	expect_warning("database = \"postgresql://u:SeCrEt@h/d\"\n" NOAWS,
	    0644, "(a password in database)");
	expect_warning("database = \"host=h password = SeCrEt\"\n" NOAWS,
	    0604, "a password in database");
	expect_warning("database = \"postgresql://u@h/d\"\n" NOAWS, 0644,
	    NULL);
	expect_warning("database = \"x\"\nrelay { sink = \"http\" }\n"
	    "consumer { workers = 0 }\n"
	    "webhook { url = \"http://h/\" secret = \"SeCrEt\" }\n"
	    "aws { secret_access_key = \"SeCrEt\" session_token = \"SeCrEt\""
	    " }\n", 0666, "(aws.secret_access_key, aws.session_token, "
	    "webhook.secret)");
	/* a secret kept in the environment is not in the file */
	expect_warning("database = \"x\"\n" NOAWS
	    "aws { secret_access_key = \"${OUTBOXD_TEST_UNSET}\" }\n", 0644,
	    NULL);
	/* commented out is not set */
	expect_warning("database = \"x\"\n" NOAWS
	    "# admin { token = \"SeCrEt0123456789abcdef\" }\n", 0644, NULL);
}

/* ---- destination NAME { } (outbox.conf(5), DESTINATIONS) ---------------- */

#define DAWS								\
    "database = \"x\"\n"						\
    "aws { region = \"us-east-1\" access_key_id = \"a\" "		\
    "secret_access_key = \"s\" }\n"					\
    "consumer { workers = 0 }\n"
#define DSQS(name)							\
    "destination " name " {\n"						\
    "	sink = \"sqs\"\n"						\
    "	queue_url = \"http://127.0.0.1:1/000000000000/q\"\n"		\
    "}\n"
#define WHSEC	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

static const struct conf_destination *
dest(const struct conf *c, const char *name)
{
	const struct conf_destination	*d = conf_destination_find(c, name);

	if (d == NULL)
		fail_msg("no destination \"%s\"", name ? name : "(default)");
	return d;
}

static struct conf *
load_ok(const char *text)
{
	struct conf	*c = NULL;
	char		 err[512];

	clear_env();
	if (conf_load(write_conf(text), &c, err, sizeof(err)) != 0)
		fail_msg("conf_load: %s", err);
	unlink(path);
	return c;
}

/* Named only, every sink: what is unset gets the sink's own values. */
static void
test_dest_named(void **state)
{
	const struct conf_destination	*d;
	struct conf			*c;

	(void)state;
	c = load_ok(DAWS
	    "relay { default_destination = \"orders\" timeout = 4000 }\n"
	    "webhook { timeout = 3000 }\n"
	    DSQS("orders")
	    "destination \"fan.out-1\" {\n"
	    "	sink = \"sns\"\n"
	    "	topic_arn = \"arn:aws:sns:eu-west-1:123456789012:t.fifo\"\n"
	    "	batch_size = 5\n"
	    "}\n"
	    "destination hooks {\n"
	    "	sink = \"http\"\n"
	    "	url = \"http://127.0.0.1:2/h\"\n"
	    "	secret = \"" WHSEC "\"\n"
	    "	concurrency = 2\n"
	    "}\n"
	    "destination slow { sink = \"http\" url = \"https://h/\" "
	    "secret = \"raw\" timeout = 9000 batch_size = 1 }\n");
	/* no sqs.queue_url: relay.sink's destination does not exist */
	assert_int_equal(c->n_destinations, 4);
	assert_null(conf_destination_find(c, "default"));
	assert_string_equal(dest(c, NULL)->name, "orders");
	d = dest(c, "orders");
	assert_int_equal(d->sink, CONF_SINK_SQS);
	assert_int_equal(d->batch_size, 10);
	assert_int_equal(d->concurrency, 16);
	assert_int_equal(d->timeout, 4000);	/* relay.timeout */
	d = dest(c, "fan.out-1");
	assert_int_equal(d->sink, CONF_SINK_SNS);
	assert_string_equal(d->topic_arn,
	    "arn:aws:sns:eu-west-1:123456789012:t.fifo");
	assert_int_equal(d->batch_size, 5);
	assert_int_equal(d->timeout, 4000);
	d = dest(c, "hooks");
	assert_int_equal(d->sink, CONF_SINK_HTTP);
	assert_string_equal(d->secret, WHSEC);
	assert_int_equal(d->batch_size, 4);
	assert_int_equal(d->concurrency, 2);
	assert_int_equal(d->timeout, 3000);	/* webhook.timeout */
	d = dest(c, "slow");
	assert_int_equal(d->timeout, 9000);
	assert_int_equal(d->batch_size, 1);
	conf_free(c);
}

/* The legacy configuration beside named destinations; and alone. */
static void
test_dest_legacy(void **state)
{
	const struct conf_destination	*d;
	struct conf			*c;

	(void)state;
	/* sqs.queue_url with relay.sink = "sqs": "default", the default */
	c = load_ok(DAWS "sqs { queue_url = \"http://127.0.0.1:1/0/legacy\" }\n"
	    DSQS("orders"));
	assert_int_equal(c->n_destinations, 2);
	d = dest(c, NULL);
	assert_string_equal(d->name, "default");
	assert_string_equal(d->queue_url, "http://127.0.0.1:1/0/legacy");
	assert_int_equal(d->batch_size, 10);
	conf_free(c);
	/* relay.default_destination may name another one */
	c = load_ok(DAWS "sqs { queue_url = \"http://127.0.0.1:1/0/legacy\" }\n"
	    "relay { default_destination = \"orders\" }\n" DSQS("orders"));
	assert_string_equal(dest(c, NULL)->name, "orders");
	assert_non_null(conf_destination_find(c, "default"));
	conf_free(c);
	/* a section named "default" takes the legacy one's place */
	c = load_ok(DAWS "sqs { queue_url = \"http://127.0.0.1:1/0/legacy\" }\n"
	    DSQS("default"));
	assert_int_equal(c->n_destinations, 1);
	assert_string_equal(dest(c, NULL)->queue_url,
	    "http://127.0.0.1:1/000000000000/q");
	conf_free(c);
	/* relay.sink = "http": webhook {} is "default" */
	c = load_ok(DAWS "relay { sink = \"http\" }\n"
	    "webhook { url = \"http://h/\" secret = \"s\" timeout = 2500 }\n"
	    DSQS("orders"));
	d = dest(c, NULL);
	assert_string_equal(d->name, "default");
	assert_int_equal(d->sink, CONF_SINK_HTTP);
	assert_int_equal(d->timeout, 2500);
	assert_int_equal(d->batch_size, 4);
	conf_free(c);
	/* without sections, as always: one destination, the default */
	c = load_ok(DAWS "sqs { queue_url = \"http://127.0.0.1:1/0/legacy\" }\n");
	assert_int_equal(c->n_destinations, 1);
	assert_string_equal(dest(c, NULL)->name, "default");
	conf_free(c);
	/* an HTTP sink needs no AWS; relay.sink with no queue makes none */
	c = load_ok("database = \"x\"\nconsumer { workers = 0 }\n"
	    "relay { default_destination = \"h\" }\n"
	    "destination h { sink = \"http\" url = \"http://h/\" secret = "
	    "\"s\" }\n");
	assert_int_equal(c->n_destinations, 1);
	conf_free(c);
	/* relays off: no default needed */
	c = load_ok(DAWS "relay { workers = 0 }\n" DSQS("orders"));
	assert_int_equal(c->default_destination, -1);
	conf_free(c);
}

#define PS	"database = \"x\"\n"	\
	    "consumer { workers = 0 }\n"	\
	    "relay { default_destination = \"events\" }\n"	\
	    "destination events {\n\tsink = \"pubsub\"\n"	\
	    "\tproject = \"my-project-1\"\n\ttopic = \"order-events\"\n"	\
	    "\tordering = true\n}\n"	\
	    "destination plain { sink = \"pubsub\" project = "	\
	    "\"example.com:proj-x\" topic = \"t_1.x~y+z\" }\n"

/* sink = "pubsub": its keys, no AWS needed, where requests go. */
static void
test_dest_pubsub(void **state)
{
	const struct conf_destination	*d;
	struct conf			*c;
	char				 err[512];
	static const char		 ps[] = PS;

	(void)state;
	c = load_ok(ps);
	d = dest(c, "events");
	assert_int_equal(d->sink, CONF_SINK_PUBSUB);
	assert_string_equal(d->project, "my-project-1");
	assert_string_equal(d->topic, "order-events");
	assert_int_equal(d->ordering, 1);
	assert_int_equal(d->batch_size, 10);
	assert_int_equal(dest(c, "plain")->ordering, 0);
	assert_string_equal(c->pubsub.endpoint, "https://pubsub.googleapis.com");
	assert_int_equal(c->pubsub.emulator, 0);
	conf_free(c);
	c = load_ok("pubsub { endpoint_url = \"http://127.0.0.1:9/\" }\n" PS);
	assert_string_equal(c->pubsub.endpoint, "http://127.0.0.1:9");
	conf_free(c);
	/* The emulator wins, as in Google's libraries. */
	clear_env();
	setenv("PUBSUB_EMULATOR_HOST", "localhost:8085", 1);
	assert_int_equal(conf_load(write_conf(ps), &c, err, sizeof(err)), 0);
	assert_string_equal(c->pubsub.endpoint, "http://localhost:8085");
	assert_int_equal(c->pubsub.emulator, 1);
	conf_free(c);
	setenv("PUBSUB_EMULATOR_HOST", "h/x y", 1);
	assert_int_equal(conf_load(path, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "PUBSUB_EMULATOR_HOST"));
	unlink(path);
	unsetenv("PUBSUB_EMULATOR_HOST");

	expect_error(DAWS "destination p {\n\tsink = \"pubsub\"\n"
	    "\tproject = \"my-project\"\n}\n", 4,
	    "destination p: sink = \"pubsub\" needs topic");
	expect_error(DAWS "destination p {\n\tproject = \"My_Project\"\n}\n",
	    5, "destination p: project = \"My_Project\": expected a Google "
	    "Cloud project ID");
	expect_error(DAWS "destination p {\n\ttopic = \"goog-x\"\n}\n", 5,
	    "topic = \"goog-x\": expected a Pub/Sub topic ID");
	expect_error(DAWS "destination p {\n\ttopic = \"projects/p/topics/t\""
	    "\n}\n", 5, "expected a Pub/Sub topic ID");
	expect_error(DAWS "destination q {\n\tsink = \"sqs\"\n"
	    "\tordering = false\n}\n", 6, "destination q: ordering is a key "
	    "of sink = \"pubsub\", not of sink = \"sqs\"");
	expect_error(DAWS "destination q {\n\ttopic = \"abc\"\n"
	    "\tsink = \"sns\"\n}\n", 6, "destination q: topic is a key of "
	    "sink = \"pubsub\", not of sink = \"sns\"");
}

static void
test_dest_bad(void **state)
{
	(void)state;
	/* lines: DAWS is 3, the section opens on 4 */
	expect_error(DAWS "destination orders {\n\tsink = \"kafka\"\n}\n", 5,
	    "destination orders: sink = \"kafka\": expected \"sqs\", \"sns\", "
	    "\"http\" or \"pubsub\"");
	expect_error(DAWS "destination orders {\n\turl = \"http://h/\"\n}\n", 4,
	    "destination orders: sink is not set");
	expect_error(DAWS "destination orders {\n\tsink = \"sqs\"\n}\n", 4,
	    "destination orders: sink = \"sqs\" needs queue_url");
	expect_error(DAWS "destination t {\n\tsink = \"sns\"\n}\n", 4,
	    "destination t: sink = \"sns\" needs topic_arn");
	expect_error(DAWS "destination h {\n\tsink = \"http\"\n"
	    "\tsecret = \"s\"\n}\n", 4, "destination h: sink = \"http\" needs url");
	expect_error(DAWS "destination h {\n\tsink = \"http\"\n"
	    "\turl = \"http://h/\"\n\tsecret = \"\"\n}\n", 4,
	    "destination h: sink = \"http\" needs secret");
	/* a key of another sink, after sink = and before it */
	expect_error(DAWS "destination orders {\n\tsink = \"sqs\"\n"
	    "\tqueue_url = \"http://h/0/q\"\n"
	    "\ttopic_arn = \"arn:aws:sns:us-east-1:123456789012:t\"\n}\n", 7,
	    "destination orders: topic_arn is a key of sink = \"sns\", not of "
	    "sink = \"sqs\"");
	expect_error(DAWS "destination t {\n\tsecret = \"s\"\n"
	    "\tsink = \"sns\"\n}\n", 6,
	    "destination t: secret is a key of sink = \"http\", not of sink = "
	    "\"sns\"");
	expect_error(DAWS "destination h {\n\tsink = \"http\"\n"
	    "\tqueue_url = \"http://h/0/q\"\n}\n", 6,
	    "destination h: queue_url is a key of sink = \"sqs\"");
	/* limits */
	expect_error(DAWS "destination h {\n\tsink = \"http\"\n"
	    "\tbatch_size = 5\n}\n", 6,
	    "destination h: batch_size = 5 is out of range (1..4 for sink = "
	    "\"http\")");
	expect_error(DAWS "destination h {\n\tconcurrency = 5\n"
	    "\tsink = \"http\"\n}\n", 6,
	    "destination h: concurrency = 5 is out of range (1..4 for sink = "
	    "\"http\")");
	expect_error(DAWS "destination q {\n\tsink = \"sqs\"\n"
	    "\tbatch_size = 11\n}\n", 6, "batch_size = 11 is out of range");
	expect_error(DAWS "destination q {\n\tbatch_size = 0\n}\n", 5,
	    "destination q: batch_size = 0 is out of range (1..10");
	expect_error(DAWS "destination q {\n\tsink = \"sqs\"\n"
	    "\tconcurrency = 17\n}\n", 6, "concurrency = 17 is out of range "
	    "(1..16");
	expect_error(DAWS "destination q {\n\ttimeout = 99\n}\n", 5,
	    "destination q: timeout = 99 is out of range (100..600000)");
	expect_error(DAWS "destination q {\n\ttimeout = 600001\n}\n", 5,
	    "timeout = 600001 is out of range");
	/* values */
	expect_error(DAWS "destination q {\n\tsink = \"sqs\"\n"
	    "\tqueue_url = \"ftp://user:LEAK@h/q\"\n}\n", 6,
	    "destination q: queue_url: expected an http:// or https:// URL");
	expect_error(DAWS "destination h {\n\turl = \"h/x\"\n}\n", 5,
	    "destination h: url: expected an http:// or https:// URL");
	/* the scheme is right, but libcurl could not send there */
	expect_error(DAWS "destination h {\n\turl = \"http:///x\"\n}\n", 5,
	    "destination h: url: not a URL libcurl can use: No host part");
	expect_error(DAWS "destination h {\n\turl = \"http://h:0/x\"\n}\n",
	    5, "destination h: url: not a URL libcurl can use: port 0");
	expect_error(DAWS "destination h {\n\turl = \"http://\"\n}\n", 5,
	    "destination h: url: not a URL libcurl can use: No host part");
	expect_error(DAWS "destination h {\n\turl = "
	    "\"http://u:LEAK@127.0.0.1:99999/x\"\n}\n", 5,
	    "destination h: url: not a URL libcurl can use: Port number");
	expect_error(DAWS "destination h {\n\turl = \"https://[::1\"\n}\n", 5,
	    "destination h: url: not a URL libcurl can use: Bad IPv6");
	expect_error(DAWS "destination t {\n\ttopic_arn = "
	    "\"arn:aws:sqs:us-east-1:123456789012:t\"\n}\n", 5,
	    "destination t: topic_arn = \"arn:aws:sqs:us-east-1:123456789012:t"
	    "\": expected arn:PARTITION:sns:REGION:ACCOUNT:NAME");
	expect_error(DAWS "destination t {\n\ttopic_arn = "
	    "\"arn:aws:sns:us-east-1:12345:t\"\n}\n", 5, "topic_arn");
	expect_error(DAWS "destination t {\n\ttopic_arn = "
	    "\"arn:aws:sns:us-east-1:123456789012:a.b\"\n}\n", 5, "topic_arn");
	expect_error(DAWS "destination t {\n\ttopic_arn = "
	    "\"arn:aws:sns:us-east-1:123456789012:\"\n}\n", 5, "topic_arn");
	expect_error(DAWS "destination h {\n\tsecret = \"whsec_%%%\"\n}\n", 5,
	    "destination h: secret: one that starts whsec_ must be followed "
	    "by base64");
	/* names */
	expect_error(DAWS "destination \"a b\" {\n\tsink = \"sqs\"\n}\n", 4,
	    "destination \"a b\": a destination's name is 1 to 64 characters "
	    "of A-Z, a-z, 0-9, '_', '.' and '-'");
	expect_error(DAWS "destination \"\" {\n\tsink = \"sqs\"\n}\n", 4,
	    "destination \"\": a destination's name is");
	expect_error(DAWS "destination "
	    "a12345678901234567890123456789012345678901234567890123456789012345"
	    " {\n}\n", 4, "a destination's name is 1 to 64");
	expect_error(DAWS "destination {\n\tsink = \"sqs\"\n}\n", 4,
	    "a destination section needs a name: destination NAME { ... }");
	expect_error(DAWS DSQS("orders") "\n" DSQS("orders"), 9,
	    "destination orders is defined twice (first on line 4): each "
	    "destination needs a name of its own");
	expect_error(DAWS "relay { default_destination = \"a/b\" }\n", 4,
	    "relay.default_destination = \"a/b\": a destination's name is");
	/* across sections */
	expect_error(DAWS "relay { default_destination = \"nope\" }\n"
	    DSQS("orders"), 4, "relay.default_destination = \"nope\": no "
	    "destination of that name");
	/* ... at the line of the key, not of "relay {" (a comment's brace
	 * and a quoted one do not count) */
	expect_error(DAWS "relay {\n\tworkers = 1 # {\n\tpoll_interval = "
	    "100\n\tdefault_destination = \"nope\"\n}\n" DSQS("orders"), 7,
	    "relay.default_destination = \"nope\": no destination");
	expect_error(DAWS "relay {\n\tworkers = 1\n\tlease = 3000\n}\n"
	    DSQS("default"), 6, "relay.lease (3000 ms) must be at least twice");
	/* set twice: libconfuse keeps the last, the error is at its line */
	expect_error(DAWS "relay {\n\tlease = 30000\n\tworkers = 1\n"
	    "\tlease = 3000\n}\n" DSQS("default"), 7, "relay.lease (3000 ms)");
	/* the legacy destination's timeout: relay.timeout's own line */
	expect_error("database = \"x\"\nconsumer { workers = 0 }\n"
	    "sqs { queue_url = \"http://h/0/q\" }\naws { region = \"us-east-1\" "
	    "access_key_id = \"a\" secret_access_key = \"s\" }\nrelay {\n"
	    "\tworkers = 1\n\ttimeout = 20000\n}\n", 7, "relay.lease (30000 "
	    "ms) must be at least twice the sink's timeout (relay.timeout = "
	    "20000 ms)");
	expect_error(DAWS "relay { workers = 1 }\n" DSQS("default")
	    "destination slow {\n\tsink = \"http\"\n\turl = \"http://h/{\"\n"
	    "\tsecret = \"s\"\n\ttimeout = 16000\n}\n", 13, "relay.lease "
	    "(30000 ms) must be at least twice the timeout of destination slow "
	    "(16000 ms)");
	expect_error(DAWS DSQS("orders"), 0, "relay.default_destination is not "
	    "set and no destination is named \"default\"");
	expect_error(DAWS "relay { lease = 20000 }\n" DSQS("default")
	    "destination slow { sink = \"http\" url = \"http://h/\" secret = "
	    "\"s\" timeout = 12000 }\n", 4, "relay.lease (20000 ms) must be at "
	    "least twice the timeout of destination slow (12000 ms)");
	expect_error(DAWS "relay { lease = 20000 }\n"
	    "webhook { timeout = 10001 }\n" DSQS("default")
	    "destination h { sink = \"http\" url = \"http://h/\" secret = "
	    "\"s\" }\n", 4, "twice the timeout of destination h (10001 ms, "
	    "webhook.timeout's)");
	/* the legacy destination keeps its message */
	expect_error(DAWS "relay { lease = 20000 timeout = 10001 }\n"
	    "sqs { queue_url = \"http://q/\" }\n"
	    "destination h { sink = \"http\" url = \"http://h/\" secret = "
	    "\"s\" timeout = 100 }\n", 4,
	    "at least twice the sink's timeout (relay.timeout = 10001 ms)");
	expect_error(DAWS "relay { sink = \"http\" }\n"
	    "webhook { url = \"http://h/\" }\n" DSQS("orders"), 0,
	    "webhook.url is set but webhook.secret is not");
	/* AWS for an SNS destination */
	clear_env();
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	expect_error_env("database = \"x\"\nconsumer { workers = 0 }\n"
	    "destination default { sink = \"sns\" topic_arn = "
	    "\"arn:aws:sns:us-east-1:123456789012:t\" }\n", 0, "aws.region");
	clear_env();
	/* an unknown key */
	expect_error(DAWS "destination q {\n\tsink = \"sqs\"\n\tqueue = 1\n}\n",
	    6, "no such option 'queue'");
}

/* A destination's secret is never shown in an error, and makes a file
 * others can read worth a warning. */
static void
test_dest_secret(void **state)
{
	struct conf	*c = NULL;
	char		 err[512];

	(void)state;
	expect_no_secret(DAWS "destination hooks {\n\tsink = \"http\"\n"
	    "\tsecret = whsec_abc SECRETPART\n}\n", 6,
	    "secret in destination hooks", "SECRETPART");
	/* a bad line next to it is reported, without the value */
	clear_env();
	assert_int_equal(conf_load(write_conf(DAWS "destination hooks {\n"
	    "\tsink = \"http\"\n\tsecret = \"SeCrEtVaLuE42\"\n"
	    "\turl = \"ftp://SeCrEtVaLuE42@h/\"\n}\n"), &c, err,
	    sizeof(err)), -1);
	unlink(path);
	assert_null(strstr(err, "SeCrEtVaLuE42"));
	assert_non_null(strstr(err, ":7: destination hooks: url: expected"));
	/* a slip that makes its text another key's value is not echoed */
	assert_int_equal(conf_load(write_conf(DAWS "destination hooks {\n"
	    "\tsecret = \"SeCrEtVaLuE42\"\n\tsink = \"SeCrEtVaLuE42\"\n}\n"),
	    &c, err, sizeof(err)), -1);
	unlink(path);
	assert_null(strstr(err, "SeCrEtVaLuE42"));
	assert_non_null(strstr(err, ":6: a value is malformed (its text is "
	    "not shown: it may come from the value of secret in destination "
	    "hooks)"));
	expect_warning(DAWS "destination hooks { sink = \"http\" url = "
	    "\"http://h/\" secret = \"SeCrEt\" }\n"
	    "destination \"b.2\" {\n sink = \"http\"\n url = \"http://h/\"\n"
	    " secret = \"SeCrEt\"\n}\n"
	    "destination default { sink = \"sqs\" queue_url = \"http://q/\" }\n",
	    0644, "(aws.secret_access_key, secret in destination hooks, "
	    "secret in destination b.2)");
	/* kept in the environment, it is not in the file */
	setenv("OUTBOXD_TEST_HOOK_SECRET", "from-the-env", 1);
	expect_warning(DAWS "destination default { sink = \"http\" url = "
	    "\"http://h/\" secret = \"${OUTBOXD_TEST_HOOK_SECRET}\" }\n",
	    0644, "(aws.secret_access_key)");
	unsetenv("OUTBOXD_TEST_HOOK_SECRET");
}

/* conf_dest.c's limits are the sinks' own. */
static void
test_dest_limits(void **state)
{
	static const int	kinds[] = { CONF_SINK_SQS, CONF_SINK_SNS,
				    CONF_SINK_HTTP, CONF_SINK_PUBSUB };
	size_t			i;
	int			mb, slots;

	(void)state;
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		assert_int_equal(conf_dest_limits(kinds[i], &mb, &slots), 0);
		if (mb != sink_of(kinds[i])->max_batch ||
		    slots != sink_of(kinds[i])->slots)
			fail_msg("sink %s: conf_dest.c says %d/%d, the sink "
			    "%d/%d (max_batch/slots)", sink_of(kinds[i])->name,
			    mb, slots, sink_of(kinds[i])->max_batch,
			    sink_of(kinds[i])->slots);
	}
	assert_int_equal(conf_dest_limits(99, &mb, &slots), -1);
}

/* Relay and consumer counts of 0 need no AWS settings at all. */
/* The shortest lease the timeout allows is accepted. */
static void
test_lease_twice_timeout(void **state)
{
	struct conf	*c;
	char		 err[512];

	(void)state;
	clear_env();
	assert_int_equal(conf_load(write_conf("database = \"x\"\n"
	    "relay { lease = 6000 timeout = 3000 }\n" AWSOK), &c, err,
	    sizeof(err)), 0);
	unlink(path);
	assert_int_equal(c->relay.lease, 6000);
	conf_free(c);
	/* No relay, no lease to check. */
	assert_int_equal(conf_load(write_conf("database = \"x\"\n"
	    "relay { workers = 0 lease = 5000 timeout = 5000 }\n" AWSOK), &c,
	    err, sizeof(err)), 0);
	unlink(path);
	conf_free(c);
}

static void
test_http_only(void **state)
{
	struct conf	*c;
	char		 err[512];

	(void)state;
	clear_env();
	assert_int_equal(conf_load(write_conf("database = \"x\"\n"
	    "http { listen = \"*:8080\" }\n"
	    "relay { workers = 0 }\nconsumer { workers = 0 }\n"), &c, err,
	    sizeof(err)), 0);
	unlink(path);
	assert_null(c->http.host);
	assert_string_equal(c->http.port, "8080");
	conf_free(c);
}

/* relay.mode and the relay.wal_* keys: defaults, values, and errors
 * with file and line. */
static void
test_wal_keys(void **state)
{
	struct conf	*c;
	char		 err[512];

	(void)state;
	clear_env();
	assert_int_equal(conf_load(write_conf("database = \"dbname=x\"\n"
	    AWSOK), &c, err, sizeof(err)), 0);
	unlink(path);
	assert_int_equal(c->relay.mode, CONF_RELAY_TABLE);
	assert_string_equal(c->relay.wal_slot, "outboxd");
	assert_string_equal(c->relay.wal_publication, "outboxd");
	assert_string_equal(c->relay.wal_message_prefix, "outbox");
	assert_int_equal(c->relay.wal_lag_warning, 1073741824L);
	conf_free(c);
	assert_int_equal(conf_load(write_conf("database = \"dbname=x\"\n"
	    AWSOK "relay {\n mode = \"wal\"\n wal_slot = \"s_1\"\n"
	    " wal_publication = \"p2\"\n wal_message_prefix = \"app.ev\"\n"
	    " wal_lag_warning = 0\n}\n"), &c, err, sizeof(err)), 0);
	unlink(path);
	assert_int_equal(c->relay.mode, CONF_RELAY_WAL);
	assert_string_equal(c->relay.wal_slot, "s_1");
	assert_string_equal(c->relay.wal_publication, "p2");
	assert_string_equal(c->relay.wal_message_prefix, "app.ev");
	assert_int_equal(c->relay.wal_lag_warning, 0);
	conf_free(c);
	expect_error("database = \"dbname=x\"\nrelay {\n\n mode = \"WAL\"\n}\n",
	    4, "relay.mode = \"WAL\": expected \"table\" or \"wal\"");
	expect_error("database = \"dbname=x\"\nrelay { wal_slot = \"a-b\" }\n",
	    2, "relay.wal_slot: expected 1 to 63 lower-case letters");
	expect_error("database = \"dbname=x\"\nrelay { wal_publication = "
	    "\"x;DROP\" }\n", 2, "relay.wal_publication: expected");
	expect_error("database = \"dbname=x\"\nrelay { wal_slot = \"\" }\n",
	    2, "relay.wal_slot: expected");
	expect_error("database = \"dbname=x\"\nrelay {\nwal_message_prefix = "
	    "\"a b\" }\n", 3, "relay.wal_message_prefix: expected");
	expect_error("database = \"dbname=x\"\nrelay {\nwal_lag_warning = -5 "
	    "}\n", 3, "relay.wal_lag_warning = -5 is out of range");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_file),
		cmocka_unit_test(test_wal_keys),
		cmocka_unit_test(test_defaults_and_env),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_glued_comment),
		cmocka_unit_test(test_url_not_echoed),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_lease_twice_timeout),
		cmocka_unit_test(test_http_only),
		cmocka_unit_test(test_not_regular),
		cmocka_unit_test(test_size_limit),
		cmocka_unit_test(test_nul_byte),
		cmocka_unit_test(test_secret_not_in_errors),
		cmocka_unit_test(test_mode_warning),
		cmocka_unit_test(test_dest_named),
		cmocka_unit_test(test_dest_legacy),
		cmocka_unit_test(test_dest_bad),
		cmocka_unit_test(test_dest_pubsub),
		cmocka_unit_test(test_dest_secret),
		cmocka_unit_test(test_dest_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
