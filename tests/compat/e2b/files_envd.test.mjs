// Files as envd serves them: listings in walk order, symlinkTarget the
// resolved absolute path, remove of a missing path, signed-URL refusals
// with envd's codes and messages, and the default user's writes outside
// its own directories (docs/e2b.md, "Files and users").
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { API } from './common.mjs'

let sbx
before(async () => { sbx = await Sandbox.create() })
after(async () => { await sbx?.kill() })

test('list: entries sorted by path, depth first', async () => {
  // made out of order, with names that sort differently as plain strings
  for (const d of ['ls/zeta', 'ls/a-b', 'ls/a/inner', 'ls/Beta']) await sbx.files.makeDir(d)
  await sbx.files.write('ls/m.txt', 'x')
  await sbx.files.write('ls/a/inner/f.txt', 'y')
  const one = await sbx.files.list('ls')
  assert.deepEqual(one.map((e) => e.name), ['Beta', 'a', 'a-b', 'm.txt', 'zeta'])
  const deep = await sbx.files.list('ls', { depth: 3 })
  assert.deepEqual(deep.map((e) => e.path.replace('/home/user/ls/', '')),
    ['Beta', 'a', 'a/inner', 'a/inner/f.txt', 'a-b', 'm.txt', 'zeta'])
})

test('symlinkTarget: the absolute path the link resolves to', async () => {
  await sbx.files.write('links/target.txt', 'content')
  await sbx.files.makeDir('links/dir')
  await sbx.commands.run(
    'cd links && ln -s target.txt rel && ln -s rel chain && ln -s ../links/./dir up && ln -s nowhere dangling && ln -s /home/user/links/target.txt abs')
  const info = async (p) => (await sbx.files.getInfo(`links/${p}`)).symlinkTarget
  assert.equal(await info('rel'), '/home/user/links/target.txt')
  assert.equal(await info('chain'), '/home/user/links/target.txt')
  assert.equal(await info('abs'), '/home/user/links/target.txt')
  assert.equal(await info('up'), '/home/user/links/dir')
  // envd: a link that does not resolve shows its own path
  assert.equal(await info('dangling'), '/home/user/links/dangling')
  assert.equal((await sbx.files.getInfo('links/target.txt')).symlinkTarget, undefined)
  const listed = Object.fromEntries((await sbx.files.list('links')).map((e) => [e.name, e.symlinkTarget]))
  assert.equal(listed.chain, '/home/user/links/target.txt')
  assert.equal(listed['target.txt'], undefined)
})

test('remove of a path that is not there succeeds', async () => {
  await sbx.files.remove('never-was.txt')
  await sbx.files.remove('/home/user/no/such/dir')
  assert.equal(await sbx.files.exists('never-was.txt'), false)
})

test('signed URLs: envd\'s 401s', async () => {
  await sbx.files.write('signed.txt', 'hello')
  const check = async (url, init, message) => {
    const res = await fetch(url, init)
    assert.equal(res.status, 401, `${message}: ${res.status}`)
    assert.deepEqual(await res.json(), { code: 401, message })
  }
  const expired = await sbx.downloadUrl('signed.txt', { useSignatureExpiration: -10_000 })
  await check(expired, {}, 'signature is already expired')
  const up = await sbx.uploadUrl('signed.txt', { useSignatureExpiration: -10_000 })
  const form = new FormData()
  form.append('file', 'new')
  await check(up, { method: 'POST', body: form }, 'signature is already expired')
  const bad = new URL(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 10_000 }))
  bad.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
  await check(bad, {}, 'invalid signature')
  // an expiration moved later does not match the signature any more
  const moved = new URL(expired)
  moved.searchParams.set('signature_expiration', `${Math.floor(Date.now() / 1000) + 3600}`)
  await check(moved, {}, 'invalid signature')
  await check(`${API}/files?path=signed.txt`, {}, 'missing signature query parameter')
  // nothing was overwritten
  assert.equal(await sbx.files.read('signed.txt'), 'hello')
  const ok = await fetch(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 10_000 }))
  assert.equal(ok.status, 200)
  assert.equal(await ok.text(), 'hello')
})

test('the default user writes where envd (root) would; what it may write stays its own', async () => {
  const files = [
    { path: '/e2b-data/out.txt', data: 'outside home' },
    { path: '/home/user/inside.txt', data: 'inside home' },
  ]
  const infos = await sbx.files.write(files)
  assert.deepEqual(infos.map((i) => i.path), files.map((f) => f.path))
  for (const f of files) assert.equal(await sbx.files.read(f.path), f.data)
  await sbx.files.makeDir('/e2b-dir/sub')
  assert.equal((await sbx.files.getInfo('/e2b-dir/sub')).type, 'dir')
  // ownership: root where only root could write, the user in its home
  assert.equal((await sbx.files.getInfo('/e2b-data/out.txt')).owner, 'root')
  assert.equal((await sbx.files.getInfo('/home/user/inside.txt')).owner, 'user')
  // the user's processes still have only the user's rights there
  const r = await sbx.commands.run('echo more >> /e2b-data/out.txt', { user: 'user' }).catch((e) => e)
  assert.notEqual(r.exitCode, 0)
  assert.match(r.stderr, /Permission denied/)
})
