/*
 * test_json.c - the strict RFC 8259 checker (src/json.c): every text the
 * grammar allows passes, everything else is refused with the fault that
 * says why, the raw values of the members asked for come back, and
 * json_parse() refuses repeated member names after unescaping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "outboxd.h"

static const char *const fault_names[] = {
	"JSON_OK", "JSON_E_SYNTAX", "JSON_E_SPACE", "JSON_E_CONTROL",
	"JSON_E_ESCAPE", "JSON_E_SURROGATE", "JSON_E_UTF8", "JSON_E_NUL",
	"JSON_E_NUMBER", "JSON_E_DEPTH", "JSON_E_TRAILING",
	"JSON_E_DUPLICATE", "JSON_E_NOMEM",
};

static const char *
fault_name(enum json_fault f)
{
	if ((size_t)f < sizeof(fault_names) / sizeof(fault_names[0]))
		return fault_names[f];
	return "?";
}

/* len bytes at text must pass json_check() and json_parse(). */
static void
ok_len(const char *text, size_t len)
{
	struct json_error	 err;
	cJSON			*root;

	if (json_check(text, len, NULL, 0, &err) != 0)
		fail_msg("refused (%s at %zu): %.*s", fault_name(err.fault),
		    err.offset, (int)len, text);
	if ((root = json_parse(text, len, NULL, 0, &err)) == NULL)
		fail_msg("json_parse refused (%s): %.*s", fault_name(err.fault),
		    (int)len, text);
	cJSON_Delete(root);
}

static void
ok(const char *text)
{
	ok_len(text, strlen(text));
}

/* len bytes at text must be refused by json_check() with fault f. */
static void
bad_len(const char *text, size_t len, enum json_fault f)
{
	struct json_error	err;

	err.fault = JSON_OK;
	if (json_check(text, len, NULL, 0, &err) != -1)
		fail_msg("accepted: %.*s", (int)len, text);
	if (err.fault != f)
		fail_msg("%.*s: got %s, want %s", (int)len, text,
		    fault_name(err.fault), fault_name(f));
	assert_true(err.offset <= len);
	assert_non_null(json_message(err.fault));
}

static void
bad(const char *text, enum json_fault f)
{
	bad_len(text, strlen(text), f);
}

static void
test_valid(void **state)
{
	(void)state;
	ok("{}");
	ok("[]");
	ok("{\"a\":1}");
	ok(" \t\r\n{ \t\r\n\"a\" \t\r\n: \t\r\n[ 1 , 2 ] \t\r\n, \"b\":{}} "
	    "\t\r\n");
	ok("[true,false,null,\"\",0,-0,1,-1,0.5,-0.5,10,1e5,1E5,1e+5,1e-5,"
	    "1.5e10,-1.25E-3,0e0]");
	/* RFC 8259 allows any value at the top */
	ok("\"s\"");
	ok("0");
	ok("-12.5e+3");
	ok("true");
	ok("null");
	/* every escape */
	ok("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0041 \\u00e9 \\u20AC "
	    "\\ud83d\\ude00 \\uDBFF\\uDFFF\"");
	/* raw UTF-8 of 2, 3 and 4 bytes, the first and last of each, and
	 * DEL, which JSON does not count as a control character */
	ok("\"\xc2\x80 \xdf\xbf \xe0\xa0\x80 \xef\xbf\xbf \xf0\x90\x80\x80 "
	    "\xf4\x8f\xbf\xbf \x7f\"");
	/* a number far beyond a double, and long fractions */
	ok("[99999999999999999999999999999999999999999999999999999999999999999"
	    "999999999999,1.00000000000000000000000000000000000000000000000000"
	    "0000000000000001,1e400,1e-400]");
	/* only len bytes count */
	ok_len("{\"a\":1}garbage", 7);
}

