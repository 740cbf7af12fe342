// getMetrics({start, end}): the sample paddock takes at the request is in
// the answer when its time is inside the range; a range in the past (no
// history is kept) or before the sandbox existed has none; a bad range is 400.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { API, KEY } from './common.mjs'

let sbx
before(async () => { sbx = await Sandbox.create() })
after(async () => { await sbx?.kill() })

test('metrics in a range that holds now, and in one that does not', async () => {
  const now = Date.now()
  const m = await sbx.getMetrics({ start: new Date(now - 60_000), end: new Date(now + 60_000) })
  assert.equal(m.length, 1)
  assert.ok(Math.abs(m[0].timestamp.getTime() - Date.now()) < 60_000)
  const before = await sbx.getMetrics({ start: new Date(now - 3_600_000), end: new Date(now - 1_800_000) })
  assert.deepEqual(before, [])
  const later = await sbx.getMetrics({ start: new Date(now + 3_600_000) })
  assert.deepEqual(later, [])
})

test('bad start / end is a 400', async () => {
  for (const q of ['start=yesterday', 'end=-5', 'start=200&end=100']) {
    const res = await fetch(`${API}/sandboxes/${sbx.sandboxId}/metrics?${q}`, { headers: { 'X-API-KEY': KEY } })
    assert.equal(res.status, 400, q)
  }
})
