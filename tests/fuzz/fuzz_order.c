/*
 * fuzz_order.c - libFuzzer target for the POST /orders body: src/json.c's
 * strict RFC 8259 check and src/order.c's validation.  Any input must be
 * refused with a stable code or give an order within the documented
 * bounds; a text json_check() passes must be one cJSON reads too (json.c
 * promises it), and json_parse() must agree with json_check().  Built and
 * run by `make fuzz` (FUZZ_SECONDS, FUZZ_TARGETS=order); by hand, from the
 * top of a configured tree (config.h there):
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc tests/fuzz/fuzz_order.c src/order.c src/json.c -lcjson -o fuzz_order && mkdir -p /tmp/fuzz-order && ./fuzz_order -max_total_time=300 /tmp/fuzz-order tests/fuzz/corpus/order
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "outboxd.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct json_member	 want[] = { { "customerId", NULL, 0 },
				    { "amountCents", NULL, 0 } };
	struct json_error	 jerr;
	struct order_input	 in;
	struct order_error	 oerr;
	const char		*text = (const char *)data;
	cJSON			*tree;
	int			 checked;

	checked = json_check(text, len, want, 2, &jerr) == 0;
	if (checked) {
		CHECK(want[0].value == NULL ||
		    (want[0].value >= text && want[0].value + want[0].len <=
		    text + len));
		tree = cJSON_ParseWithLength(text, len);
		CHECK(tree != NULL);
		cJSON_Delete(tree);
	} else
		CHECK(jerr.offset <= len && json_message(jerr.fault) != NULL);
	tree = json_parse(text, len, want, 2, &jerr);
	/* json_parse() refuses what json_check() refuses, and more only for
	 * a repeated name (or no memory) */
	CHECK(tree == NULL || checked);
	CHECK(tree != NULL || !checked || jerr.fault == JSON_E_DUPLICATE ||
	    jerr.fault == JSON_E_NOMEM);
	cJSON_Delete(tree);

	memset(&oerr, 0, sizeof(oerr));
	if (order_parse(text, len, &in, &oerr) == 0) {
		CHECK(checked);
		CHECK(in.customer_id_len >= 1 &&
		    in.customer_id_len <= ORDER_CUSTOMER_ID_MAX);
		CHECK(strlen(in.customer_id) == in.customer_id_len);
		CHECK(order_utf8_valid((const unsigned char *)in.customer_id,
		    in.customer_id_len));
		CHECK(in.amount_cents >= 0 &&
		    in.amount_cents <= ORDER_AMOUNT_MAX);
	} else
		CHECK(oerr.code != NULL && oerr.message != NULL);
	return 0;
}
