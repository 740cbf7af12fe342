// Control plane: create, list, info, metrics, timeouts, kill, pause/connect,
// with e2b@2.51.0 and the paths e2b@2.50.0 uses.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, NotFoundError } from 'e2b'
import { Sandbox as Sandbox250 } from 'e2b-250'
import { API, KEY, sleep, until, tracker } from './common.mjs'

const t = tracker()
after(() => t.cleanup())

test('create with metadata, envs and timeoutMs; getInfo', async () => {
  const tag = `ctl-${Date.now()}`
  const sbx = t.add(await Sandbox.create({ metadata: { suite: tag, n: '1' }, envs: { SBX_VAR: 'from-create' }, timeoutMs: 120_000 }))
  assert.match(sbx.sandboxId, /^[a-z0-9]{20}$/)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, 'base')
  assert.equal(info.state, 'running')
  assert.deepEqual(info.metadata, { suite: tag, n: '1' })
  assert.ok(info.startedAt instanceof Date && !isNaN(info.startedAt))
  const left = info.endAt - Date.now()
  assert.ok(left > 100_000 && left <= 121_000, `endAt ${left} ms from now`)
  assert.ok(info.cpuCount >= 1 && info.memoryMB >= 64)
  // envs from create reach every process without being resent
  const r = await sbx.commands.run('echo $SBX_VAR')
  assert.equal(r.stdout.trim(), 'from-create')
})

test('wrong API key is refused', async () => {
  await assert.rejects(Sandbox.create({ apiKey: 'pdk_wrong' }), (e) => /401|auth|unauthor/i.test(`${e.name} ${e.message}`))
})

test('list: metadata and state filters, paging with nextToken', async () => {
  const tag = `list-${Date.now()}`
  const made = []
  for (let i = 0; i < 3; i++) made.push(t.add(await Sandbox.create({ metadata: { suite: tag, i: `${i}` } })))
  const all = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
  assert.deepEqual(all.map((s) => s.sandboxId).sort(), made.map((s) => s.sandboxId).sort())
  assert.equal(all[0].state, 'running')
  const one = await Sandbox.list({ query: { metadata: { suite: tag, i: '1' } } }).nextItems()
  assert.deepEqual(one.map((s) => s.sandboxId), [made[1].sandboxId])
  const paused = await Sandbox.list({ query: { metadata: { suite: tag }, state: ['paused'] } }).nextItems()
  assert.equal(paused.length, 0)
  const pager = Sandbox.list({ query: { metadata: { suite: tag } }, limit: 2 })
  const p1 = await pager.nextItems()
  assert.equal(p1.length, 2)
  assert.equal(pager.hasNext, true)
  const p2 = await pager.nextItems()
  assert.equal(p2.length, 1)
  assert.equal(pager.hasNext, false)
  assert.deepEqual([...p1, ...p2].map((s) => s.sandboxId).sort(), made.map((s) => s.sandboxId).sort())
})

test('getMetrics', async () => {
  const sbx = t.add(await Sandbox.create())
  await sbx.commands.run('true')
  const m = await sbx.getMetrics()
  assert.ok(Array.isArray(m) && m.length >= 1)
  const x = m[m.length - 1]
  assert.ok(x.timestamp instanceof Date)
  assert.ok(x.cpuCount >= 1)
  assert.equal(typeof x.cpuUsedPct, 'number')
  assert.ok(x.memUsed > 0 && x.memTotal >= x.memUsed)
  assert.ok(x.diskTotal > 0)
})

test('setTimeout moves endAt; a 2 s sandbox is gone after it', async () => {
  const sbx = t.add(await Sandbox.create({ timeoutMs: 60_000 }))
  await sbx.setTimeout(200_000)
  const info = await sbx.getInfo()
  assert.ok(info.endAt - Date.now() > 150_000)
  const short = await Sandbox.create({ timeoutMs: 2000 })
  assert.equal(await short.isRunning(), true)
  await sleep(3500)
  const gone = await until(async () => !(await short.isRunning()), 8000, 250)
  assert.equal(gone, true)
  await assert.rejects(Sandbox.connect(short.sandboxId), NotFoundError)
})

test('kill, isRunning, kill of an unknown sandbox', async () => {
  const sbx = await Sandbox.create()
  assert.equal(await sbx.isRunning(), true)
  assert.equal(await sbx.kill(), true)
  assert.equal(await sbx.isRunning(), false)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError)
})

test('pause keeps state in memory; connect resumes', async () => {
  const sbx = t.add(await Sandbox.create())
  await sbx.files.write('/home/user/keep.txt', 'still here')
  await sbx.commands.run('sleep 1000', { background: true, timeoutMs: 0 })
  assert.equal(await sbx.pause(), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  assert.equal(await sbx.isRunning(), false)
  assert.equal(await Sandbox.pause(sbx.sandboxId), false) // already paused: 409
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.files.read('/home/user/keep.txt'), 'still here')
  const procs = await again.commands.list()
  assert.ok(procs.some((p) => p.cmd === '/bin/bash' && p.args.includes('sleep 1000')), JSON.stringify(procs))
  // connect to a running sandbox is fine too
  const third = await Sandbox.connect(sbx.sandboxId)
  assert.equal(third.sandboxId, sbx.sandboxId)
})

test('autoPause (lifecycle onTimeout pause): paused at the deadline, connect resumes it', async () => {
  const sbx = t.add(await Sandbox.create({ timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } }))
  await sbx.files.write('/home/user/ap.txt', 'auto')
  const paused = await until(async () => (await Sandbox.getInfo(sbx.sandboxId)).state === 'paused', 30_000)
  assert.ok(paused, 'not paused at its deadline')
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.files.read('/home/user/ap.txt'), 'auto')
})

test('a key sees only its own sandboxes', async () => {
  const sbx = t.add(await Sandbox.create())
  // same id, no/other key: not found (404) or refused (401)
  const res = await fetch(`${API}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-KEY': 'pdk_nope' } })
  assert.equal(res.status, 401)
  const ok = await fetch(`${API}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-KEY': KEY } })
  assert.equal(ok.status, 200)
  const nf = await fetch(`${API}/sandboxes/aaaaaaaaaaaaaaaaaaaa`, { headers: { 'X-API-KEY': KEY } })
  assert.equal(nf.status, 404)
  const body = await nf.json()
  assert.equal(body.code, 404)
  assert.equal(typeof body.message, 'string')
})

test('e2b@2.50.0: create, connect, run, kill', async () => {
  const sbx = await Sandbox250.create({ metadata: { sdk: '2.50' }, envs: { OLD: 'yes' } })
  try {
    const again = await Sandbox250.connect(sbx.sandboxId)
    const r = await again.commands.run('echo $OLD; whoami')
    assert.equal(r.stdout, 'yes\nuser\n')
    const info = await again.getInfo()
    assert.equal(info.metadata.sdk, '2.50')
  } finally {
    assert.equal(await Sandbox250.kill(sbx.sandboxId), true)
  }
  assert.equal(await Sandbox250.kill(sbx.sandboxId), false)
})
