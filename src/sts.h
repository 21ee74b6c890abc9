/*
 * sts.h - the AWS STS codec (sts.c): request bodies and replies of
 * AssumeRole and AssumeRoleWithWebIdentity over the AWS query protocol.
 */
#ifndef OUTBOXD_STS_H
#define OUTBOXD_STS_H

#include <stddef.h>

#define STS_VERSION		"2011-06-15"	/* the STS API version */
#define STS_DURATION_MIN	900	/* s, DurationSeconds at least (STS) */
#define STS_TEXT_MAX		16384	/* bytes kept of one element's text:
					   STS sets no size on a session
					   token, but any real one fits */
#define STS_ERR_LEN		257	/* bytes of an error field, NUL
					   included (longer is cut) */

enum sts_action {
	STS_ASSUME_ROLE,			/* AssumeRole */
	STS_ASSUME_ROLE_WEB_IDENTITY		/* AssumeRoleWithWebIdentity */
};

/* Credentials of an STS reply: malloc'd, wiped and freed by
 * sts_creds_clear(); expiration is the reply's ISO 8601 text. */
struct sts_creds {
	char	*access_key_id;
	char	*secret_access_key;
	char	*session_token;
	char	*expiration;
};

/* An ErrorResponse/Error: Type ("Sender", "Receiver"), Code
 * ("AccessDenied", "InvalidIdentityToken", "ExpiredTokenException",
 * "IDPCommunicationError", "Throttling", ...), Message. */
struct sts_error {
	char	type[STS_ERR_LEN];
	char	code[STS_ERR_LEN];
	char	message[STS_ERR_LEN];
};

/*
 * The form body of an STS call (AWS STS API: AssumeRole,
 * AssumeRoleWithWebIdentity; query protocol): Action, Version, RoleArn,
 * RoleSessionName, DurationSeconds (s, 0 = STS's default), and
 * ExternalId (AssumeRole, NULL = none) or WebIdentityToken
 * (AssumeRoleWithWebIdentity, required), percent-encoded per RFC 3986.
 * Returns the text (caller wipes it: it may hold the web identity token,
 * and frees it), or NULL if out of memory or a required value is NULL or
 * empty.
 */
char		*sts_body(enum sts_action, const char *role_arn,
		    const char *session_name, const char *extra,
		    long duration);
/*
 * The credentials of a reply of len bytes to action into *c:
 * ACTIONResponse/ACTIONResult/Credentials/{AccessKeyId, SecretAccessKey,
 * SessionToken, Expiration}, each exactly once, non-empty.  0, or -1
 * with *c cleared and a reason (static text, never from the reply) in
 * *why: not well-formed, another root, a DOCTYPE, a field missing or
 * twice, a text over STS_TEXT_MAX bytes, out of memory.
 */
int		 sts_creds_parse(enum sts_action, const char *xml,
		    size_t len, struct sts_creds *c, const char **why);
/* Wipe and free what *c holds (it may hold nothing). */
void		 sts_creds_clear(struct sts_creds *c);
/* An ErrorResponse of len bytes into *e (fields "" when absent).  0, or
 * -1 when it is not one (e is cleared). */
int		 sts_error_parse(const char *xml, size_t len, struct sts_error *e);
/* The Action name of action ("AssumeRole", ...). */
const char	*sts_action_name(enum sts_action);

#endif /* OUTBOXD_STS_H */
