// envd 0.6.2 - 0.6.4 features through the stock SDK (docs/e2b.md): file
// metadata (user.e2b.* xattrs), watch events with entry info, watching
// with allowNetworkMounts, and the filesystem-only pause (keepMemory:
// false), whose resume is a fresh boot of the saved files.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, FilesystemEventType, FileType } from 'e2b'
import { API, KEY, tracker } from './common.mjs'

let sbx
const made = tracker()
before(async () => { sbx = made.add(await Sandbox.create()) })
after(async () => { await made.cleanup() })

test('the envd version advertised is the one whose features are served', async () => {
  const info = await sbx.getInfo()
  assert.equal(info.envdVersion, '0.6.4')
})

test('metadata: written, read back by getInfo, list and rename; an overwrite clears it', async () => {
  const meta = { author: 'mish', purpose: 'upload' }
  const w = await sbx.files.write('meta/a.txt', 'hello', { metadata: meta })
  assert.deepEqual(w.metadata, meta)
  assert.deepEqual((await sbx.files.getInfo('meta/a.txt')).metadata, meta)
  const raw = await sbx.files.write('meta/raw.txt', 'raw', { metadata: { k: 'v' }, useOctetStream: true })
  assert.deepEqual(raw.metadata, { k: 'v' })
  const many = await sbx.files.writeFiles([{ path: 'meta/m1.txt', data: '1' }, { path: 'meta/m2.txt', data: '2' }],
    { metadata: { source: 'suite' } })
  for (const f of many) assert.deepEqual((await sbx.files.getInfo(f.path)).metadata, { source: 'suite' })
  const listed = (await sbx.files.list('meta')).find((e) => e.name === 'a.txt')
  assert.deepEqual(listed.metadata, meta)
  const moved = await sbx.files.rename('meta/a.txt', 'meta/b.txt')
  assert.deepEqual(moved.metadata, meta)
  const again = await sbx.files.write('meta/b.txt', 'second')
  assert.equal(again.metadata, undefined)
  assert.equal((await sbx.files.getInfo('meta/b.txt')).metadata, undefined)
  // keys are lowercased (HTTP header names), the first of a repeated one wins
  const url = await sbx.uploadUrl('/home/user/meta/hdr.txt')
  const res = await fetch(url, {
    method: 'POST', body: 'x',
    headers: { 'Content-Type': 'application/octet-stream', 'X-Metadata-Owner': 'Ann' },
  })
  assert.equal(res.status, 200, await res.clone().text())
  assert.deepEqual((await res.json())[0].metadata, { owner: 'Ann' })
})

test('metadata set out of band as a user.e2b.* xattr shows; other user.* xattrs do not', async () => {
  await sbx.files.write('meta/x.txt', 'content')
  const r = await sbx.commands.run(`python3 -c "import os; p='/home/user/meta/x.txt'; ` +
    `os.setxattr(p, 'user.e2b.author', b'mish'); os.setxattr(p, 'user.other', b'no')"`)
  assert.equal(r.exitCode, 0)
  assert.deepEqual((await sbx.files.getInfo('meta/x.txt')).metadata, { author: 'mish' })
})

test('bad metadata is a 400 and writes nothing', async () => {
  const url = await sbx.uploadUrl('/home/user/meta/bad.txt')
  for (const headers of [{ 'X-Metadata-k': 'caf\u00e9' }, { 'X-Metadata-': 'empty key' },
    { 'X-Metadata-big': 'v'.repeat(5000) }]) {
    const res = await fetch(url, { method: 'POST', body: 'x', headers: { 'Content-Type': 'application/octet-stream', ...headers } })
    assert.equal(res.status, 400, JSON.stringify(headers))
  }
  assert.equal(await sbx.files.exists('/home/user/meta/bad.txt'), false)
})

