// gzip request bodies (Content-Encoding: gzip) as envd takes them: files
// written with { gzip: true }, single and several, raw and multipart; a
// body that is not gzip or is cut short is a 400 and writes nothing.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { gzipSync } from 'node:zlib'
import { Sandbox } from 'e2b'

let sbx
before(async () => { sbx = await Sandbox.create() })
after(async () => { await sbx?.kill() })

test('write with gzip, read back with and without gzip', async () => {
  const big = 'x'.repeat(300_000) + 'end'
  const info = await sbx.files.write('gz/one.txt', big, { gzip: true })
  assert.equal(info.path, '/home/user/gz/one.txt')
  assert.equal(await sbx.files.read('gz/one.txt'), big)
  assert.equal(await sbx.files.read('gz/one.txt', { gzip: true }), big)
  const many = [1, 2, 3].map((i) => ({ path: `gz/m${i}.txt`, data: `file ${i}` }))
  const infos = await sbx.files.writeFiles(many, { gzip: true })
  assert.equal(infos.length, 3)
  for (const f of many) assert.equal(await sbx.files.read(f.path), f.data)
})

test('multipart and multi-member gzip bodies; bad gzip is 400 and writes nothing', async () => {
  const url = await sbx.uploadUrl('/home/user/gz/form.txt')
  const form = new FormData()
  form.append('file', new Blob(['from a gzip form']), 'form.txt')
  // the multipart bytes and their boundary, then gzip over all of them
  const req = new Request('http://x/', { method: 'POST', body: form })
  const body = new Uint8Array(await req.arrayBuffer())
  const res = await fetch(url, {
    method: 'POST', body: gzipSync(body),
    headers: { 'Content-Type': req.headers.get('content-type'), 'Content-Encoding': 'gzip' },
  })
  assert.equal(res.status, 200, await res.clone().text())
  assert.equal(await sbx.files.read('/home/user/gz/form.txt'), 'from a gzip form')

  const two = Buffer.concat([gzipSync('first half, '), gzipSync('second half')])
  const rawUrl = await sbx.uploadUrl('/home/user/gz/two.txt')
  const r2 = await fetch(rawUrl, {
    method: 'POST', body: two, headers: { 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' },
  })
  assert.equal(r2.status, 200, await r2.clone().text())
  assert.equal(await sbx.files.read('/home/user/gz/two.txt'), 'first half, second half')

  for (const [name, bytes] of [['notgz.txt', Buffer.from('plain bytes, not gzip')],
    ['cut.txt', gzipSync('y'.repeat(10_000)).subarray(0, 20)]]) {
    const u = await sbx.uploadUrl(`/home/user/gz/${name}`)
    const r = await fetch(u, {
      method: 'POST', body: bytes, headers: { 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' },
    })
    assert.equal(r.status, 400, name)
    assert.equal((await r.json()).code, 400)
    assert.equal(await sbx.files.exists(`/home/user/gz/${name}`), false, name)
  }
  const br = await fetch(await sbx.uploadUrl('/home/user/gz/br.txt'), {
    method: 'POST', body: 'x', headers: { 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'br' },
  })
  assert.equal(br.status, 400)
})
