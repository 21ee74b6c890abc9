/*
 * sts.c - request bodies and reply parsing for AWS STS AssumeRole and
 * AssumeRoleWithWebIdentity over the AWS query protocol (AWS STS API
 * reference: AssumeRole, AssumeRoleWithWebIdentity; AWS query protocol:
 * form-encoded request, XML response, ErrorResponse on error).  Pure
 * functions: no I/O, no logging, so the unit tests and the fuzzer can
 * drive them; the credential chain (creds*.c) does the calls.
 *
 * As in sns.c, the XML is read with expat and any DOCTYPE is refused
 * before expat reads what it declares: no entity is ever expanded and no
 * external one loaded.  The texts read are secrets: every buffer that
 * held one is wiped before it is freed, and no reason given for a
 * refusal quotes the reply.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <expat.h>

#include "outboxd.h"
#include "sts.h"

#define STS_NS_SEP	'\x01'	/* expat: "URI" SEP "local name" */
#define STS_DEPTH	4	/* element levels whose names count */
#define STS_NAME_MAX	40	/* bytes of a name that can match */

const char *
sts_action_name(enum sts_action a)
{
	return (a == STS_ASSUME_ROLE ? "AssumeRole" :
	    "AssumeRoleWithWebIdentity");
}

/* ---- the request body ------------------------------------------------- */

/* "&KEY=VALUE" (no '&' first) onto *b, VALUE percent-encoded; -1 if out
 * of memory. */
static int
sts_param(char **b, size_t *len, const char *key, const char *val)
{
	char	*e, *n;
	size_t	 kl = strlen(key), el;

	if (strlen(val) > INT_MAX ||
	    (e = curl_easy_escape(NULL, val, (int)strlen(val))) == NULL)
		return (-1);
	el = strlen(e);
	if ((n = malloc(*len + kl + el + 3)) == NULL) {
		curl_free(e);
		return (-1);
	}
	/* Copied, not realloc'd: the old text may hold the token. */
	memcpy(n, *b, *len);
	if (*len != 0)
		n[(*len)++] = '&';
	memcpy(n + *len, key, kl);
	n[*len + kl] = '=';
	memcpy(n + *len + kl + 1, e, el + 1);
	explicit_bzero(e, el);
	curl_free(e);
	explicit_bzero(*b, *len);
	free(*b);
	*b = n;
	*len += kl + 1 + el;
	return (0);
}

char *
sts_body(enum sts_action a, const char *role_arn, const char *session_name,
    const char *extra, long duration)
{
	char	*b, dur[24];
	size_t	 len = 0;
	int	 rv;

	if (role_arn == NULL || *role_arn == '\0' || session_name == NULL ||
	    *session_name == '\0' || (a == STS_ASSUME_ROLE_WEB_IDENTITY &&
	    (extra == NULL || *extra == '\0')))
		return (NULL);
	if ((b = calloc(1, 1)) == NULL)
		return (NULL);
	snprintf(dur, sizeof dur, "%ld", duration);
	rv = sts_param(&b, &len, "Action", sts_action_name(a));
	rv |= sts_param(&b, &len, "Version", STS_VERSION);
	rv |= sts_param(&b, &len, "RoleArn", role_arn);
	rv |= sts_param(&b, &len, "RoleSessionName", session_name);
	if (duration > 0)
		rv |= sts_param(&b, &len, "DurationSeconds", dur);
	if (extra != NULL && *extra != '\0')
		rv |= sts_param(&b, &len, a == STS_ASSUME_ROLE ? "ExternalId" :
		    "WebIdentityToken", extra);
	if (rv != 0) {
		explicit_bzero(b, len);
		free(b);
		return (NULL);
	}
	return (b);
}

/* ---- the reply -------------------------------------------------------- */

enum sts_field { F_NONE, F_AKID, F_SECRET, F_TOKEN, F_EXPIRATION, F_TYPE,
	F_CODE, F_MESSAGE };

struct sts_xml {
	XML_Parser		 p;
	const char		*why;		/* we stopped the parser */
	int			 depth;		/* of the open element */
	char			 path[STS_DEPTH + 1][STS_NAME_MAX];
	char			 root[STS_NAME_MAX], result[STS_NAME_MAX];
	enum sts_field		 field;		/* text being read */
	char			*text;		/* STS_TEXT_MAX + 1 bytes */
	size_t			 tlen;
	struct sts_creds	*creds;		/* a Credentials reply */
	struct sts_error	*err;		/* an ErrorResponse */
};

