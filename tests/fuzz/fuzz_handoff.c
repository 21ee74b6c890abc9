/*
 * fuzz_handoff.c - libFuzzer target for the handoff datagram: the input
 * is sent as one datagram on a socket pair that stands for relay 1's end
 * of src/handoff.c's pair, and handoff_recv() reads it.  A row it returns
 * must point inside the buffer, its parts one after the other to the
 * datagram's end, with the header's values; a datagram larger than the
 * buffer or shorter than the header is skipped with EMSGSIZE, one whose
 * lengths do not add up with EBADMSG; after it the socket is empty (one
 * datagram, one row).  Built and run by `make fuzz` (FUZZ_SECONDS); by
 * hand, from the top of a configured tree (config.h there):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc tests/fuzz/fuzz_handoff.c src/handoff.c -o fuzz_handoff && mkdir -p /tmp/fuzz-handoff && ./fuzz_handoff -max_len=70000 -max_total_time=300 /tmp/fuzz-handoff tests/fuzz/corpus/handoff
 *
 * Input: byte 0 gives the receive buffer: 0 = HANDOFF_MAX bytes, else 4
 * times its value; the datagram is the rest.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outboxd.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)
#define HDR_LEN		48	/* struct handoff_hdr: 4 int64, 4 uint32 */

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int	send_fd = -1;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int	sv[2], snd = 1 << 20;

	(void)argc;
	(void)argv;
	/* handoff.c's pair, the receiving end kept as relay 1 does; then
	 * that end replaced by one of a pair whose other end we hold. */
	CHECK(handoff_open() == 0);
	handoff_keep(HANDOFF_RECEIVER);
	CHECK(handoff_fd() != -1 && !handoff_can_send());
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0, sv) == 0);
	CHECK(dup2(sv[0], handoff_fd()) == handoff_fd());
	close(sv[0]);
	send_fd = sv[1];
	setsockopt(send_fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
	return 0;
}

static uint32_t
u32(const uint8_t *p)
{
	uint32_t	v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static int64_t
i64(const uint8_t *p)
{
	int64_t	v;

	memcpy(&v, p, sizeof(v));
	return v;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct claimed_row	 row;
	const uint8_t		*dg = data + 1;
	char			*buf, spare[16];
	size_t			 size, n;
	uint64_t		 sum;
	int			 rv;

	if (len < 1)
		return 0;
	size = data[0] == 0 ? HANDOFF_MAX : (size_t)data[0] * 4;
	n = len - 1;
	if (send(send_fd, dg, n, 0) != (ssize_t)n)
		return 0;		/* larger than the socket takes */
	CHECK((buf = malloc(size)) != NULL);
	memset(&row, 0xa5, sizeof(row));
	errno = 0;
	rv = handoff_recv(&row, buf, size);
	if (n > size || n < HDR_LEN) {
		CHECK(rv == -1 && errno == EMSGSIZE);
		goto done;
	}
	sum = (uint64_t)u32(dg + 32) + u32(dg + 36) + u32(dg + 40);
	if (sum != n - HDR_LEN) {
		CHECK(rv == -1 && errno == EBADMSG);
		goto done;
	}
	CHECK(rv == 1);
	CHECK(row.claim == i64(dg) && row.claimed_us == i64(dg + 8) &&
	    row.id == i64(dg + 16) && row.created_ms == i64(dg + 24));
	CHECK(row.type_len == u32(dg + 32) && row.key_len == u32(dg + 36) &&
	    row.payload_len == u32(dg + 40) && row.lease_ms == (long)u32(dg + 44));
	CHECK(row.type == buf + HDR_LEN);
	CHECK(row.key == row.type + row.type_len);
	CHECK(row.payload == row.key + row.key_len);
	CHECK(row.payload + row.payload_len == buf + n && n <= size);
	CHECK(memcmp(buf, dg, n) == 0);
done:
	/* nothing left over, nothing merged */
	CHECK(handoff_recv(&row, spare, sizeof(spare)) == 0);
	free(buf);
	return 0;
}
