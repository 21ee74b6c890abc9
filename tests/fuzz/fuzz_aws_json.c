/*
 * fuzz_aws_json.c - libFuzzer target for what outboxd reads from AWS:
 * src/sqs.c's SendMessageBatch, ReceiveMessage and DeleteMessageBatch
 * replies, src/ddb.c's items (GetItem's "Item", ddb_item_to_json) and
 * message bodies (ddb_fulfillment_parse), and src/aws.c's reading of any
 * answer (the AWS JSON 1.0 error {"__type", "message"} of DynamoDB and
 * SQS), reached through aws_call() with httpc_post() replaced below.
 * Every message gets an outcome and at most n are sent; every entry not
 * deleted has a reason; a converted item prints as JSON that reads back;
 * an answer is ok only when 2xx with an object, and an error has a
 * message.  Built and run by `make fuzz` (FUZZ_SECONDS); by hand, from
 * the top of a configured tree (config.h there):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc tests/fuzz/fuzz_aws_json.c src/sqs.c src/ddb.c src/aws.c src/log.c src/clock.c -lcjson -levent -lcurl -o fuzz_aws_json && mkdir -p /tmp/fuzz-aws-json && ./fuzz_aws_json -max_total_time=300 /tmp/fuzz-aws-json tests/fuzz/corpus/aws_json
 *
 * Input: byte 0 gives n, the messages of the batch (1 + byte % 10), and
 * the HTTP status of the answer (byte / 10 % 6: 200, 400, 413, 500, 503,
 * 0 = no answer); the JSON text is the rest.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* aws.c warns of every reply that is not an object: not wanted
	 * a million times a minute */
	log_set_level(LOG_LEVEL_ERROR);
	return 0;
}

/* aws_call() hands its request here: keep the callback, answer later. */
static httpc_cb		*fz_cb;
static void		*fz_arg;

int
httpc_post(struct httpc *hc, const struct httpc_request *r, httpc_cb *cb,
    void *arg)
{
	(void)hc;
	curl_slist_free_all(r->headers);
	fz_cb = cb;
	fz_arg = arg;
	return 0;
}

/* The keys aws_call() signs with: the chain (creds.c) is not what this
 * target reads, so it is not linked. */
int	creds_current(const char **, const char **, const char **);
void	creds_rejected(const char *);
const char *creds_region(void);
const char *creds_endpoint(const char *, const char *);

const char *
creds_region(void)
{
	return "us-east-1";
}

const char *
creds_endpoint(const char *configured, const char *service)
{
	(void)service;
	return configured != NULL ? configured : "http://127.0.0.1:9";
}

int
creds_current(const char **akid, const char **secret, const char **token)
{
	*akid = "AKIDFUZZ";
	*secret = "fuzz-secret";
	*token = NULL;
	return 0;
}

void
creds_rejected(const char *type)
{
	(void)type;
}

int
httpc_header(struct curl_slist **list, const char *fmt, ...)
{
	(void)fmt;
	*list = NULL;
	return 0;
}

static long		 fz_status;
static int		 fz_called;

static void
answer(const struct aws_result *res, void *arg)
{
	CHECK(arg == &fz_called);
	fz_called++;
	CHECK(res->status == fz_status);
	if (res->ok) {
		CHECK(fz_status >= 200 && fz_status < 300);
		CHECK(cJSON_IsObject(res->json));
		return;
	}
	CHECK(res->error_message != NULL);
	if (res->error_type != NULL) {
		CHECK(*res->error_type != '\0' && strlen(res->error_type) < 128);
		CHECK(strpbrk(res->error_type, "#:") == NULL);
	}
	if (fz_status == 0)
		CHECK(res->json == NULL);
}

static void
send_batch(const cJSON *tree, int n)
{
	struct outbox_msg	msgs[SINK_MAX_BATCH];
	int			i, sent, nsent = 0;

	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < n; i++) {
		msgs[i].id = i;
		msgs[i].outcome = (enum sink_outcome)-1;
	}
	sent = sqs_send_batch_parse(tree, msgs, n);
	CHECK(sent >= 0 && sent <= n);
	for (i = 0; i < n; i++) {
		CHECK(msgs[i].outcome == SINK_SENT ||
		    msgs[i].outcome == SINK_RETRY ||
		    msgs[i].outcome == SINK_REJECTED);
		if (msgs[i].outcome == SINK_SENT) {
			nsent++;
			CHECK(msgs[i].error == NULL);
		} else
			CHECK(msgs[i].error != NULL && msgs[i].reason >= 0 &&
			    msgs[i].reason < SINK_NREASONS);
		free(msgs[i].error);
	}
	CHECK(nsent == sent);
}

