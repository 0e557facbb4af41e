// Produces N messages to TOPIC and consumes them back in consumer group GROUP with
// kafkajs over SASL_SSL (SCRAM-SHA-512, the broker's certificate checked against CA),
// or over mTLS when USER is "-" (no SASL; the client certificate and key are the PEM
// files named by KAFKAJS_CERT and KAFKAJS_KEY), then prints one JSON line:
// {"produced": N, "consumed": [values, sorted]}.
// Usage: KAFKAJS_PASSWORD=... node kafkajs_sasl.js BOOTSTRAP CA USER TOPIC GROUP N
// (the password comes from the environment, never the command line). kafkajs comes
// from target/test-node (scripts/install-test-deps.sh); run with NODE_PATH pointing at
// its node_modules. Exits 1 on any error, 2 when the messages do not all arrive in 60 s.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

async function main() {
  const [bootstrap, ca, username, topic, groupId, n] = process.argv.slice(2)
  if (!n) throw new Error('usage: kafkajs_sasl.js BOOTSTRAP CA USER TOPIC GROUP N')
  const ssl = { ca: [fs.readFileSync(ca, 'utf-8')] }
  let sasl
  if (username === '-') {
    ssl.cert = fs.readFileSync(process.env.KAFKAJS_CERT, 'utf-8')
    ssl.key = fs.readFileSync(process.env.KAFKAJS_KEY, 'utf-8')
  } else {
    sasl = { mechanism: 'scram-sha-512', username, password: process.env.KAFKAJS_PASSWORD }
  }
  const kafka = new Kafka({
    clientId: 'drover-it-kafkajs-sasl',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    ssl,
    sasl,
    retry: { retries: 5 },
  })
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < Number(n); i++) messages.push({ key: `k${i}`, value: `kjs-${i}` })
  await producer.send({ topic, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  const done = new Promise(resolve => {
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString())
        if (got.length >= Number(n)) resolve()
      },
    })
  })
  let timer
  const timeout = new Promise(resolve => { timer = setTimeout(() => resolve('timeout'), 60000) })
  const outcome = await Promise.race([done, timeout])
  clearTimeout(timer)
  await consumer.disconnect()
  console.log(JSON.stringify({ produced: Number(n), consumed: got.sort() }))
  if (outcome === 'timeout') process.exit(2)
}

main().catch(e => {
  console.error(e)
  process.exit(1)
})