static int
sts_at(const struct sts_xml *x, int depth, const char *name)
{
	return (x->depth >= depth && strcmp(x->path[depth], name) == 0);
}

static void
sts_stop(struct sts_xml *x, const char *why)
{
	if (x->why == NULL)
		x->why = why;
	XML_StopParser(x->p, XML_FALSE);
}

/* Any DOCTYPE: refused, before a single declaration in it is read. */
static void XMLCALL
sts_xml_doctype(void *arg, const XML_Char *name, const XML_Char *sysid,
    const XML_Char *pubid, int has_internal_subset)
{
	(void)name;
	(void)sysid;
	(void)pubid;
	(void)has_internal_subset;
	sts_stop(arg, "a document type declaration (refused: AWS sends none)");
}

static enum sts_field
sts_field_of(const struct sts_xml *x)
{
	const char	*name = x->path[x->depth];

	if (x->creds != NULL && x->depth == 4 && sts_at(x, 1, x->root) &&
	    sts_at(x, 2, x->result) && sts_at(x, 3, "Credentials")) {
		if (strcmp(name, "AccessKeyId") == 0)
			return (F_AKID);
		if (strcmp(name, "SecretAccessKey") == 0)
			return (F_SECRET);
		if (strcmp(name, "SessionToken") == 0)
			return (F_TOKEN);
		if (strcmp(name, "Expiration") == 0)
			return (F_EXPIRATION);
	}
	if (x->err != NULL && x->depth == 3 && sts_at(x, 1, "ErrorResponse") &&
	    sts_at(x, 2, "Error")) {
		if (strcmp(name, "Type") == 0)
			return (F_TYPE);
		if (strcmp(name, "Code") == 0)
			return (F_CODE);
		if (strcmp(name, "Message") == 0)
			return (F_MESSAGE);
	}
	return (F_NONE);
}

static void XMLCALL
sts_xml_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	struct sts_xml	*x = arg;
	const char	*local;

	(void)attrs;
	x->depth++;
	x->field = F_NONE;
	if (x->depth > STS_DEPTH)
		return;
	/* The namespace does not matter; the local name does. */
	local = strrchr(name, STS_NS_SEP);
	local = local != NULL ? local + 1 : name;
	if (strlen(local) >= STS_NAME_MAX)
		local = "";		/* too long to be one of ours */
	snprintf(x->path[x->depth], STS_NAME_MAX, "%s", local);
	if ((x->field = sts_field_of(x)) != F_NONE)
		x->tlen = 0;
}

static void XMLCALL
sts_xml_text(void *arg, const XML_Char *s, int len)
{
	struct sts_xml	*x = arg;
	size_t		 n = len > 0 ? (size_t)len : 0;

	if (x->field == F_NONE || n == 0)
		return;
	if (n > STS_TEXT_MAX - x->tlen) {
		/* An error's text is only reported: cut it.  A credential
		 * cut would be wrong: refuse it. */
		if (x->field >= F_TYPE)
			n = STS_TEXT_MAX - x->tlen;
		else {
			sts_stop(x, "a credential in the reply is too long");
			return;
		}
	}
	memcpy(x->text + x->tlen, s, n);
	x->tlen += n;
	x->text[x->tlen] = '\0';
}

/* The text read into *dst (malloc'd), once: a second one is refused,
 * since two sets of credentials in one reply leave either in doubt. */
static void
sts_take(struct sts_xml *x, char **dst)
{
	if (*dst != NULL) {
		sts_stop(x, "a credential field appears twice in the reply");
		return;
	}
	if ((*dst = malloc(x->tlen + 1)) == NULL) {
		sts_stop(x, "out of memory");
		return;
	}
	memcpy(*dst, x->text, x->tlen + 1);
}

