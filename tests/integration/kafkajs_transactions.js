// Runs N transactions back to back with kafkajs' transactional producer (each: one
// message to partition 0 of TOPIC, then commit), then prints one JSON line:
// {"transactions": N, "seconds": S, "errors": [log lines at ERROR]}. kafkajs logs an
// ERROR line (and waits 300 ms) whenever the broker answers CONCURRENT_TRANSACTIONS to
// the next transaction's AddPartitionsToTxn, which is what the test looks for.
// Usage: node kafkajs_transactions.js BOOTSTRAP TOPIC TRANSACTIONAL_ID N
// kafkajs comes from target/test-node (scripts/install-test-deps.sh); run with
// NODE_PATH pointing at its node_modules. Exits 1 on any error.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

async function main() {
  const [bootstrap, topic, transactionalId, n] = process.argv.slice(2)
  if (!n) throw new Error('usage: kafkajs_transactions.js BOOTSTRAP TOPIC TRANSACTIONAL_ID N')
  const errors = []
  const kafka = new Kafka({
    clientId: 'drover-it-kafkajs-txn',
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    logCreator: () => ({ level, log }) => {
      if (level <= logLevel.ERROR) errors.push(`${log.message} ${log.error || ''}`.trim())
    },
  })
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const started = process.hrtime.bigint()
  for (let i = 0; i < Number(n); i++) {
    const txn = await producer.transaction()
    await txn.send({ topic, messages: [{ partition: 0, value: `txn-${i}` }] })
    await txn.commit()
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  await producer.disconnect()
  console.log(JSON.stringify({ transactions: Number(n), seconds, errors }))
}

main().catch(e => {
  console.error(e)
  process.exit(1)
})
