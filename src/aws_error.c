/*
 * aws_error.c - what an AWS service's failed answer means for a publish:
 * throttling, the client's fault, the server's, or no answer.  SQS (JSON
 * protocol) and SNS (query protocol) say it the same way.
 */
#include "config.h"

#include <string.h>

#include "outboxd.h"
#include "broker.h"

int
aws_throttled(const char *code, const char *text)
{
	const char	*v[2] = { code, text };
	int		 i;

	/* "ThrottlingException", "RequestThrottled", "Throttled",
	 * "KMSThrottling", "TooManyRequests"... */
	for (i = 0; i < 2; i++)
		if (v[i] != NULL && (strstr(v[i], "Throttl") != NULL ||
		    strstr(v[i], "TooManyRequests") != NULL))
			return (1);
	return (0);
}

int
aws_failure_reason(long status, const char *code, const char *message)
{
	if (status == 0)
		return (SINK_REASON_TRANSPORT);
	/* SQS and SNS throttle with HTTP 400, which is not the client's
	 * fault. */
	if (aws_throttled(code, message) || status == 429)
		return (SINK_REASON_THROTTLED);
	if (status == 408)
		return (SINK_REASON_TRANSPORT);
	if (status >= 400 && status <= 499)
		return (SINK_REASON_CLIENT);
	/* 5xx, and an answer that is no AWS reply at all. */
	return (SINK_REASON_SERVER);
}
