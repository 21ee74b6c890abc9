/*
 * aws.c - calls to AWS services that speak the JSON 1.0 protocol (SQS,
 * DynamoDB): POST / with X-Amz-Target and Content-Type
 * application/x-amz-json-1.0, signed with Signature Version 4 by libcurl
 * (CURLOPT_AWS_SIGV4).  Errors come back as JSON {"__type", "message"}
 * (AWS JSON 1.0 protocol, error responses).
 *
 * SNS speaks only the query protocol: the same signed POST /, but a
 * form-encoded body that names the Action, and XML back, errors as
 * ErrorResponse/Error/{Type,Code,Message} (AWS query protocol; read by
 * sns.c).  Signing is the same for both: libcurl hashes whatever body.
 *
 * Secrets (secret key, session token) go to libcurl only, never to a log.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"
#include "creds.h"

struct aws_ctx {
	aws_cb		*cb;
	void		*arg;
	void		(*arg_free)(void *);	/* arg, on an abort */
	enum aws_service svc;
	char		 action[64];
};

/* httpc_free() aborted the call: cb never runs, so the caller's arg is
 * freed here, with the call's own state. */
static void
aws_abort(void *arg)
{
	struct aws_ctx	*ctx = arg;

	if (ctx->arg_free != NULL)
		ctx->arg_free(ctx->arg);
	free(ctx);
}

static const char *
aws_service_name(enum aws_service svc)
{
	return (svc == AWS_SQS ? "SQS" : svc == AWS_SNS ? "SNS" : "DynamoDB");
}


/* "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"
 * -> "ConditionalCheckFailedException" in buf. */
static const char *
aws_error_type(const char *type, char *buf, size_t len)
{
	const char	*p;
	size_t		 n;

	if ((p = strrchr(type, '#')) != NULL)
		type = p + 1;
	/* The header form may carry ":http://..." after the name. */
	n = strcspn(type, ":");
	if (n == 0)
		return (NULL);
	if (n >= len)
		n = len - 1;
	memcpy(buf, type, n);
	buf[n] = '\0';
	return (buf);
}

/* A query protocol answer (SNS): the body is the caller's to parse;
 * an error's code and message are read here. */
static void
aws_query_done(const struct httpc_response *resp, struct aws_ctx *ctx,
    struct aws_result *res)
{
	struct sns_error	*e;
	char			 msg[64];

	res->body = resp->body;
	res->body_len = resp->body_len;
	if (resp->status >= 200 && resp->status < 300) {
		res->ok = 1;
		ctx->cb(res, ctx->arg);
		return;
	}
	if ((e = calloc(1, sizeof(*e))) != NULL &&
	    sns_error_parse(resp->body, resp->body_len, e) == 0) {
		if (e->code[0] != '\0')
			res->error_type = e->code;
		if (e->message[0] != '\0')
			res->error_message = e->message;
	}
	if (res->error_message == NULL) {
		snprintf(msg, sizeof msg, "HTTP %ld", resp->status);
		res->error_message = msg;
	}
	/* SNS says ExpiredToken in the query protocol's Code: renew now,
	 * as for the JSON services. */
	creds_rejected(res->error_type);
	log_debug("%s %s: HTTP %ld %s: %s", aws_service_name(ctx->svc),
	    ctx->action, resp->status,
	    res->error_type != NULL ? res->error_type : "-",
	    res->error_message);
	ctx->cb(res, ctx->arg);
	free(e);
}

static void
aws_done(const struct httpc_response *resp, void *arg)
{
	struct aws_ctx		*ctx = arg;
	struct aws_result	 res;
	const cJSON		*v;
	char			 type[128], msg[256];

	memset(&res, 0, sizeof res);
	res.status = resp->status;
	res.retry_after = resp->retry_after;
	if (resp->curl_code != 0) {
		res.status = 0;
		res.error_message = resp->curl_error;
		log_debug("%s %s: transport error: %s",
		    aws_service_name(ctx->svc), ctx->action, resp->curl_error);
		goto out;
	}
	if (ctx->svc == AWS_SNS) {
		aws_query_done(resp, ctx, &res);
		free(ctx);
		return;
	}
	res.body = resp->body;
	res.body_len = resp->body_len;
	if (resp->body_len != 0)
		res.json = cJSON_ParseWithLength(resp->body, resp->body_len);
	else if (resp->status >= 200 && resp->status < 300)
		res.json = cJSON_CreateObject();	/* empty = no fields */

	if (resp->status >= 200 && resp->status < 300) {
		if (res.json != NULL && cJSON_IsObject(res.json))
			res.ok = 1;
		else {
			res.error_message = "reply is not a JSON object";
			log_warnx("%s %s: HTTP %ld but the reply is not a "
			    "JSON object", aws_service_name(ctx->svc),
			    ctx->action, resp->status);
		}
		goto out;
	}

	v = cJSON_GetObjectItemCaseSensitive(res.json, "__type");
	if (cJSON_IsString(v))
		res.error_type = aws_error_type(v->valuestring, type,
		    sizeof type);
	v = cJSON_GetObjectItemCaseSensitive(res.json, "message");
	if (!cJSON_IsString(v))
		v = cJSON_GetObjectItemCaseSensitive(res.json, "Message");
	if (cJSON_IsString(v))
		res.error_message = v->valuestring;
	else {
		snprintf(msg, sizeof msg, "HTTP %ld", resp->status);
		res.error_message = msg;
	}
	creds_rejected(res.error_type);
	log_debug("%s %s: HTTP %ld %s: %s", aws_service_name(ctx->svc),
	    ctx->action, resp->status,
	    res.error_type != NULL ? res.error_type : "-", res.error_message);

out:
	ctx->cb(&res, ctx->arg);
	cJSON_Delete(res.json);
	free(ctx);
}

