// envd processes: commands.run/list/connect/sendStdin/closeStdin/kill, pty.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, TimeoutError, NotFoundError } from 'e2b'
import { sleep, until } from './common.mjs'

let sbx
before(async () => { sbx = await Sandbox.create({ envs: { BOX: 'box-env' } }) })
after(async () => { await sbx?.kill() })

test('foreground run: stdout, stderr, chunk order, exit code 0', async () => {
  const seen = []
  const r = await sbx.commands.run('for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.05; done', {
    onStdout: (d) => seen.push(['out', d]),
    onStderr: (d) => seen.push(['err', d]),
  })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'out1\nout2\nout3\n')
  assert.equal(r.stderr, 'err1\nerr2\nerr3\n')
  assert.equal(seen.filter(([k]) => k === 'out').map(([, d]) => d).join(''), r.stdout)
  assert.equal(seen.filter(([k]) => k === 'err').map(([, d]) => d).join(''), r.stderr)
  const firstOut2 = seen.findIndex(([, d]) => d.includes('out2'))
  const firstErr1 = seen.findIndex(([, d]) => d.includes('err1'))
  assert.ok(firstErr1 >= 0 && firstErr1 < firstOut2, 'err1 arrives before out2')
})

test('envs (sandbox and per command), cwd, user root vs user, login shell', async () => {
  const r = await sbx.commands.run('echo $BOX $ONE; pwd; whoami; echo $HOME', { envs: { ONE: 'cmd-env' }, cwd: '/tmp' })
  assert.equal(r.stdout, 'box-env cmd-env\n/tmp\nuser\n/home/user\n')
  const root = await sbx.commands.run('whoami; echo $HOME; id -u', { user: 'root' })
  assert.equal(root.stdout, 'root\n/root\n0\n')
  const home = await sbx.commands.run('pwd')
  assert.equal(home.stdout, '/home/user\n')
})

test('non-zero exit: CommandExitError with exitCode and output', async () => {
  await assert.rejects(sbx.commands.run('echo before; echo bad >&2; exit 7'), (e) => {
    assert.ok(e instanceof CommandExitError, `${e?.constructor?.name}: ${e?.message}`)
    assert.equal(e.exitCode, 7)
    assert.equal(e.stdout, 'before\n')
    assert.equal(e.stderr, 'bad\n')
    return true
  })
})

test('an out-of-memory kill: CommandExitError whose error says so and names the limit', async () => {
  // 2 GiB under the default 512 MiB limit; exec: the killed process is the command itself
  await assert.rejects(sbx.commands.run("exec python3 -c 'a = bytearray(2048 << 20)'"), (e) => {
    assert.ok(e instanceof CommandExitError, `${e?.constructor?.name}: ${e?.message}`)
    assert.equal(e.exitCode, -1)
    assert.match(e.error, /^out of memory: the kernel killed the command \(limit \d+ MiB\)$/)
    return true
  })
})

test('timeoutMs kills the command with the SDK\'s TimeoutError', async () => {
  const t0 = Date.now()
  await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1500 }), (e) => {
    // paddock ends the stream with Connect's deadline_exceeded, which the SDK raises as its TimeoutError
    assert.ok(e instanceof TimeoutError, `${e?.constructor?.name}: ${e?.message}`)
    return true
  })
  assert.ok(Date.now() - t0 < 10_000)
  const still = await until(async () => !(await sbx.commands.list()).some((p) => p.args?.includes('sleep 30')), 5000)
  assert.ok(still, 'the timed-out command is gone')
})

