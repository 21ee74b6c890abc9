// listener.mjs polling|replication -- pg-transactional-outbox's outbox listener as its
// README shows it ("Implementing the transactional outbox producer"), its message publisher
// sending every outbox message to one SQS queue with SendMessage.
// env: PTO_DATABASE_URL, PTO_QUEUE_URL, SQS_ENDPOINT (the emulator), AWS_* (dummy)
import process from 'node:process';
import { SQSClient, SendMessageCommand } from '@aws-sdk/client-sqs';
import {
  getDefaultLogger,
  initializePollingMessageListener,
  initializeReplicationMessageListener,
} from 'pg-transactional-outbox';

const mode = process.argv[2];
const logger = getDefaultLogger('outbox');
const queueUrl = process.env.PTO_QUEUE_URL;
const sqs = new SQSClient({
  region: 'us-east-1',
  endpoint: process.env.SQS_ENDPOINT,
  credentials: {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? 'test',
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? 'test',
  },
});

// the message publisher: the whole outbox message, as JSON, to the queue
const messagePublisher = {
  handle: async (message) => {
    await sqs.send(new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: JSON.stringify(message),
    }));
  },
};

const dbListenerConfig = { connectionString: process.env.PTO_DATABASE_URL };
// the README's outbox settings (protections off, the outbox defaults)
const baseSettings = {
  dbSchema: 'public',
  dbTable: 'outbox',
  enableMaxAttemptsProtection: false,
  enablePoisonousMessageProtection: false,
};

let shutdown;
if (mode === 'replication') {
  // default strategies: the mutex concurrency controller (sequential processing)
  [shutdown] = initializeReplicationMessageListener(
    {
      outboxOrInbox: 'outbox',
      dbListenerConfig,
      settings: {
        ...baseSettings,
        dbPublication: 'pto_outbox_pub',
        dbReplicationSlot: 'pto_outbox_slot',
      },
    },
    messagePublisher,
    logger,
  );
} else if (mode === 'polling') {
  // the library's defaults: batch size 5, polling interval 500 ms, lock 5 s
  // (PTO_BATCH_SIZE / PTO_POLL_MS override them)
  const settings = {
    ...baseSettings,
    nextMessagesFunctionName: 'next_outbox_messages',
  };
  if (process.env.PTO_BATCH_SIZE) settings.nextMessagesBatchSize = Number(process.env.PTO_BATCH_SIZE);
  if (process.env.PTO_POLL_MS) settings.nextMessagesPollingIntervalInMs = Number(process.env.PTO_POLL_MS);
  [shutdown] = initializePollingMessageListener(
    { outboxOrInbox: 'outbox', dbListenerConfig, settings },
    messagePublisher,
    logger,
  );
} else {
  console.error('usage: listener.mjs polling|replication');
  process.exit(2);
}
logger.info(`pg-transactional-outbox ${mode} listener started`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  const t = setTimeout(() => process.exit(0), 5000);
  t.unref();
  try { await shutdown(); } catch (e) { logger.error(e, 'shutdown'); }
  sqs.destroy();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
