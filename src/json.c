/*
 * json.c - strict RFC 8259 checking of JSON text from clients.
 *
 * Why cJSON is not enough: cJSON 1.7 (Debian 12) accepts raw control bytes
 * inside strings ("x\r\ninjected=1"), the numbers 01, 1. and 1.e2, a form
 * feed or any byte below 0x21 as whitespace, and bytes that are not UTF-8;
 * it keeps the first of two members with the same name where JavaScript
 * and Python keep the last, so two services read one request two ways;
 * and it gives a number only as a double, which rounds money
 * (4999.0000000000001 is 4999, 1e-400 is 0).  Why not jansson: it has the
 * grammar right and JSON_REJECT_DUPLICATES, but it too gives numbers only
 * as a long long or a double (1e-400 is 0.0, 1e400 and integers beyond
 * 2^63 fail the whole parse), so the raw token of amountCents needs a scan
 * of our own anyway, and it would be a second JSON library next to the
 * cJSON every other file uses.  So json_check() below walks the text once,
 * without allocating, in the RFC 8259 grammar exactly, and hands back the
 * raw text of the top-level members the caller names; json_parse() then
 * lets cJSON build the tree (every text json_check() passes is one cJSON
 * reads the same way) and refuses repeated member names on that tree,
 * after cJSON has unescaped them.
 *
 * One limit RFC 8259 section 9 allows: nesting deeper than
 * JSON_DEPTH_MAX, which cJSON cannot parse either.  One refusal it does
 * not ask for: \u0000, which cJSON would turn into a string cut short
 * (and PostgreSQL text cannot hold NUL).
 */
#include "config.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "outboxd.h"

static const char *const json_messages[] = {
	[JSON_OK] = "valid JSON",
	[JSON_E_SYNTAX] = "request body is not valid JSON",
	[JSON_E_SPACE] = "request body is not valid JSON: a control character "
	    "outside a string (JSON whitespace is space, tab, LF and CR only)",
	[JSON_E_CONTROL] = "request body is not valid JSON: a control "
	    "character (U+0000 to U+001F) inside a string must be escaped",
	[JSON_E_ESCAPE] = "request body is not valid JSON: a string holds a "
	    "backslash escape JSON does not have",
	[JSON_E_SURROGATE] = "request body is not valid JSON: a \\u escape of "
	    "a UTF-16 surrogate that is not part of a high-low pair",
	[JSON_E_UTF8] = "request body is not valid JSON: it is not UTF-8",
	[JSON_E_NUL] = "request body is not valid JSON: \\u0000 is not "
	    "accepted in a string",
	[JSON_E_NUMBER] = "request body is not valid JSON: a number must be "
	    "-? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?",
	[JSON_E_DEPTH] = "request body is not valid JSON: nested more than "
	    "1000 deep",
	[JSON_E_TRAILING] = "request body is not valid JSON: something "
	    "follows the JSON value",
	[JSON_E_DUPLICATE] = "request body names a member twice in one "
	    "object",
	[JSON_E_NOMEM] = "request body could not be parsed: out of memory",
};

const char *
json_message(enum json_fault f)
{
	if ((unsigned int)f >= sizeof(json_messages) / sizeof(json_messages[0]))
		return json_messages[JSON_E_SYNTAX];
	return json_messages[f];
}

/* 1 for the bytes a string holds as they are: U+0020..U+007F but '"' and
 * '\\' (below 0x20 is refused, 0x80 and up starts UTF-8). */
static const unsigned char json_plain[256] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 00 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 10 */
	1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,	/* 20 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,	/* 30 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,	/* 40 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,	/* 50 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,	/* 60 */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,	/* 70 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 80 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 90 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* a0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* b0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* c0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* d0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* e0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* f0 */
};

static const unsigned char *
json_ws(const unsigned char *p, const unsigned char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' ||
	    *p == '\r'))
		p++;
	return p;
}

