// Sandbox.list as E2B lists: newest first by start time, `order`,
// `startedAfter`, state filters, and pages that stay stable while
// sandboxes come and go between them.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { API, KEY, tracker } from './common.mjs'

const t = tracker()
after(() => t.cleanup())

const ids = (xs) => xs.map((s) => s.sandboxId)

async function makeThree(tag) {
  const made = []
  // one after another: each starts after the one before
  for (let i = 0; i < 3; i++) made.push(t.add(await Sandbox.create({ metadata: { suite: tag, i: `${i}` } })))
  return made
}

test('list: newest first by default, order asc / desc', async () => {
  const tag = `order-${Date.now()}`
  const made = await makeThree(tag)
  const newestFirst = ids(made).reverse()
  const def = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
  assert.deepEqual(ids(def), newestFirst)
  const desc = await Sandbox.list({ query: { metadata: { suite: tag } }, order: 'desc' }).nextItems()
  assert.deepEqual(ids(desc), newestFirst)
  const asc = await Sandbox.list({ query: { metadata: { suite: tag } }, order: 'asc' }).nextItems()
  assert.deepEqual(ids(asc), ids(made))
  for (let i = 1; i < def.length; i++) assert.ok(def[i - 1].startedAt >= def[i].startedAt)
})

test('list: paging follows the order and stays stable while sandboxes come and go', async () => {
  const tag = `page-${Date.now()}`
  const made = await makeThree(tag)
  const pager = Sandbox.list({ query: { metadata: { suite: tag } }, limit: 1 })
  const p1 = await pager.nextItems()
  assert.deepEqual(ids(p1), [made[2].sandboxId])
  assert.equal(pager.hasNext, true)
  // a newer sandbox belongs before the first page; the one just listed goes
  // away: neither moves the rest
  const late = t.add(await Sandbox.create({ metadata: { suite: tag, i: 'late' } }))
  await made[2].kill()
  const p2 = await pager.nextItems()
  assert.deepEqual(ids(p2), [made[1].sandboxId])
  const p3 = await pager.nextItems()
  assert.deepEqual(ids(p3), [made[0].sandboxId])
  assert.equal(pager.hasNext, false)
  const now = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
  assert.deepEqual(ids(now), [late.sandboxId, made[1].sandboxId, made[0].sandboxId])

  // ascending pages
  const up = Sandbox.list({ query: { metadata: { suite: tag } }, order: 'asc', limit: 2 })
  const u1 = await up.nextItems()
  const u2 = await up.nextItems()
  assert.deepEqual(ids([...u1, ...u2]), [made[0].sandboxId, made[1].sandboxId, late.sandboxId])
  assert.equal(up.hasNext, false)
})

test('list: startedAfter and state filters', async () => {
  const tag = `after-${Date.now()}`
  const made = await makeThree(tag)
  const mid = await made[1].getInfo()
  const later = await Sandbox.list({ query: { metadata: { suite: tag }, startedAfter: mid.startedAt } }).nextItems()
  assert.deepEqual(ids(later), [made[2].sandboxId, made[1].sandboxId])
  const none = await Sandbox.list({
    query: { metadata: { suite: tag }, startedAfter: new Date(Date.now() + 60_000) },
  }).nextItems()
  assert.equal(none.length, 0)

  await made[0].pause()
  const paused = await Sandbox.list({ query: { metadata: { suite: tag }, state: ['paused'] } }).nextItems()
  assert.deepEqual(ids(paused), [made[0].sandboxId])
  const running = await Sandbox.list({ query: { metadata: { suite: tag }, state: ['running'] } }).nextItems()
  assert.deepEqual(ids(running), [made[2].sandboxId, made[1].sandboxId])
  const both = await Sandbox.list({ query: { metadata: { suite: tag }, state: ['running', 'paused'] } }).nextItems()
  assert.deepEqual(ids(both), ids(made).reverse())
})

test('list: bad order, startedAfter, state or nextToken is a 400', async () => {
  for (const q of ['order=sideways', 'startedAfter=yesterday', 'startedAfter=2026-13-01T00:00:00Z',
    'state=sleeping', 'nextToken=not-a-token']) {
    const res = await fetch(`${API}/v2/sandboxes?${q}`, { headers: { 'X-API-KEY': KEY } })
    assert.equal(res.status, 400, q)
    const body = await res.json()
    assert.equal(body.code, 400)
    assert.match(body.message, /order|startedAfter|state|nextToken/)
  }
})