static void
test_control_bytes(void **state)
{
	char	buf[16];
	int	c;

	(void)state;
	/* every byte below 0x20, raw inside a string */
	for (c = 0; c < 0x20; c++) {
		buf[0] = '"';
		buf[1] = 'x';
		buf[2] = (char)c;
		buf[3] = '"';
		bad_len(buf, 4, JSON_E_CONTROL);
	}
	bad("{\"customerId\":\"x\r\ninjected=1\"}", JSON_E_CONTROL);
	bad("[\"tab\there\"]", JSON_E_CONTROL);
	bad("[\"\x01\"]", JSON_E_CONTROL);
	/* in a member name too */
	bad("{\"a\nb\":1}", JSON_E_CONTROL);
	/* escaped they are fine */
	ok("\"x\\r\\ninjected=1 \\t \\u0001 \\u001f\"");
}

static void
test_whitespace(void **state)
{
	(void)state;
	/* only SP, HTAB, LF and CR separate tokens */
	bad("{\"a\":1,\f\"b\":2}", JSON_E_SPACE);
	bad("\f{}", JSON_E_SPACE);
	bad("{}\f", JSON_E_TRAILING);
	bad("[1,\v2]", JSON_E_SPACE);
	bad_len("[1,\0 2]", 6, JSON_E_SPACE);
	/* U+00A0 and U+FEFF (a byte order mark) are not whitespace */
	bad("[1,\xc2\xa0 2]", JSON_E_SYNTAX);
	bad("\xef\xbb\xbf{}", JSON_E_SYNTAX);
	bad("", JSON_E_SYNTAX);
	bad(" \t\r\n", JSON_E_SYNTAX);
	bad_len(NULL, 0, JSON_E_SYNTAX);
}

static void
test_escapes(void **state)
{
	(void)state;
	bad("\"\\x41\"", JSON_E_ESCAPE);
	bad("\"\\a\"", JSON_E_ESCAPE);
	bad("\"\\'\"", JSON_E_ESCAPE);
	bad("\"\\U0041\"", JSON_E_ESCAPE);
	bad("\"\\u41\"", JSON_E_ESCAPE);
	bad("\"\\u12G4\"", JSON_E_ESCAPE);
	bad("\"\\u004", JSON_E_ESCAPE);
	bad("\"\\0\"", JSON_E_ESCAPE);
	bad("\"\\", JSON_E_SYNTAX);
	bad("\"abc", JSON_E_SYNTAX);
	bad("'abc'", JSON_E_SYNTAX);
	/* \u0000 is JSON, but refused: it would cut the string */
	bad("\"a\\u0000b\"", JSON_E_NUL);
	bad("{\"\\u0000\":1}", JSON_E_NUL);
	/* a backslash then the text u0000 */
	ok("\"\\\\u0000\"");
}

static void
test_surrogates(void **state)
{
	(void)state;
	bad("\"\\ud83d\"", JSON_E_SURROGATE);		/* high alone */
	bad("\"\\ude00\"", JSON_E_SURROGATE);		/* low alone */
	bad("\"\\ude00\\ud83d\"", JSON_E_SURROGATE);	/* reversed */
	bad("\"\\ud83d\\ud83d\"", JSON_E_SURROGATE);	/* high, high */
	bad("\"\\ud83d\\u0041\"", JSON_E_SURROGATE);	/* high, not low */
	bad("\"\\ud83dx\"", JSON_E_SURROGATE);		/* high, text */
	bad("\"\\ud83d\\n\"", JSON_E_SURROGATE);	/* high, escape */
	bad("\"\\ud83d", JSON_E_SURROGATE);		/* high at end */
	bad("\"\\udbff\\ue000\"", JSON_E_SURROGATE);	/* past the lows */
	ok("\"\\ud800\\udc00\"");
	ok("\"\\uD83D\\uDE00\"");
	/* U+D7FF and U+E000 are characters */
	ok("\"\\ud7ff\\ue000\"");
}