test('watch with includeEntry: events carry the entry; a removal has none', async () => {
  await sbx.files.makeDir('w')
  await sbx.files.write('w/f.txt', 'one')
  const events = []
  let done
  const got = new Promise((r) => { done = r })
  const h = await sbx.files.watchDir('w', (e) => {
    events.push(e)
    if (e.type === FilesystemEventType.REMOVE) done()
  }, { includeEntry: true })
  await sbx.files.write('w/f.txt', 'two, longer')
  await sbx.files.remove('w/f.txt')
  await got
  await h.stop()
  const write = events.find((e) => e.type === FilesystemEventType.WRITE && e.name === 'f.txt' && e.entry)
  assert.ok(write, JSON.stringify(events))
  assert.equal(write.entry.path, '/home/user/w/f.txt')
  assert.equal(write.entry.type, FileType.FILE)
  assert.equal(write.entry.name, 'f.txt')
  const rm = events.find((e) => e.type === FilesystemEventType.REMOVE)
  assert.equal(rm.entry, undefined)
})

test('watch with allowNetworkMounts works on a local directory', async () => {
  await sbx.files.makeDir('wn')
  let done
  const got = new Promise((r) => { done = r })
  const h = await sbx.files.watchDir('wn', (e) => { if (e.name === 'n.txt') done() }, { allowNetworkMounts: true })
  await sbx.files.write('wn/n.txt', 'x')
  await got
  await h.stop()
})

test('filesystem-only pause: processes gone, files kept, a new boot id, same credentials', async () => {
  const s = made.add(await Sandbox.create())
  await s.files.write('/home/user/kept.txt', 'kept')
  await s.commands.run('sleep 600', { background: true })
  const boot = (await s.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()
  // an in-memory pause is no new boot
  await s.pause()
  await s.connect()
  assert.equal((await s.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim(), boot)
  const sleeping = (l) => l.some((p) => [p.cmd, ...(p.args ?? [])].join(' ').includes('sleep 600'))
  assert.ok(sleeping(await s.commands.list()))

  await s.pause({ keepMemory: false })
  assert.equal(await s.isRunning(), false)
  assert.equal((await s.getInfo()).state, 'paused')
  const native = await fetch(`${API}/api/v1/sandboxes/${s.sandboxId}`, { headers: { Authorization: `Bearer ${KEY}` } })
  assert.equal((await native.json()).paused_to, 'files')
  const back = await s.connect()
  assert.equal(back.sandboxId, s.sandboxId)
  assert.equal(await back.isRunning(), true)
  assert.equal(await back.files.read('/home/user/kept.txt'), 'kept')
  const boot2 = (await back.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()
  assert.match(boot2, /^[0-9a-f-]{36}$/)
  assert.notEqual(boot2, boot)
  assert.equal(sleeping(await back.commands.list()), false)
  // and again: a second filesystem-only pause keeps what the first boot wrote
  await back.files.write('/home/user/second.txt', '2')
  await back.pause({ keepMemory: false })
  await back.connect()
  assert.equal(await back.files.read('/home/user/kept.txt'), 'kept')
  assert.equal(await back.files.read('/home/user/second.txt'), '2')
})

test('native pause {"mode": "files"}; a bad mode is 400 and changes nothing', async () => {
  const s = made.add(await Sandbox.create())
  const call = (path, body) => fetch(`${API}/api/v1/sandboxes/${s.sandboxId}/${path}`, {
    method: 'POST', headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  })
  const bad = await call('pause', { mode: 'nothing' })
  assert.equal(bad.status, 400)
  assert.equal(await s.isRunning(), true)
  await s.files.write('/home/user/n.txt', 'native')
  const p = await call('pause', { mode: 'files' })
  assert.equal(p.status, 200, await p.clone().text())
  assert.equal((await p.json()).paused_to, 'files')
  const r = await call('resume')
  assert.equal(r.status, 200)
  assert.equal(await s.files.read('/home/user/n.txt'), 'native')
})

test('autoPauseMemory: false cannot be combined with autoResume (400, nothing made)', async () => {
  const before = (await Sandbox.list().nextItems()).length
  const res = await fetch(`${API}/sandboxes`, {
    method: 'POST', headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }),
  })
  assert.equal(res.status, 400)
  assert.equal((await Sandbox.list().nextItems()).length, before)
})
