/*
 * conf_wal.c - relay.mode and the relay.wal_* keys: which way the relays
 * take events (claiming rows with SQL, or streaming them from a logical
 * replication slot, relay_wal.c) and the names the slot mode uses.
 *
 * conf.c owns the libconfuse tables (relay_opts holds these keys) and
 * calls conf_wal_validators() before the parse, conf_wal_fill() after.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <confuse.h>

#include "outboxd.h"
#include "conf.h"

static int
conf_wal_v_mode(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0);

	if (v == NULL || (strcmp(v, "table") != 0 && strcmp(v, "wal") != 0)) {
		cfg_error(cfg, "relay.mode = \"%s\": expected \"table\" or "
		    "\"wal\"", v != NULL ? v : "");
		return -1;
	}
	return 0;
}

/*
 * A slot or publication name: 1 to 63 of [a-z0-9_], PostgreSQL's rule for
 * replication slot names, which also makes it an identifier that needs
 * no quoting (the publication's name is written into statements).
 */
static int
conf_wal_v_name(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0), *p;

	if (v == NULL || *v == '\0' || strlen(v) > 63)
		goto bad;
	for (p = v; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '_'))
			goto bad;
	return 0;
bad:
	cfg_error(cfg, "relay.%s: expected 1 to 63 lower-case letters, digits "
	    "or '_' (PostgreSQL's rule for replication slot names)",
	    cfg_opt_name(opt));
	return -1;
}

/* The prefix of pg_logical_emit_message(): 1 to 63 printable ASCII
 * characters (compared byte for byte with each message's). */
static int
conf_wal_v_prefix(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0), *p;

	if (v == NULL || *v == '\0' || strlen(v) > 63)
		goto bad;
	for (p = v; *p != '\0'; p++)
		if (*p < 0x21 || *p > 0x7e)
			goto bad;
	return 0;
bad:
	cfg_error(cfg, "relay.wal_message_prefix: expected 1 to 63 printable "
	    "ASCII characters, no space");
	return -1;
}

static int
conf_wal_v_lag(cfg_t *cfg, cfg_opt_t *opt)
{
	long	v = cfg_opt_getnint(opt, cfg_opt_size(opt) - 1);

	if (v < 0) {
		cfg_error(cfg, "relay.wal_lag_warning = %ld is out of range "
		    "(0: never, else bytes)", v);
		return -1;
	}
	return 0;
}

void
conf_wal_validators(cfg_t *cfg)
{
	cfg_set_validate_func(cfg, "relay|mode", conf_wal_v_mode);
	cfg_set_validate_func(cfg, "relay|wal_slot", conf_wal_v_name);
	cfg_set_validate_func(cfg, "relay|wal_publication", conf_wal_v_name);
	cfg_set_validate_func(cfg, "relay|wal_message_prefix",
	    conf_wal_v_prefix);
	cfg_set_validate_func(cfg, "relay|wal_lag_warning", conf_wal_v_lag);
}

void
conf_wal_fill(cfg_t *r, struct conf *c)
{
	c->relay.mode = strcmp(cfg_getstr(r, "mode"), "wal") == 0 ?
	    CONF_RELAY_WAL : CONF_RELAY_TABLE;
	snprintf(c->relay.wal_slot, sizeof(c->relay.wal_slot), "%s",
	    cfg_getstr(r, "wal_slot"));
	snprintf(c->relay.wal_publication, sizeof(c->relay.wal_publication),
	    "%s", cfg_getstr(r, "wal_publication"));
	snprintf(c->relay.wal_message_prefix,
	    sizeof(c->relay.wal_message_prefix), "%s",
	    cfg_getstr(r, "wal_message_prefix"));
	c->relay.wal_lag_warning = cfg_getint(r, "wal_lag_warning");
}