static void
test_utf8(void **state)
{
	(void)state;
	bad("\"\x80\"", JSON_E_UTF8);			/* continuation */
	bad("\"\xbf\"", JSON_E_UTF8);
	bad("\"\xc0\xaf\"", JSON_E_UTF8);		/* overlong '/' */
	bad("\"\xc1\xbf\"", JSON_E_UTF8);		/* overlong 2 */
	bad("\"\xe0\x80\xaf\"", JSON_E_UTF8);		/* overlong 3 */
	bad("\"\xe0\x9f\xbf\"", JSON_E_UTF8);
	bad("\"\xf0\x80\x80\xaf\"", JSON_E_UTF8);	/* overlong 4 */
	bad("\"\xf0\x8f\xbf\xbf\"", JSON_E_UTF8);
	bad("\"\xed\xa0\x80\"", JSON_E_UTF8);		/* surrogate */
	bad("\"\xed\xbf\xbf\"", JSON_E_UTF8);
	bad("\"\xf4\x90\x80\x80\"", JSON_E_UTF8);	/* > U+10FFFF */
	bad("\"\xf5\x80\x80\x80\"", JSON_E_UTF8);
	bad("\"\xff\"", JSON_E_UTF8);
	bad("\"\xe2\x82\"", JSON_E_UTF8);		/* cut short */
	bad("\"\xe2\x82", JSON_E_UTF8);
	bad("\"\xc3\"", JSON_E_UTF8);
	bad("{\"\xc3\x28\":1}", JSON_E_UTF8);		/* in a name */
	/* outside a string any such byte is simply not JSON */
	bad("[\xc3\xa9]", JSON_E_SYNTAX);
}

static void
test_numbers(void **state)
{
	(void)state;
	bad("01", JSON_E_NUMBER);
	bad("[01]", JSON_E_NUMBER);
	bad("-01", JSON_E_NUMBER);
	bad("00", JSON_E_NUMBER);
	bad("[1.]", JSON_E_NUMBER);
	bad("[1.e2]", JSON_E_NUMBER);
	bad("[.5]", JSON_E_NUMBER);
	bad("[+1]", JSON_E_NUMBER);
	bad("[-]", JSON_E_NUMBER);
	bad("[-.5]", JSON_E_NUMBER);
	bad("[- 1]", JSON_E_NUMBER);
	bad("[1e]", JSON_E_NUMBER);
	bad("[1e+]", JSON_E_NUMBER);
	bad("[1E-]", JSON_E_NUMBER);
	bad("1.", JSON_E_NUMBER);
	bad("-", JSON_E_NUMBER);
	bad("[0x10]", JSON_E_SYNTAX);
	bad("[1.5.5]", JSON_E_SYNTAX);
	bad("[1e5e5]", JSON_E_SYNTAX);
	bad("[1,]", JSON_E_SYNTAX);
	bad("[NaN]", JSON_E_SYNTAX);
	bad("[Infinity]", JSON_E_SYNTAX);
	bad("[-Infinity]", JSON_E_NUMBER);
}

static void
test_literals_and_structure(void **state)
{
	(void)state;
	bad("[True]", JSON_E_SYNTAX);
	bad("[tru]", JSON_E_SYNTAX);
	bad("[truex]", JSON_E_SYNTAX);
	bad("[nul]", JSON_E_SYNTAX);
	bad("[undefined]", JSON_E_SYNTAX);
	bad("{", JSON_E_SYNTAX);
	bad("[", JSON_E_SYNTAX);
	bad("{\"a\"}", JSON_E_SYNTAX);
	bad("{\"a\":}", JSON_E_SYNTAX);
	bad("{\"a\":1,}", JSON_E_SYNTAX);
	bad("{,}", JSON_E_SYNTAX);
	bad("{a:1}", JSON_E_SYNTAX);
	bad("{'a':1}", JSON_E_SYNTAX);
	bad("{1:1}", JSON_E_SYNTAX);
	bad("[1 2]", JSON_E_SYNTAX);
	bad("[1}", JSON_E_SYNTAX);
	bad("{\"a\":1]", JSON_E_SYNTAX);
	bad("{}}", JSON_E_TRAILING);
	bad("{} x", JSON_E_TRAILING);
	bad("{}{}", JSON_E_TRAILING);
	bad("1 2", JSON_E_TRAILING);
	bad_len("{}\0", 3, JSON_E_TRAILING);
	bad("{} // comment", JSON_E_TRAILING);
	bad("/* c */ {}", JSON_E_SYNTAX);
}

