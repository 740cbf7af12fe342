// E2B's snapshots API: createSnapshot, listSnapshots (all, by sandbox, by
// name), Sandbox.create(snapshotId), deleteSnapshot; a snapshot is its
// key's own, and registered templates cannot be deleted through it.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { Sandbox } from 'e2b'
import { API, KEY, tracker } from './common.mjs'

const t = tracker()
const snaps = []
after(async () => {
  await t.cleanup()
  await Promise.allSettled(snaps.map((s) => Sandbox.deleteSnapshot(s)))
})

test('snapshot, start two sandboxes from it, list, delete', async () => {
  const src = t.add(await Sandbox.create())
  await src.files.write('/home/user/app/data.txt', 'snapshot content')
  const snap = await src.createSnapshot()
  snaps.push(snap.snapshotId)
  assert.match(snap.snapshotId, /^snap-[0-9a-f]{16}$/)
  assert.deepEqual(snap.names, [snap.snapshotId])
  const a = t.add(await Sandbox.create(snap.snapshotId))
  const b = t.add(await Sandbox.create(snap.snapshotId))
  assert.equal(await a.files.read('/home/user/app/data.txt'), 'snapshot content')
  await a.files.write('/home/user/app/data.txt', 'changed in a')
  assert.equal(await b.files.read('/home/user/app/data.txt'), 'snapshot content')

  const name = `snap-named-${Date.now()}`
  const named = await src.createSnapshot({ name })
  snaps.push(name)
  assert.equal(named.snapshotId, name)
  const all = await Sandbox.listSnapshots().nextItems()
  assert.ok(all.some((s) => s.snapshotId === snap.snapshotId) && all.some((s) => s.snapshotId === name))
  const mine = await src.listSnapshots().nextItems()
  assert.deepEqual(mine.map((s) => s.snapshotId).sort(), [snap.snapshotId, name].sort())
  const byName = await Sandbox.listSnapshots({ name }).nextItems()
  assert.deepEqual(byName.map((s) => s.snapshotId), [name])
  assert.deepEqual(await Sandbox.listSnapshots({ name: `${name}-nope` }).nextItems(), [])
  await assert.rejects(src.createSnapshot({ name }), /409|exists/i)

  assert.equal(await Sandbox.deleteSnapshot(name), true)
  assert.equal(await Sandbox.deleteSnapshot(name), false)
  await assert.rejects(Sandbox.create(name), /404|not found/i)
})

test('a snapshot is its key\'s own; templates are not deleted through it', async () => {
  const src = t.add(await Sandbox.create())
  const snap = await src.createSnapshot()
  snaps.push(snap.snapshotId)
  const other = execFileSync(process.env.PADDOCK_BIN, ['key', 'create', '--state-dir', process.env.PADDOCK_E2B_STATE])
    .toString().trim()
  await assert.rejects(Sandbox.create(snap.snapshotId, { apiKey: other }), /404|not found/i)
  assert.deepEqual(await Sandbox.listSnapshots({ apiKey: other }).nextItems(), [])
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, { apiKey: other }), false)
  assert.equal(await Sandbox.deleteSnapshot('base'), false)
  const still = t.add(await Sandbox.create(snap.snapshotId))
  assert.equal(await still.isRunning(), true)
  for (const body of [{ name: 'Bad Name' }, { name: 'x'.repeat(65) }, { name: 7 }]) {
    const res = await fetch(`${API}/sandboxes/${src.sandboxId}/snapshots`,
      { method: 'POST', headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
    assert.equal(res.status, 400, JSON.stringify(body))
  }
})
