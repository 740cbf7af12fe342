// sandbox.fork() / Sandbox.fork(id) through E2B's API: independent copies
// of the filesystem, the asked timeout, a gone source is SandboxNotFoundError.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxNotFoundError } from 'e2b'
import { API, KEY, tracker } from './common.mjs'

const t = tracker()
after(() => t.cleanup())

test('fork: copies that start from the source\'s files and go their own way', async () => {
  const src = t.add(await Sandbox.create())
  await src.files.write('/home/user/state.txt', 'before fork')
  const forks = await src.fork({ count: 2, timeoutMs: 60_000 })
  assert.equal(forks.length, 2)
  for (const f of forks) {
    assert.ok(f instanceof Sandbox, `${f}`)
    t.add(f)
  }
  assert.equal(new Set([src.sandboxId, ...forks.map((f) => f.sandboxId)]).size, 3)
  for (const f of forks) {
    assert.equal(await f.isRunning(), true)
    assert.equal(await f.files.read('/home/user/state.txt'), 'before fork')
    const left = (await f.getInfo()).endAt - Date.now()
    assert.ok(left > 0 && left <= 61_000, `endAt ${left} ms away`)
  }
  await forks[0].files.write('/home/user/state.txt', 'changed in fork')
  assert.equal(await src.files.read('/home/user/state.txt'), 'before fork')
  assert.equal(await forks[1].files.read('/home/user/state.txt'), 'before fork')
  const byId = await Sandbox.fork(src.sandboxId)
  assert.equal(byId.length, 1)
  t.add(byId[0])
  assert.equal(await byId[0].isRunning(), true)
})

test('fork of a killed sandbox: SandboxNotFoundError; a bad count is 400', async () => {
  const gone = await Sandbox.create()
  await gone.kill()
  await assert.rejects(gone.fork(), SandboxNotFoundError)
  const src = t.add(await Sandbox.create())
  for (const body of [{ count: 0 }, { count: 'two' }, { timeout: -1 }]) {
    const res = await fetch(`${API}/sandboxes/${src.sandboxId}/fork`,
      { method: 'POST', headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
    assert.equal(res.status, 400, JSON.stringify(body))
  }
})
