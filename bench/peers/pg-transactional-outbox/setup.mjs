// setup.mjs polling|replication -- print the library's own setup SQL for the outbox
// (DatabaseSetupExporter, as the library's README "Database setup" suggests; roles skipped:
// the bench connects as the stack's one superuser, so listener and handler role are that user).
// Run the output with psql -f (autocommit: the slot creation must be its own transaction).
import { DatabaseSetupExporter } from 'pg-transactional-outbox';

const mode = process.argv[2];
const base = {
  outboxOrInbox: 'outbox',
  database: process.env.PTO_DB ?? 'pto',
  schema: 'public',
  table: 'outbox',
  listenerRole: process.env.PTO_ROLE ?? 'postgres',
};
if (mode === 'polling') {
  process.stdout.write(DatabaseSetupExporter.createPollingScript(
    { ...base, nextMessagesName: 'next_outbox_messages' }, true));
} else if (mode === 'replication') {
  process.stdout.write(DatabaseSetupExporter.createReplicationScript(
    { ...base, publication: 'pto_outbox_pub', replicationSlot: 'pto_outbox_slot' }, true));
} else {
  console.error('usage: setup.mjs polling|replication');
  process.exit(2);
}