static void
test_depth(void **state)
{
	char	*t;
	size_t	 n, i, d;

	(void)state;
	t = malloc(2 * (JSON_DEPTH_MAX + 1) + 1);
	assert_non_null(t);
	n = JSON_DEPTH_MAX;
	memset(t, '[', n);
	memset(t + n, ']', n);
	ok_len(t, 2 * n);
	n = JSON_DEPTH_MAX + 1;
	memset(t, '[', n);
	memset(t + n, ']', n);
	bad_len(t, 2 * n, JSON_E_DEPTH);
	free(t);

	/* objects count the same: {"a":{"a":...{}...}} */
	t = malloc(6 * (JSON_DEPTH_MAX + 1) + 1);
	assert_non_null(t);
	for (i = 0; i < 2; i++) {
		n = 0;
		for (d = 1; d < JSON_DEPTH_MAX + i; d++) {
			memcpy(t + n, "{\"a\":", 5);
			n += 5;
		}
		memcpy(t + n, "{}", 2);
		n += 2;
		for (d = 1; d < JSON_DEPTH_MAX + i; d++)
			t[n++] = '}';
		if (i == 0)
			ok_len(t, n);
		else
			bad_len(t, n, JSON_E_DEPTH);
	}
	free(t);
}

static void
test_members(void **state)
{
	struct json_member	want[3];
	struct json_error	err;
	const char		*t;

	(void)state;
	want[0].name = "customerId";
	want[1].name = "amountCents";
	want[2].name = "absent";
	t = " { \"customerId\" : \"c\\\"1\" , \"x\":{\"amountCents\":7},"
	    "\"amount\\u0043ents\"\t:\t-12.50e+1 , \"n\":[1] } ";
	assert_int_equal(json_check(t, strlen(t), want, 3, &err), 0);
	assert_non_null(want[0].value);
	assert_int_equal(want[0].len, strlen("\"c\\\"1\""));
	assert_memory_equal(want[0].value, "\"c\\\"1\"", want[0].len);
	/* the top-level member, found by its unescaped name, not the nested
	 * one, and only the token, without the whitespace around it */
	assert_non_null(want[1].value);
	assert_int_equal(want[1].len, strlen("-12.50e+1"));
	assert_memory_equal(want[1].value, "-12.50e+1", want[1].len);
	assert_null(want[2].value);

	/* a value that is a container: its whole text */
	t = "{\"customerId\":{\"a\":[1,{}]},\"amountCents\":[]}";
	assert_int_equal(json_check(t, strlen(t), want, 2, &err), 0);
	assert_int_equal(want[0].len, strlen("{\"a\":[1,{}]}"));
	assert_memory_equal(want[0].value, "{\"a\":[1,{}]}", want[0].len);
	assert_int_equal(want[1].len, 2);

	/* not an object at the top: nothing is found */
	t = "[{\"customerId\":\"c\"}]";
	assert_int_equal(json_check(t, strlen(t), want, 2, &err), 0);
	assert_null(want[0].value);

	/* a name longer than any wanted one is not confused with it */
	t = "{\"customerIdcustomerIdcustomerIdcustomerIdcustomerIdcustomerId"
	    "customerId\":1}";
	assert_int_equal(json_check(t, strlen(t), want, 2, &err), 0);
	assert_null(want[0].value);

	/* a fault says which wanted member's value it is in, and where */
	t = "{\"amountCents\":1,\"customerId\":\"a\x80\"}";
	assert_int_equal(json_check(t, strlen(t), want, 2, &err), -1);
	assert_int_equal(err.fault, JSON_E_UTF8);
	assert_int_equal(err.member, 0);
	assert_int_equal(err.offset, strlen("{\"amountCents\":1,"
	    "\"customerId\":\"a"));
	t = "{\"customerId\":\"a\",\"other\":\"\x80\"}";
	assert_int_equal(json_check(t, strlen(t), want, 2, &err), -1);
	assert_int_equal(err.fault, JSON_E_UTF8);
	assert_int_equal(err.member, -1);
	t = "{\"amountCents\":01}";
	assert_int_equal(json_check(t, strlen(t), want, 2, &err), -1);
	assert_int_equal(err.fault, JSON_E_NUMBER);
	assert_int_equal(err.member, 1);
}