size_t
json_utf8_len(const unsigned char *p, const unsigned char *end)
{
	size_t		n, k;
	unsigned int	c = *p, min;

	if (c >= 0xc2 && c <= 0xdf) {
		n = 1;
		c &= 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 2;
		c &= 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 3;
		c &= 0x07;
		min = 0x10000;
	} else
		return 0;
	if ((size_t)(end - p) <= n)
		return 0;
	for (k = 1; k <= n; k++) {
		if ((p[k] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (p[k] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return n + 1;
}

/* The four hexadecimal digits at p as a number, or -1. */
static long
json_hex4(const unsigned char *p, const unsigned char *end)
{
	long	v = 0;
	int	i;

	if (end - p < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		v <<= 4;
		if (p[i] >= '0' && p[i] <= '9')
			v |= p[i] - '0';
		else if (p[i] >= 'a' && p[i] <= 'f')
			v |= p[i] - 'a' + 10;
		else if (p[i] >= 'A' && p[i] <= 'F')
			v |= p[i] - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* Append byte b to the decoded name (out may be NULL: no name wanted). */
#define JSON_PUT(b) do {						\
	if (out != NULL && *outlen < cap)				\
		out[*outlen] = (char)(b);				\
	if (out != NULL)						\
		(*outlen)++;						\
} while (0)

/*
 * The string whose opening quote is just before *pp: on success *pp is
 * past its closing quote.  With out, the unescaped bytes go there (at most
 * cap of them) and *outlen counts them all, so *outlen > cap means cut.
 */
static enum json_fault
json_string(const unsigned char **pp, const unsigned char *end, char *out,
    size_t cap, size_t *outlen)
{
	const unsigned char	*p = *pp, *run;
	size_t			 n;
	long			 u, lo;
	enum json_fault		 f = JSON_E_SYNTAX;

	if (out != NULL)
		*outlen = 0;
	for (;;) {
		/* the common case first: a run of plain ASCII */
		for (run = p; p < end && json_plain[*p]; p++)
			;
		if (out != NULL && p > run) {
			n = (size_t)(p - run);
			if (*outlen < cap)
				memcpy(out + *outlen, run, n < cap - *outlen ?
				    n : cap - *outlen);
			*outlen += n;
		}
		if (p == end)
			goto fail;
		if (*p == '"')
			break;
		if (*p < 0x20) {
			f = JSON_E_CONTROL;
			goto fail;
		}
		if (*p >= 0x80) {
			if ((n = json_utf8_len(p, end)) == 0) {
				f = JSON_E_UTF8;
				goto fail;
			}
			for (; n > 0; n--, p++)
				JSON_PUT(*p);
			continue;
		}
		/* a backslash */
		if (++p == end)
			goto fail;
		switch (*p) {
		case '"':
		case '\\':
		case '/':
			JSON_PUT(*p);
			break;
		case 'b':
			JSON_PUT('\b');
			break;
		case 'f':
			JSON_PUT('\f');
			break;
		case 'n':
			JSON_PUT('\n');
			break;
		case 'r':
			JSON_PUT('\r');
			break;
		case 't':
			JSON_PUT('\t');
			break;
		case 'u':
			if ((u = json_hex4(p + 1, end)) == -1) {
				f = JSON_E_ESCAPE;
				goto fail;
			}
			p += 4;
			if (u == 0) {
				f = JSON_E_NUL;
				goto fail;
			}
			if (u >= 0xdc00 && u <= 0xdfff) {
				f = JSON_E_SURROGATE;
				goto fail;
			}
			if (u >= 0xd800 && u <= 0xdbff) {
				if (end - p < 3 || p[1] != '\\' || p[2] != 'u' ||
				    (lo = json_hex4(p + 3, end)) < 0xdc00 ||
				    lo > 0xdfff) {
					f = JSON_E_SURROGATE;
					goto fail;
				}
				p += 6;
				u = 0x10000 + ((u - 0xd800) << 10) +
				    (lo - 0xdc00);
			}
			if (u < 0x80)
				JSON_PUT(u);
			else if (u < 0x800) {
				JSON_PUT(0xc0 | (u >> 6));
				JSON_PUT(0x80 | (u & 0x3f));
			} else if (u < 0x10000) {
				JSON_PUT(0xe0 | (u >> 12));
				JSON_PUT(0x80 | ((u >> 6) & 0x3f));
				JSON_PUT(0x80 | (u & 0x3f));
			} else {
				JSON_PUT(0xf0 | (u >> 18));
				JSON_PUT(0x80 | ((u >> 12) & 0x3f));
				JSON_PUT(0x80 | ((u >> 6) & 0x3f));
				JSON_PUT(0x80 | (u & 0x3f));
			}
			break;
		default:
			f = JSON_E_ESCAPE;
			goto fail;
		}
		p++;
	}
	*pp = p + 1;
	return JSON_OK;
fail:
	*pp = p;
	return f;
}

#undef JSON_PUT

#define JSON_DIGIT(p, end)	((p) < (end) && *(p) >= '0' && *(p) <= '9')

/* The number at *pp: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)? */
static enum json_fault
json_number(const unsigned char **pp, const unsigned char *end)
{
	const unsigned char	*p = *pp;

	if (p < end && *p == '-')
		p++;
	if (p < end && *p == '0') {
		/* no leading zero: 01 is not 1 */
		p++;
		if (JSON_DIGIT(p, end))
			goto fail;
	} else if (JSON_DIGIT(p, end) && *p != '0') {
		while (JSON_DIGIT(p, end))
			p++;
	} else
		goto fail;
	if (p < end && *p == '.') {
		p++;
		if (!JSON_DIGIT(p, end))
			goto fail;
		while (JSON_DIGIT(p, end))
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (!JSON_DIGIT(p, end))
			goto fail;
		while (JSON_DIGIT(p, end))
			p++;
	}
	*pp = p;
	return JSON_OK;
fail:
	*pp = p;
	return JSON_E_NUMBER;
}

/* Is the literal lit (true, false, null) at *pp?  Then step over it. */
static int
json_literal(const unsigned char **pp, const unsigned char *end,
    const char *lit)
{
	size_t	n = strlen(lit);

	if ((size_t)(end - *pp) < n || memcmp(*pp, lit, n) != 0)
		return 0;
	*pp += n;
	return 1;
}

/*
 * Check that the len bytes at text are one JSON text (RFC 8259) and
 * nothing else.  For each of the nwant entries of want, a name of a
 * member of the top-level object, set value and len to the raw text of
 * that member's value (the last one if the name is repeated; json_parse()
 * refuses that), or value to NULL when there is no such member.  One pass,
 * no allocation.  Returns 0, or -1 with *err saying what and where.
 */
int
json_check(const char *text, size_t len, struct json_member *want,
    size_t nwant, struct json_error *err)
{
	const unsigned char	*base, *p, *end, *vstart = NULL;
	unsigned char		 objects[(JSON_DEPTH_MAX + 7) / 8];
	char			 name[JSON_NAME_MAX];
	size_t			 depth = 0, nlen = 0, i;
	int			 capture = -1, obj;
	enum json_fault		 f;

	for (i = 0; i < nwant; i++) {
		want[i].value = NULL;
		want[i].len = 0;
	}
	if (text == NULL) {		/* no body at all */
		text = "";
		len = 0;
	}
	p = base = (const unsigned char *)text;
	end = base + len;

value:
	p = json_ws(p, end);
	if (p == end)
		goto syntax;
	switch (*p) {
	case '{':
	case '[':
		if (depth == JSON_DEPTH_MAX) {
			f = JSON_E_DEPTH;
			goto fail;
		}
		obj = *p == '{';
		if (obj)
			objects[depth / 8] |= 1u << (depth % 8);
		else
			objects[depth / 8] &= ~(1u << (depth % 8));
		depth++;
		p = json_ws(p + 1, end);
		if (p < end && *p == (obj ? '}' : ']')) {
			p++;
			depth--;
			goto next;
		}
		if (obj)
			goto member;
		goto value;
	case '"':
		p++;
		if ((f = json_string(&p, end, NULL, 0, NULL)) != JSON_OK)
			goto fail;
		goto next;
	case 't':
		if (!json_literal(&p, end, "true"))
			goto syntax;
		goto next;
	case 'f':
		if (!json_literal(&p, end, "false"))
			goto syntax;
		goto next;
	case 'n':
		if (!json_literal(&p, end, "null"))
			goto syntax;
		goto next;
	case '-':
	case '+':
	case '.':
	case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		if ((f = json_number(&p, end)) != JSON_OK)
			goto fail;
		goto next;
	default:
		goto syntax;
	}

member:
	/* at a member's name, just after '{' or ',' and whitespace */
	if (p == end || *p != '"')
		goto syntax;
	p++;
	if (depth == 1 && nwant > 0)
		f = json_string(&p, end, name, sizeof(name), &nlen);
	else
		f = json_string(&p, end, NULL, 0, NULL);
	if (f != JSON_OK)
		goto fail;
	p = json_ws(p, end);
	if (p == end || *p != ':')
		goto syntax;
	p++;
	if (depth == 1 && nwant > 0 && nlen <= sizeof(name))
		for (i = 0; i < nwant; i++)
			if (strncmp(want[i].name, name, nlen) == 0 &&
			    want[i].name[nlen] == '\0') {
				capture = (int)i;
				vstart = json_ws(p, end);
				break;
			}
	goto value;

next:
	/* a value ends at p */
	if (capture != -1 && depth == 1) {
		want[capture].value = (const char *)vstart;
		want[capture].len = (size_t)(p - vstart);
		capture = -1;
	}
	p = json_ws(p, end);
	if (depth == 0) {
		if (p == end)
			return 0;
		f = JSON_E_TRAILING;
		goto fail;
	}
	if (p == end)
		goto syntax;
	obj = objects[(depth - 1) / 8] & (1u << ((depth - 1) % 8));
	if (*p == ',') {
		p = json_ws(p + 1, end);
		if (obj)
			goto member;
		goto value;
	}
	if (*p == (obj ? '}' : ']')) {
		p++;
		depth--;
		goto next;
	}

syntax:
	f = p < end && *p < 0x20 ? JSON_E_SPACE : JSON_E_SYNTAX;
fail:
	err->fault = f;
	err->offset = (size_t)(p - base);
	err->member = capture;
	return -1;
}

/* Sort the n members of a NULL-terminated list by name, stably (merge
 * sort: n log n compares, no allocation); returns the new head. */
static cJSON *
json_sort(cJSON *head, size_t n)
{
	cJSON	*a, *b, *out = NULL, **tail = &out;
	size_t	 i;

	if (n < 2)
		return head;
	for (a = head, i = 1; i < n / 2; i++)
		a = a->next;
	b = a->next;
	a->next = NULL;
	a = json_sort(head, n / 2);
	b = json_sort(b, n - n / 2);
	while (a != NULL && b != NULL) {
		if (strcmp(b->string, a->string) < 0) {
			*tail = b;
			b = b->next;
		} else {
			*tail = a;
			a = a->next;
		}
		tail = &(*tail)->next;
	}
	*tail = a != NULL ? a : b;
	return out;
}

/* Objects of up to this many members are checked pair by pair, in place;
 * larger ones are sorted first. */
#define JSON_PAIRWISE_MAX	8

#define JSON_IS(node, t)	(((node)->type & 0xff) == (t))

/*
 * -1 if an object anywhere in the tree at node has two members with the
 * same (unescaped) name, else 0.  Comparing each pair of a large object
 * would let one body cost seconds, so one of more than JSON_PAIRWISE_MAX
 * members is sorted first (n log n) and keeps that order.  json_check()
 * refused \u0000, so no name is cut short.
 */
static int
json_unique(cJSON *node)
{
	cJSON	*c, *d, *prev;
	size_t	 n = 0;

	if (JSON_IS(node, cJSON_Object) && node->child != NULL) {
		for (c = node->child; c != NULL; c = c->next)
			n++;
		if (n <= JSON_PAIRWISE_MAX) {
			for (c = node->child; c != NULL; c = c->next)
				for (d = c->next; d != NULL; d = d->next)
					if (strcmp(c->string, d->string) == 0)
						return -1;
		} else {
			node->child = json_sort(node->child, n);
			/* cJSON's links: the first member's prev is the
			 * last */
			for (prev = NULL, c = node->child; c != NULL;
			    c = c->next) {
				c->prev = prev;
				prev = c;
			}
			node->child->prev = prev;
			for (c = node->child; c->next != NULL; c = c->next)
				if (strcmp(c->string, c->next->string) == 0)
					return -1;
		}
	}
	for (c = node->child; c != NULL; c = c->next)
		if ((JSON_IS(c, cJSON_Object) || JSON_IS(c, cJSON_Array)) &&
		    c->child != NULL && json_unique(c) == -1)
			return -1;
	return 0;
}

/*
 * json_check(), then the cJSON tree of the text, refused when an object
 * in it names a member twice: "a" and "\u0061" are the same name.  The
 * members of an object of more than JSON_PAIRWISE_MAX come back sorted by
 * name.  Returns the tree
 * (caller cJSON_Delete()s), or NULL with *err set.
 */
struct cJSON *
json_parse(const char *text, size_t len, struct json_member *want,
    size_t nwant, struct json_error *err)
{
	cJSON	*root;

	if (json_check(text, len, want, nwant, err) == -1)
		return NULL;
	err->offset = 0;
	err->member = -1;
	if ((root = cJSON_ParseWithLength(text, len)) == NULL) {
		err->fault = JSON_E_NOMEM;
		return NULL;
	}
	if (json_unique(root) == -1) {
		cJSON_Delete(root);
		err->fault = JSON_E_DUPLICATE;
		return NULL;
	}
	err->fault = JSON_OK;
	return root;
}
