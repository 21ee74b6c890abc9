/*
 * handoff.c - rows handed from the HTTP workers to relay 1 over a local
 * socket, already claimed, so that relay 1 publishes them without a
 * NOTIFY and a claim.
 *
 * Why: at a low rate every order would go commit, NOTIFY through the
 * listening relay's backend, the relay, a claim through the backend
 * again, the relay, the sink: each hop is a process to wake, and on a
 * small machine the wake-ups dominate the time from commit to ack.  So
 * the first order after a quiet spell is written already claimed by its
 * HTTP worker (the claim token, lease and first_claimed_at that
 * outbox_claim() would set; the row is its key's only row, so its head),
 * and after the commit the row goes to relay 1 here.  A datagram that is lost (relay 1
 * down for long, the worker killed between commit and send) loses
 * nothing: the row is claimed like any claimed row, and the end of its
 * lease gives it to every relay.
 *
 * The master opens the pair before its first fork and keeps both ends
 * for the workers of later generations (a reload, a restart): the HTTP
 * workers send on one end, relay 1 reads the other.  At a stop no relay 1
 * will come: the master shuts the reading end (handoff_shut()) before it
 * tells the workers, relay 1 gives back the rows left in it, and an HTTP
 * worker's later send fails with EPIPE, so it gives its row back itself.
 *
 * A datagram is never split or merged, and a socketpair's sender is
 * bounded by its send buffer only (not net.unix.max_dgram_qlen, which
 * applies to unconnected peers), about 200 handed-off rows at the default
 * size.
 *
 * A datagram is one row: struct handoff_hdr, then the event type, the
 * ordering key and the payload, not NUL-terminated.  Both ends are the
 * same binary, so the header is sent in host byte order.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <poll.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "outboxd.h"

struct handoff_hdr {
	int64_t		claim;
	int64_t		claimed_us;
	int64_t		id;
	int64_t		created_ms;
	uint32_t	type_len;
	uint32_t	key_len;
	uint32_t	payload_len;
	uint32_t	lease_ms;
};

static int	handoff_fds[2] = { -1, -1 };	/* [0] relay 1, [1] HTTP */

int
handoff_open(void)
{
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
	    handoff_fds) == -1) {
		handoff_fds[0] = handoff_fds[1] = -1;
		return -1;
	}
	return 0;
}

void
handoff_keep(enum handoff_end end)
{
	if (end != HANDOFF_RECEIVER && handoff_fds[0] != -1) {
		close(handoff_fds[0]);
		handoff_fds[0] = -1;
	}
	if (end != HANDOFF_SENDER && handoff_fds[1] != -1) {
		close(handoff_fds[1]);
		handoff_fds[1] = -1;
	}
}

int
handoff_can_send(void)
{
	return handoff_fds[1] != -1;
}

int
handoff_send(const struct claimed_row *row)
{
	struct handoff_hdr	h;
	struct iovec		iov[4];
	ssize_t			n;

	if (handoff_fds[1] == -1) {
		errno = EBADF;
		return -1;
	}
	if (sizeof(h) + row->type_len + row->key_len + row->payload_len >
	    HANDOFF_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	memset(&h, 0, sizeof(h));
	h.claim = row->claim;
	h.claimed_us = row->claimed_us;
	h.id = row->id;
	h.created_ms = row->created_ms;
	h.type_len = (uint32_t)row->type_len;
	h.key_len = (uint32_t)row->key_len;
	h.payload_len = (uint32_t)row->payload_len;
	h.lease_ms = (uint32_t)row->lease_ms;
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	iov[1].iov_base = (void *)row->type;
	iov[1].iov_len = row->type_len;
	iov[2].iov_base = (void *)row->key;
	iov[2].iov_len = row->key_len;
	iov[3].iov_base = (void *)row->payload;
	iov[3].iov_len = row->payload_len;
	do
		n = writev(handoff_fds[1], iov, 4);
	while (n == -1 && errno == EINTR);
	return n == -1 ? -1 : 0;
}

int
handoff_shut(void)
{
	if (handoff_fds[0] == -1) {
		errno = EBADF;
		return -1;
	}
	/* The socket is one, shared by every holder of this end: the
	 * master, relay 1 of each generation. */
	return shutdown(handoff_fds[0], SHUT_RD);
}

int
handoff_is_shut(void)
{
	struct pollfd	pfd = { handoff_fds[0], POLLRDHUP, 0 };

	/* Shut, an empty socket still polls readable; recv() says EAGAIN. */
	return handoff_fds[0] != -1 && poll(&pfd, 1, 0) == 1 &&
	    (pfd.revents & POLLRDHUP);
}

int
handoff_fd(void)
{
	return handoff_fds[0];
}

int
handoff_recv(struct claimed_row *row, char *buf, size_t size)
{
	struct handoff_hdr	h;
	ssize_t			n;

	do
		n = recv(handoff_fds[0], buf, size, MSG_TRUNC);
	while (n == -1 && errno == EINTR);
	if (n == -1)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	if ((size_t)n > size || (size_t)n < sizeof(h)) {
		errno = EMSGSIZE;
		return -1;
	}
	memcpy(&h, buf, sizeof(h));
	if ((uint64_t)h.type_len + h.key_len + h.payload_len !=
	    (size_t)n - sizeof(h)) {
		errno = EBADMSG;
		return -1;
	}
	row->claim = h.claim;
	row->claimed_us = h.claimed_us;
	row->id = h.id;
	row->created_ms = h.created_ms;
	row->lease_ms = h.lease_ms;
	row->type = buf + sizeof(h);
	row->type_len = h.type_len;
	row->key = row->type + h.type_len;
	row->key_len = h.key_len;
	row->payload = row->key + h.key_len;
	row->payload_len = h.payload_len;
	/* An order's row: the default destination, no headers. */
	row->destination = NULL;
	row->headers = NULL;
	row->headers_len = 0;
	row->replay = 0;
	return 1;
}

void
handoff_close(void)
{
	handoff_keep(HANDOFF_NONE);
}