/* json_parse() must refuse text as naming a member twice. */
static void
dup(const char *text)
{
	struct json_error	err;

	if (json_check(text, strlen(text), NULL, 0, &err) != 0)
		fail_msg("not even valid: %s", text);
	if (json_parse(text, strlen(text), NULL, 0, &err) != NULL)
		fail_msg("accepted: %s", text);
	if (err.fault != JSON_E_DUPLICATE)
		fail_msg("%s: got %s, want JSON_E_DUPLICATE", text,
		    fault_name(err.fault));
}

static void
test_duplicates(void **state)
{
	(void)state;
	dup("{\"a\":1,\"a\":1}");
	dup("{\"a\":1,\"b\":2,\"a\":3}");
	dup("{\"a\":1,\"\\u0061\":2}");		/* escaped, equal */
	dup("{\"\\u0061\":1,\"a\":2}");
	dup("{\"\xc3\xa9\":1,\"\\u00e9\":2}");	/* raw and escaped é */
	dup("{\"\\ud83d\\ude00\":1,\"\xf0\x9f\x98\x80\":2}");
	dup("{\"a\\/b\":1,\"a/b\":2}");
	dup("{\"\":1,\"\":2}");
	dup("{\"x\":{\"a\":1,\"a\":2}}");		/* nested */
	dup("[1,{\"k\":[{\"a\":1,\"a\":2}]}]");	/* inside arrays */
	/* different names, the same elsewhere, or differing in case: fine */
	ok("{\"a\":1,\"A\":2,\"b\":{\"a\":3},\"c\":[{\"a\":4},{\"a\":5}]}");
	ok("{\"a\":1,\"a \":2,\"\\u00e9\":3,\"e\\u0301\":4}");
}

static void
test_duplicates_large(void **state)
{
	struct json_error	 err;
	cJSON			*root, *c;
	char			*t;
	size_t			 n, i, cap = 20000 * 16;

	(void)state;
	/* 20000 distinct members: accepted (and not in quadratic time),
	 * each still found, and the tree still well linked */
	t = malloc(cap);
	assert_non_null(t);
	n = 0;
	t[n++] = '{';
	for (i = 20000; i > 0; i--)
		n += (size_t)snprintf(t + n, cap - n, "%s\"m%zu\":%zu",
		    i < 20000 ? "," : "", i, i);
	t[n++] = '}';
	root = json_parse(t, n, NULL, 0, &err);
	assert_non_null(root);
	assert_int_equal(cJSON_GetArraySize(root), 20000);
	c = cJSON_GetObjectItemCaseSensitive(root, "m777");
	assert_non_null(c);
	assert_int_equal(c->valueint, 777);
	/* sorted by name; the first's prev is the last, as cJSON keeps it */
	for (c = root->child; c->next != NULL; c = c->next)
		assert_true(strcmp(c->string, c->next->string) < 0);
	assert_ptr_equal(root->child->prev, c);
	assert_non_null(cJSON_AddNumberToObject(root, "zz", 1));
	assert_int_equal(cJSON_GetArraySize(root), 20001);
	cJSON_Delete(root);

	/* the same with the last member repeating the first */
	n--;
	n += (size_t)snprintf(t + n, cap - n, ",\"m20000\":0}");
	assert_null(json_parse(t, n, NULL, 0, &err));
	assert_int_equal(err.fault, JSON_E_DUPLICATE);
	free(t);
}

static void
test_messages(void **state)
{
	int	f;

	(void)state;
	for (f = JSON_E_SYNTAX; f <= JSON_E_NOMEM; f++) {
		assert_non_null(json_message((enum json_fault)f));
		assert_true(strncmp(json_message((enum json_fault)f),
		    "request body ", 13) == 0);
	}
	assert_string_equal(json_message(JSON_E_SYNTAX),
	    "request body is not valid JSON");
	assert_string_equal(json_message((enum json_fault)999),
	    "request body is not valid JSON");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_control_bytes),
		cmocka_unit_test(test_whitespace),
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_surrogates),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_literals_and_structure),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_members),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_duplicates_large),
		cmocka_unit_test(test_messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
