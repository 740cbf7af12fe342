// Sandbox.connect and timeouts as on E2B: connecting to a running sandbox
// only ever extends its timeout; resuming a paused one runs it for the
// timeout asked.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { tracker } from './common.mjs'

const t = tracker()
after(() => t.cleanup())

test('connect with a shorter timeout leaves a running sandbox\'s endAt alone', async () => {
  const sbx = t.add(await Sandbox.create({ timeoutMs: 300_000 }))
  const before = await Sandbox.getInfo(sbx.sandboxId)
  // asking twice gives the same instant
  assert.equal((await sbx.getInfo()).endAt.getTime(), before.endAt.getTime())
  await Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 })
  const afterShort = await sbx.getInfo()
  assert.equal(afterShort.endAt.getTime(), before.endAt.getTime())
  assert.equal(await sbx.isRunning(), true)
})

test('connect with a longer timeout extends it', async () => {
  const sbx = t.add(await Sandbox.create({ timeoutMs: 60_000 }))
  const before = await sbx.getInfo()
  await sbx.connect({ timeoutMs: 600_000 })
  const later = await sbx.getInfo()
  assert.ok(later.endAt.getTime() > before.endAt.getTime() + 500_000, `${before.endAt} -> ${later.endAt}`)
})

test('setTimeout may still shorten (only connect never does)', async () => {
  const sbx = t.add(await Sandbox.create({ timeoutMs: 300_000 }))
  await sbx.setTimeout(30_000)
  const info = await sbx.getInfo()
  assert.ok(info.endAt - Date.now() <= 31_000, `endAt ${info.endAt - Date.now()} ms away`)
})

test('connect resumes a paused sandbox for the timeout asked', async () => {
  const sbx = t.add(await Sandbox.create({ timeoutMs: 300_000 }))
  await sbx.pause()
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 30_000 })
  assert.equal(await again.isRunning(), true)
  const info = await again.getInfo()
  const left = info.endAt - Date.now()
  assert.ok(left > 0 && left <= 31_000, `endAt ${left} ms away`)
})
