/* sink_http.c - stub, being written */
#include "config.h"
#include "outboxd.h"

int
sink_http_publish(struct httpc *hc, const struct conf *conf,
    struct outbox_msg *msgs, int n, sink_done_cb *done, void *arg)
{
	(void)hc; (void)conf; (void)msgs; (void)n; (void)done; (void)arg;
	return -1;
}
