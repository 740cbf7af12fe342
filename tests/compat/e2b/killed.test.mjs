// A sandbox that goes away under a running command: the HTTP stream is
// dropped as E2B drops it, and the SDK (after its /health check) says the
// sandbox was killed, not that the service is unavailable.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, TimeoutError } from 'e2b'
import { tracker, until } from './common.mjs'

const t = tracker()
after(() => t.cleanup())

test('killing the sandbox while a command runs: TimeoutError "killed or reached its end of life"', async () => {
  const sbx = t.add(await Sandbox.create())
  const cmd = await sbx.commands.run('sleep 60', { background: true })
  await sbx.kill()
  const err = await cmd.wait().catch((e) => e)
  assert.ok(err instanceof TimeoutError, `${err?.name}: ${err?.message}`)
  assert.match(err.message, /sandbox was killed or reached its end of life/)
})

test('a foreground command of a sandbox killed from elsewhere fails the same way', async () => {
  const sbx = t.add(await Sandbox.create())
  const run = sbx.commands.run('echo started; sleep 60').catch((e) => e)
  // kill once the command is surely running
  const running = await until(async () =>
    (await sbx.commands.list()).some((p) => p.args.join(' ').includes('sleep 60')))
  assert.ok(running, 'the command started')
  await Sandbox.kill(sbx.sandboxId)
  const err = await run
  assert.ok(err instanceof TimeoutError, `${err?.name}: ${err?.message}`)
  assert.match(err.message, /killed or reached its end of life/)
})
