// updateNetwork (PUT /sandboxes/{id}/network): replaces a networked
// sandbox's egress policy, mapped as on create; a sandbox made without a
// network keeps none (409); header rules are refused (400). The policy is
// read back through the native API; no traffic leaves this machine.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { API, KEY, tracker } from './common.mjs'

const t = tracker()
after(() => t.cleanup())

const policy = async (id) => {
  const res = await fetch(`${API}/api/v1/sandboxes/${id}/network`, { headers: { Authorization: `Bearer ${KEY}` } })
  assert.equal(res.status, 200)
  return res.json()
}

test('updateNetwork replaces the egress policy of a networked sandbox', async () => {
  const sbx = t.add(await Sandbox.create({ network: { allowOut: ['192.0.2.1'], denyOut: ['0.0.0.0/0'] } }))
  const before = await policy(sbx.sandboxId)
  assert.equal(before.mode, 'policy')
  assert.match(JSON.stringify(before), /192\.0\.2\.1/)
  await sbx.updateNetwork({ allowOut: ['198.51.100.7'], denyOut: ['0.0.0.0/0'] })
  const after1 = await policy(sbx.sandboxId)
  assert.equal(after1.mode, 'policy')
  assert.match(JSON.stringify(after1), /198\.51\.100\.7/)
  assert.doesNotMatch(JSON.stringify(after1), /192\.0\.2\.1/)
  // nothing allowed any more: a policy without rules, not "none"
  await sbx.updateNetwork({ denyOut: ['0.0.0.0/0'] })
  const after2 = await policy(sbx.sandboxId)
  assert.equal(after2.mode, 'policy')
  assert.doesNotMatch(JSON.stringify(after2), /198\.51\.100\.7/)
  const res = await fetch(`${API}/sandboxes/${sbx.sandboxId}/network`, {
    method: 'PUT', headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ rules: { 'example.com': [{ headers: { A: 'b' } }] } }),
  })
  assert.equal(res.status, 400)
})

test('updateNetwork of a sandbox made without a network: 409, nothing changes', async () => {
  const sbx = t.add(await Sandbox.create({ allowInternetAccess: false }))
  const res = await fetch(`${API}/sandboxes/${sbx.sandboxId}/network`, {
    method: 'PUT', headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ allowOut: ['192.0.2.1'] }),
  })
  assert.equal(res.status, 409)
  assert.equal((await policy(sbx.sandboxId)).mode, 'none')
  const bad = await fetch(`${API}/sandboxes/${sbx.sandboxId}/network`, {
    method: 'PUT', headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ allowOut: 'not-a-list' }),
  })
  assert.equal(bad.status, 400)
})
