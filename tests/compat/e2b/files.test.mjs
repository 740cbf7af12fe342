// envd filesystem: write/read/list/exists/getInfo/makeDir/rename/remove,
// watchDir, signed download/upload URLs.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, NotFoundError, FileType } from 'e2b'
import { sleep, until } from './common.mjs'

let sbx
before(async () => { sbx = await Sandbox.create() })
after(async () => { await sbx?.kill() })

test('write text, read text / bytes / stream', async () => {
  const info = await sbx.files.write('/home/user/dir/a.txt', 'hello files\n')
  assert.equal(info.path, '/home/user/dir/a.txt')
  assert.equal(info.name, 'a.txt')
  assert.equal(await sbx.files.read('/home/user/dir/a.txt'), 'hello files\n')
  const bytes = await sbx.files.read('dir/a.txt', { format: 'bytes' })
  assert.ok(bytes instanceof Uint8Array)
  assert.equal(new TextDecoder().decode(bytes), 'hello files\n')
  const stream = await sbx.files.read('/home/user/dir/a.txt', { format: 'stream' })
  let s = ''
  for await (const chunk of stream) s += new TextDecoder().decode(chunk)
  assert.equal(s, 'hello files\n')
  const r = await sbx.commands.run('stat -c %U /home/user/dir/a.txt')
  assert.equal(r.stdout.trim(), 'user')
  await assert.rejects(sbx.files.read('/home/user/missing.txt'), NotFoundError)
})

test('write several files at once, and bytes', async () => {
  const res = await sbx.files.write([
    { path: '/home/user/multi/one.txt', data: 'one' },
    { path: '/home/user/multi/two.txt', data: 'two' },
  ])
  assert.equal(res.length, 2)
  assert.equal(await sbx.files.read('/home/user/multi/one.txt'), 'one')
  assert.equal(await sbx.files.read('/home/user/multi/two.txt'), 'two')
  const data = new Uint8Array(300_000)
  for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 255
  await sbx.files.write('/home/user/blob.bin', data.buffer)
  const back = await sbx.files.read('/home/user/blob.bin', { format: 'bytes' })
  assert.equal(back.length, data.length)
  assert.ok(Buffer.from(back).equals(Buffer.from(data)))
  const asRoot = await sbx.files.write('/root/secret.txt', 'r', { user: 'root' })
  assert.equal(asRoot.path, '/root/secret.txt')
})

test('list, exists, getInfo, makeDir, rename, remove', async () => {
  await sbx.files.write('/home/user/tree/f1.txt', 'x')
  assert.equal(await sbx.files.makeDir('/home/user/tree/sub'), true)
  assert.equal(await sbx.files.makeDir('/home/user/tree/sub'), false)
  const list = await sbx.files.list('/home/user/tree')
  assert.deepEqual(list.map((e) => e.name).sort(), ['f1.txt', 'sub'])
  const f = list.find((e) => e.name === 'f1.txt')
  assert.equal(f.type, FileType.FILE)
  assert.equal(f.path, '/home/user/tree/f1.txt')
  assert.equal(f.size, 1)
  assert.equal(f.permissions, '-rw-r--r--')
  assert.equal(f.owner, 'user')
  assert.ok(f.modifiedTime instanceof Date)
  assert.equal(list.find((e) => e.name === 'sub').type, FileType.DIR)
  assert.equal(await sbx.files.exists('/home/user/tree/f1.txt'), true)
  assert.equal(await sbx.files.exists('/home/user/tree/nope'), false)
  const info = await sbx.files.getInfo('/home/user/tree/sub')
  assert.equal(info.type, FileType.DIR)
  assert.equal(info.name, 'sub')
  const moved = await sbx.files.rename('/home/user/tree/f1.txt', '/home/user/tree/sub/f2.txt')
  assert.equal(moved.path, '/home/user/tree/sub/f2.txt')
  assert.equal(await sbx.files.exists('/home/user/tree/f1.txt'), false)
  await sbx.files.remove('/home/user/tree')
  assert.equal(await sbx.files.exists('/home/user/tree'), false)
  await assert.rejects(sbx.files.getInfo('/home/user/tree'), NotFoundError)
})

test('watchDir: create, write, rename, remove events', async () => {
  await sbx.files.makeDir('/home/user/watched')
  const events = []
  const w = await sbx.files.watchDir('/home/user/watched', (e) => events.push(e))
  await sleep(200)
  await sbx.files.write('/home/user/watched/a.txt', 'a')
  await sbx.commands.run('echo more >> /home/user/watched/a.txt; mv /home/user/watched/a.txt /home/user/watched/b.txt; rm /home/user/watched/b.txt')
  const has = (type, name) => events.some((e) => e.type === type && e.name === name)
  const ok = await until(() => has('create', 'a.txt') && has('write', 'a.txt') && has('rename', 'a.txt') && has('remove', 'b.txt'), 8000)
  await w.stop()
  assert.ok(ok, JSON.stringify(events))
  await assert.rejects(sbx.files.watchDir('/home/user/no-such-dir', () => {}), NotFoundError)
})

test('downloadUrl / uploadUrl carry a checked signature', async () => {
  await sbx.files.write('/home/user/url.txt', 'via url')
  const dl = await sbx.downloadUrl('/home/user/url.txt')
  assert.match(dl, /signature=v1_/)
  const res = await fetch(dl)
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'via url')
  const bad = new URL(dl)
  bad.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
  const denied = await fetch(bad)
  assert.ok([401, 403].includes(denied.status), `tampered signature: ${denied.status}`)
  const other = new URL(dl)
  other.searchParams.set('path', '/home/user/.bashrc')
  assert.ok([401, 403].includes((await fetch(other)).status), 'a signature is for one path')

  const ul = await sbx.uploadUrl('/home/user/up.txt')
  const form = new FormData()
  form.append('file', new Blob(['uploaded']), 'up.txt')
  const up = await fetch(ul, { method: 'POST', body: form })
  assert.equal(up.status, 200, await up.clone().text())
  assert.equal(await sbx.files.read('/home/user/up.txt'), 'uploaded')
  // expiring signatures
  const exp = await sbx.downloadUrl('/home/user/url.txt', { useSignatureExpiration: 60 })
  assert.match(exp, /signature_expiration=/)
  assert.equal((await fetch(exp)).status, 200)
})