int
aws_call(struct httpc *hc, const struct conf *conf, enum aws_service svc,
    const char *action, const char *body, size_t body_len, long timeout,
    aws_cb *cb, void *arg, void (*arg_free)(void *))
{
	struct httpc_request	 r;
	struct curl_slist	*h = NULL;
	struct aws_ctx		*ctx;
	const char		*endpoint, *target = NULL, *signame;
	const char		*akid, *secret, *token, *region;
	char			 url[1024], sigv4[128];

	if (svc == AWS_SQS) {
		endpoint = conf->aws.sqs_endpoint;
		target = "AmazonSQS";
		signame = "sqs";
	} else if (svc == AWS_SNS) {
		endpoint = conf->aws.sns_endpoint;
		signame = "sns";
	} else {
		endpoint = conf->aws.dynamodb_endpoint;
		target = "DynamoDB_20120810";
		signame = "dynamodb";
	}
	/* Not yet, or expired, or no region yet (instance metadata): the
	 * caller retries (creds.c logs why). */
	if (creds_current(&akid, &secret, &token) == -1)
		return (-1);
	/* An endpoint the configuration left to the region is built from
	 * the region this process has (creds.c), maybe read at start. */
	region = conf->aws.region != NULL ? conf->aws.region : creds_region();
	endpoint = creds_endpoint(endpoint, signame);
	if (endpoint == NULL || *endpoint == '\0' || region == NULL) {
		log_warnx("%s %s: no endpoint or region configured",
		    aws_service_name(svc), action);
		return (-1);
	}
	if ((size_t)snprintf(url, sizeof url, "%s/", endpoint) >= sizeof url ||
	    (size_t)snprintf(sigv4, sizeof sigv4, "aws:amz:%s:%s",
	    region, signame) >= sizeof sigv4 ||
	    strlen(action) >= sizeof ctx->action) {
		log_warnx("%s %s: endpoint, region or action too long",
		    aws_service_name(svc), action);
		return (-1);
	}

	/*
	 * libcurl signs every header set here, even a header-removing
	 * "Expect:" that is never sent (seen with 7.88: a wrong signature),
	 * so set only headers that go on the wire.
	 */
	if (target == NULL) {
		/* The query protocol: the body names the action. */
		if (httpc_header(&h, "Content-Type: "
		    "application/x-www-form-urlencoded; charset=utf-8"))
			goto nomem;
	} else if (httpc_header(&h,
	    "Content-Type: application/x-amz-json-1.0") ||
	    httpc_header(&h, "X-Amz-Target: %s.%s", target, action))
		goto nomem;
	/* libcurl does not add the token itself; as a header it is
	 * signed like the others. */
	if (token != NULL && httpc_header(&h, "X-Amz-Security-Token: %s",
	    token))
		goto nomem;

	if ((ctx = calloc(1, sizeof *ctx)) == NULL) {
		curl_slist_free_all(h);
		goto nomem;
	}
	ctx->cb = cb;
	ctx->arg = arg;
	ctx->arg_free = arg_free;
	ctx->svc = svc;
	snprintf(ctx->action, sizeof ctx->action, "%s", action);

	memset(&r, 0, sizeof r);
	r.url = url;
	r.headers = h;			/* httpc owns it from here */
	r.body = body;
	r.body_len = body_len;
	r.aws_sigv4 = sigv4;
	r.username = akid;
	r.password = secret;
	r.timeout = timeout;
	r.arg_free = aws_abort;
	if (httpc_post(hc, &r, aws_done, ctx) == -1) {
		log_warnx("%s %s: request not started", aws_service_name(svc),
		    action);
		free(ctx);
		return (-1);
	}
	log_debug("%s %s: %zu bytes to %s", aws_service_name(svc), action,
	    body_len, url);
	return (0);

nomem:
	log_warnx("%s %s: out of memory", aws_service_name(svc), action);
	return (-1);
}

char *
aws_json_print(struct cJSON *root, size_t *len)
{
	char	*s;

	s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (s != NULL && len != NULL)
		*len = strlen(s);
	return (s);
}
