// The E2B SDK unchanged on the microvm tier (issue 7): template "microvm"
// starts a QEMU guest (a clone of the template snapshot); commands, files,
// a PTY, metrics, and pause (to disk: the guest's memory is released) with
// Sandbox.connect resuming it, processes and files intact.
import { test as nodeTest, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { existsSync, readdirSync } from 'node:fs'
import { API, KEY, until } from './common.mjs'

// scripts/setup.sh installs QEMU and the guest kernel: without them every
// test here fails with the reason (a missing install is not a hardware gap)
const guest = `${process.env.PADDOCK_GUEST_DIR || '/var/cache/paddock/guest'}/boot`
const haveVm = existsSync('/usr/bin/qemu-system-x86_64') && existsSync(guest) &&
  readdirSync(guest).some((f) => f.startsWith('vmlinuz-'))
const test = haveVm ? nodeTest
  : (name) => nodeTest(name, () => { throw new Error('no QEMU or guest kernel: run scripts/setup.sh') })

let sbx
// the first microvm of a state dir builds the guest's assets and template.
// No network: E2B's default is the internet, and a guest with a network
// cannot pause to disk yet (docs/network.md, "microvm guests")
before(async () => {
  if (haveVm) sbx = await Sandbox.create('microvm', { timeoutMs: 600_000, requestTimeoutMs: 240_000, allowInternetAccess: false })
}, { timeout: 300_000 })
after(async () => { await sbx?.kill() })

async function native(path, init = {}) {
  const res = await fetch(`${API}/api/v1/sandboxes/${path}`, { ...init, headers: { Authorization: `Bearer ${KEY}` } })
  return [res.status, await res.json()]
}

test('the sandbox is a microvm guest with its own kernel', async () => {
  const [st, info] = await native(sbx.sandboxId)
  assert.equal(st, 200)
  assert.equal(info.isolation, 'microvm')
  assert.ok(['tcg', 'kvm'].includes(info.accel), info.accel)
  assert.equal(info.pause_mode, 'disk')
  const r = await sbx.commands.run('uname -r; cat /proc/1/comm')
  assert.equal(r.exitCode, 0)
  assert.match(r.stdout, /-amd64\n/)
})

test('commands: output, exit codes, envs, background and stdin', async () => {
  const r = await sbx.commands.run('echo out; echo err >&2; echo $V', { envs: { V: 'vm' } })
  assert.equal(r.stdout, 'out\nvm\n')
  assert.equal(r.stderr, 'err\n')
  await assert.rejects(sbx.commands.run('exit 3'), (e) => e.exitCode === 3)
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'through stdin\n')
  await sbx.commands.closeStdin(h.pid)
  const done = await h.wait()
  assert.equal(done.stdout, 'through stdin\n')
})

test('files: write, read, list, remove', async () => {
  const big = 'x'.repeat(1 << 20)
  await sbx.files.write('/home/user/vm/big.txt', big)
  assert.equal((await sbx.files.read('/home/user/vm/big.txt')).length, big.length)
  const names = (await sbx.files.list('/home/user/vm')).map((e) => e.name)
  assert.deepEqual(names, ['big.txt'])
  await sbx.files.remove('/home/user/vm/big.txt')
  assert.equal(await sbx.files.exists('/home/user/vm/big.txt'), false)
})

test('pty', async () => {
  let out = ''
  const dec = new TextDecoder()
  const h = await sbx.pty.create({ cols: 100, rows: 30, onData: (d) => { out += dec.decode(d) } })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size; exit\n'))
  await h.wait().catch(() => {})
  assert.match(out, /30 100/)
})

test('getMetrics', async () => {
  const m = await until(async () => (await sbx.getMetrics()).at(-1), 30_000)
  assert.ok(m && m.memTotal > 0, JSON.stringify(m))
})

test('pause to disk; connect resumes with processes and files', { timeout: 240_000 }, async () => {
  await sbx.files.write('/home/user/keep.txt', 'kept across the pause')
  const bg = await sbx.commands.run('sleep 1000', { background: true, timeoutMs: 0 })
  assert.equal(await sbx.pause(), true)
  const [, info] = await native(sbx.sandboxId)
  assert.equal(info.state, 'paused')
  assert.equal(info.paused_to, 'disk')
  assert.equal(await sbx.isRunning(), false)
  const again = await Sandbox.connect(sbx.sandboxId, { requestTimeoutMs: 120_000 })
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.files.read('/home/user/keep.txt'), 'kept across the pause')
  const procs = await again.commands.list()
  assert.ok(procs.some((p) => p.pid === bg.pid), JSON.stringify(procs))
  const r = await again.commands.run('echo after')
  assert.equal(r.stdout, 'after\n')
})
