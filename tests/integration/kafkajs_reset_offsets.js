// Resets a consumer group's committed offsets of one topic to the earliest with
// kafkajs' admin client (admin.resetOffsets({ groupId, topic, earliest: true }): a
// consumer of the group seeks every partition to the sentinel -2 and commits it with
// OffsetCommit), then prints what OffsetFetch returns for the group as one JSON line.
// Usage: node kafkajs_reset_offsets.js BOOTSTRAP GROUP TOPIC
// kafkajs comes from target/test-node (scripts/install-test-deps.sh); run with
// NODE_PATH pointing at its node_modules. Exits 1 on any error; a resetOffsets that
// never settles leaves node nothing to wait for: it exits 0 without printing.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

async function main() {
  const [bootstrap, groupId, topic] = process.argv.slice(2)
  if (!topic) throw new Error('usage: kafkajs_reset_offsets.js BOOTSTRAP GROUP TOPIC')
  const kafka = new Kafka({
    clientId: 'drover-it-kafkajs',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: 3 },
  })
  const admin = kafka.admin()
  await admin.connect()
  try {
    await admin.resetOffsets({ groupId, topic, earliest: true })
    const fetched = await admin.fetchOffsets({ groupId, topics: [topic] })
    console.log(JSON.stringify(fetched))
  } finally {
    await admin.disconnect()
  }
}

main().catch(e => {
  console.error(e)
  process.exit(1)
})