static void XMLCALL
sts_xml_end(void *arg, const XML_Char *name)
{
	struct sts_xml	*x = arg;
	char		*dst = NULL;
	size_t		 n;

	(void)name;
	x->text[x->tlen] = '\0';
	switch (x->field) {
	case F_AKID:
		sts_take(x, &x->creds->access_key_id);
		break;
	case F_SECRET:
		sts_take(x, &x->creds->secret_access_key);
		break;
	case F_TOKEN:
		sts_take(x, &x->creds->session_token);
		break;
	case F_EXPIRATION:
		sts_take(x, &x->creds->expiration);
		break;
	case F_TYPE:
		dst = x->err->type;
		break;
	case F_CODE:
		dst = x->err->code;
		break;
	case F_MESSAGE:
		dst = x->err->message;
		break;
	case F_NONE:
		break;
	}
	if (dst != NULL) {
		n = x->tlen < STS_ERR_LEN - 1 ? x->tlen : STS_ERR_LEN - 1;
		memcpy(dst, x->text, n);
		dst[n] = '\0';
	}
	explicit_bzero(x->text, x->tlen);
	x->tlen = 0;
	x->field = F_NONE;
	x->depth--;
}

/* Read the document xml (len bytes) into x, whose root must be x->root.
 * Returns 0, or -1 with the reason in *why. */
static int
sts_xml_read(struct sts_xml *x, const char *xml, size_t len,
    const char **why)
{
	enum XML_Status	 st;
	int		 rv = 0;

	*why = NULL;
	if (len > INT_MAX) {
		*why = "reply too large";
		return (-1);
	}
	if ((x->text = calloc(1, STS_TEXT_MAX + 1)) == NULL ||
	    (x->p = XML_ParserCreateNS(NULL, STS_NS_SEP)) == NULL) {
		free(x->text);
		x->text = NULL;
		*why = "out of memory";
		return (-1);
	}
	XML_SetUserData(x->p, x);
	XML_SetElementHandler(x->p, sts_xml_start, sts_xml_end);
	XML_SetCharacterDataHandler(x->p, sts_xml_text);
	XML_SetStartDoctypeDeclHandler(x->p, sts_xml_doctype);
	XML_SetParamEntityParsing(x->p, XML_PARAM_ENTITY_PARSING_NEVER);
	st = XML_Parse(x->p, xml != NULL ? xml : "", (int)len, XML_TRUE);
	if (x->why != NULL) {
		*why = x->why;
		rv = -1;
	} else if (st != XML_STATUS_OK) {
		*why = XML_ErrorString(XML_GetErrorCode(x->p));
		if (*why == NULL)
			*why = "not well-formed XML";
		rv = -1;
	} else if (strcmp(x->path[1], x->root) != 0) {
		*why = "unexpected root element";
		rv = -1;
	}
	XML_ParserFree(x->p);
	x->p = NULL;
	explicit_bzero(x->text, STS_TEXT_MAX + 1);
	free(x->text);
	x->text = NULL;
	return (rv);
}

static void
sts_wipe(char **p)
{
	if (*p != NULL) {
		explicit_bzero(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

void
sts_creds_clear(struct sts_creds *c)
{
	sts_wipe(&c->access_key_id);
	sts_wipe(&c->secret_access_key);
	sts_wipe(&c->session_token);
	sts_wipe(&c->expiration);
}

int
sts_creds_parse(enum sts_action a, const char *xml, size_t len,
    struct sts_creds *c, const char **why)
{
	struct sts_xml	x;

	memset(c, 0, sizeof *c);
	memset(&x, 0, sizeof x);
	x.creds = c;
	snprintf(x.root, sizeof x.root, "%sResponse", sts_action_name(a));
	snprintf(x.result, sizeof x.result, "%sResult", sts_action_name(a));
	if (sts_xml_read(&x, xml, len, why) == 0) {
		if (c->access_key_id != NULL && *c->access_key_id != '\0' &&
		    c->secret_access_key != NULL &&
		    *c->secret_access_key != '\0' &&
		    c->session_token != NULL && *c->session_token != '\0' &&
		    c->expiration != NULL && *c->expiration != '\0')
			return (0);
		*why = "the reply lacks AccessKeyId, SecretAccessKey, "
		    "SessionToken or Expiration";
	}
	sts_creds_clear(c);
	return (-1);
}

int
sts_error_parse(const char *xml, size_t len, struct sts_error *e)
{
	struct sts_xml	 x;
	const char	*why;

	memset(e, 0, sizeof *e);
	memset(&x, 0, sizeof x);
	x.err = e;
	snprintf(x.root, sizeof x.root, "ErrorResponse");
	if (sts_xml_read(&x, xml, len, &why) == -1) {
		memset(e, 0, sizeof *e);	/* nothing half read */
		return (-1);
	}
	return (0);
}
