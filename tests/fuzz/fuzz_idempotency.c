/*
 * fuzz_idempotency.c - libFuzzer target for the Idempotency-Key field
 * value (src/idempotency.c).  Any input must be refused with a message or
 * give a key of 1 to IDEMPOTENCY_KEY_MAX printable ASCII characters; a
 * key, quoted again as an sf-string, must read back as itself.  Built and
 * run by `make fuzz` (FUZZ_SECONDS, FUZZ_TARGETS=idempotency); by hand,
 * from the top of a configured tree (config.h there):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc -I/usr/include/postgresql tests/fuzz/fuzz_idempotency.c src/idempotency.c -lcrypto -o fuzz_idempotency && mkdir -p /tmp/fuzz-idem && ./fuzz_idempotency -max_total_time=300 /tmp/fuzz-idem tests/fuzz/corpus/idempotency
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "outboxd.h"
#include "http.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char		 key[IDEMPOTENCY_KEY_MAX + 1], again[sizeof(key)];
	char		 quoted[2 * IDEMPOTENCY_KEY_MAX + 3], *v, *q;
	const char	*why = NULL;
	size_t		 i, n;

	/* evhttp hands over a NUL-terminated value: cut at a NUL, as it
	 * would never pass one. */
	if ((v = malloc(len + 1)) == NULL)
		return 0;
	memcpy(v, data, len);
	v[len] = '\0';
	if (idempotency_key_parse(v, key, &why) == -1) {
		CHECK(why != NULL && *why != '\0');
		free(v);
		return 0;
	}
	n = strlen(key);
	CHECK(n >= 1 && n <= IDEMPOTENCY_KEY_MAX);
	for (i = 0; i < n; i++)
		CHECK(key[i] >= 0x20 && key[i] <= 0x7e);
	q = quoted;
	*q++ = '"';
	for (i = 0; i < n; i++) {
		if (key[i] == '"' || key[i] == '\\')
			*q++ = '\\';
		*q++ = key[i];
	}
	*q++ = '"';
	*q = '\0';
	CHECK(idempotency_key_parse(quoted, again, &why) == 0);
	CHECK(strcmp(key, again) == 0);
	free(v);
	return 0;
}