test('background + wait, list, connect (output continues), kill', async () => {
  const h = await sbx.commands.run('for i in $(seq 1 30); do echo tick$i; sleep 0.1; done', { background: true })
  assert.ok(h.pid > 0)
  const listed = await sbx.commands.list()
  const me = listed.find((p) => p.pid === h.pid)
  assert.ok(me, JSON.stringify(listed))
  assert.equal(me.cmd, '/bin/bash')
  assert.deepEqual(me.args.slice(0, 2), ['-l', '-c'])
  await sleep(500)
  const got = []
  const c = await sbx.commands.connect(h.pid, { onStdout: (d) => got.push(d) })
  const res = await c.wait()
  assert.equal(res.exitCode, 0)
  assert.ok(got.join('').includes('tick30'), 'output after the connect arrives')
  const full = await h.wait()
  assert.ok(full.stdout.includes('tick1\n') && full.stdout.includes('tick30\n'))

  const long = await sbx.commands.run('sleep 100', { background: true })
  assert.equal(await sbx.commands.kill(long.pid), true)
  await assert.rejects(long.wait(), (e) => e instanceof CommandExitError)
  assert.equal(await sbx.commands.kill(999999), false)
  await assert.rejects(sbx.commands.connect(999999), NotFoundError)
})

test('envd calls need the sandbox access token', async () => {
  const base = process.env.E2B_SANDBOX_URL
  const h = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'Content-Type': 'application/json' }
  // /health too: without the token a live sandbox and an unknown id look alike
  assert.equal((await fetch(`${base}/health`, { headers: h })).status, 401)
  assert.equal((await fetch(`${base}/health`, { headers: { ...h, 'X-Access-Token': sbx.envdAccessToken } })).status, 204)
  const no = await fetch(`${base}/process.Process/List`, { method: 'POST', headers: h, body: '{}' })
  assert.equal(no.status, 401)
  assert.equal((await no.json()).code, 'unauthenticated')
  const bad = await fetch(`${base}/process.Process/List`, { method: 'POST', headers: { ...h, 'X-Access-Token': 'x' }, body: '{}' })
  assert.equal(bad.status, 401)
  const ok = await fetch(`${base}/process.Process/List`, { method: 'POST', headers: { ...h, 'X-Access-Token': sbx.envdAccessToken }, body: '{}' })
  assert.equal(ok.status, 200)
  assert.ok(Array.isArray((await ok.json()).processes))
})

test('sendStdin and closeStdin', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'hello ')
  await sbx.commands.sendStdin(h.pid, 'stdin\n')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.stdout, 'hello stdin\n')
})

test('pty: create, sendInput, resize, kill', async () => {
  let out = ''
  const dec = new TextDecoder()
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d, { stream: true }) }, timeoutMs: 30_000 })
  assert.ok(pty.pid > 0)
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\n'))
  assert.ok(await until(() => out.includes('pty-42'), 10_000), out)
  assert.ok(out.includes('24 80'), out)
  await sbx.pty.resize(pty.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size\n'))
  assert.ok(await until(() => out.includes('30 100'), 10_000), out)
  assert.equal(await sbx.pty.kill(pty.pid), true)
  await assert.rejects(pty.wait(), (e) => e instanceof CommandExitError)
})

test('a plain command (the agent runs it without bash) sees what bash would give it', async () => {
  // `env` alone takes the agent's login fast path (docs/templates.md); the
  // same quoted (bash removes the quotes; the fast path does not take
  // quotes) goes through real bash and must print the same, in the same order
  for (const opts of [{}, { user: 'root' }, { cwd: '/tmp', envs: { ONE: 'x' } }]) {
    const fast = await sbx.commands.run('env', opts)
    const real = await sbx.commands.run("'env'", opts)
    assert.equal(fast.stdout, real.stdout, JSON.stringify(opts))
    assert.match(fast.stdout, /^_=\/usr\/bin\/env$/m)
    const argv = await sbx.commands.run('cat /proc/self/cmdline', opts)
    assert.equal(argv.stdout, 'cat\0/proc/self/cmdline\0')
  }
  await assert.rejects(sbx.commands.run('no-such-command-here'), (e) => {
    assert.equal(e.exitCode, 127)
    assert.match(e.stderr, /no-such-command-here: command not found/)
    return true
  })
})
