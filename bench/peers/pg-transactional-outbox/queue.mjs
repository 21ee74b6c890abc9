// queue.mjs create NAME | purge URL | depth URL -- the bench's SQS chores for this peer
// (env: SQS_ENDPOINT, AWS_* dummy credentials)
import { SQSClient, CreateQueueCommand, PurgeQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
const [cmd, arg] = process.argv.slice(2);
const sqs = new SQSClient({ region: 'us-east-1', endpoint: process.env.SQS_ENDPOINT });
if (cmd === 'create') {
  console.log((await sqs.send(new CreateQueueCommand({ QueueName: arg }))).QueueUrl);
} else if (cmd === 'purge') {
  await sqs.send(new PurgeQueueCommand({ QueueUrl: arg }));
} else if (cmd === 'depth') {
  const { Attributes: a } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: arg,
    AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }));
  console.log(Number(a.ApproximateNumberOfMessages) + Number(a.ApproximateNumberOfMessagesNotVisible));
} else {
  console.error('usage: queue.mjs create NAME | purge URL | depth URL'); process.exit(2);
}