static void
receive(const cJSON *tree)
{
	struct sqs_message	*m;
	int			 i, n;

	if (sqs_receive_parse(tree, &m, &n) == -1) {
		CHECK(m == NULL && n == 0);
		return;
	}
	CHECK(n >= 0 && (n == 0) == (m == NULL));
	for (i = 0; i < n; i++) {
		CHECK(m[i].receipt_handle != NULL && m[i].body != NULL);
		CHECK(strlen(m[i].body) == m[i].body_len);
		CHECK(m[i].receive_count >= 0);
	}
	sqs_messages_free(m, n);
}

static void
delete_batch(const cJSON *tree, int n)
{
	char	*errors[SINK_MAX_BATCH];
	int	 i, failed, nfailed = 0;

	failed = sqs_delete_batch_parse(tree, n, errors);
	CHECK(failed >= 0 && failed <= n);
	for (i = 0; i < n; i++) {
		if (errors[i] != NULL)
			nfailed++;
		free(errors[i]);
	}
	CHECK(nfailed == failed);
}

static void
item(const cJSON *it)
{
	cJSON	*out, *back;
	char	*s;

	if ((out = ddb_item_to_json(it)) == NULL)
		return;
	CHECK(cJSON_IsObject(out));
	CHECK(cJSON_GetArraySize(out) == cJSON_GetArraySize(it));
	/* Numbers are kept raw: they must be JSON numbers. */
	CHECK((s = cJSON_PrintUnformatted(out)) != NULL);
	CHECK((back = cJSON_Parse(s)) != NULL && cJSON_IsObject(back));
	cJSON_Delete(back);
	free(s);
	cJSON_Delete(out);
}

static void
reply(const char *text, size_t len)
{
	struct httpc_response	 r;
	struct conf		 conf;
	char			*body;

	memset(&conf, 0, sizeof(conf));
	conf.aws.region = "us-east-1";
	conf.aws.sqs_endpoint = conf.aws.dynamodb_endpoint =
	    "http://127.0.0.1:1";
	conf.aws.access_key_id = conf.aws.secret_access_key = "fuzz";
	fz_cb = NULL;
	fz_called = 0;
	CHECK(aws_call(NULL, &conf, fz_status % 2 ? AWS_SQS : AWS_DYNAMODB,
	    "PutItem", "{}", 2, 1000, answer, &fz_called, NULL) == 0);
	CHECK(fz_cb != NULL);
	/* httpc's body is NUL-terminated */
	CHECK((body = malloc(len + 1)) != NULL);
	memcpy(body, text, len);
	body[len] = '\0';
	memset(&r, 0, sizeof(r));
	r.curl_code = fz_status == 0 ? CURLE_OPERATION_TIMEDOUT : 0;
	r.curl_error = fz_status == 0 ? "Operation timed out" : NULL;
	r.status = fz_status;
	r.body = fz_status == 0 ? NULL : body;
	r.body_len = fz_status == 0 ? 0 : len;
	r.retry_after = -1;
	fz_cb(&r, fz_arg);
	CHECK(fz_called == 1);
	free(body);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static const long	 status[] = { 200, 400, 413, 500, 503, 0 };
	struct fulfillment	 f;
	const char		*text = (const char *)data + 1;
	cJSON			*tree;
	char			 err[256];
	int			 n;

	if (len < 1)
		return 0;
	n = 1 + data[0] % SINK_MAX_BATCH;
	fz_status = status[data[0] / 10 % 6];
	len--;

	reply(text, len);
	err[0] = '\0';
	if (ddb_fulfillment_parse(text, len, &f, err, sizeof(err)) == 0) {
		CHECK(f.order_id != NULL && *f.order_id != '\0');
		CHECK(f.customer_id != NULL && *f.customer_id != '\0');
		ddb_fulfillment_clear(&f);
	} else
		CHECK(err[0] != '\0' && f.order_id == NULL &&
		    f.customer_id == NULL);

	if ((tree = cJSON_ParseWithLength(text, len)) == NULL)
		return 0;
	send_batch(tree, n);
	receive(tree);
	delete_batch(tree, n);
	item(tree);
	item(cJSON_GetObjectItemCaseSensitive(tree, "Item"));
	cJSON_Delete(tree);
	return 0;
}
