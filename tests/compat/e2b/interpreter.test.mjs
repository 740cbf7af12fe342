// @e2b/code-interpreter: runCode and contexts, served by the kernel bridge.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

let sbx
before(async () => {
  sbx = await Sandbox.create() // template code-interpreter-v1 = base
  // this create registers the code interpreter's warm pool and is cold itself:
  // its kernel starts while the pool warms one, over the SDK's default 60 s
  // on a loaded host
  await sbx.runCode('None', { requestTimeoutMs: 170000, timeoutMs: 170000 })
})
after(async () => { await sbx?.kill() })

test('state persists; the last expression is the main result', async () => {
  const a = await sbx.runCode('x = 41\nx + 1')
  assert.equal(a.error, undefined)
  assert.equal(a.text, '42')
  const b = await sbx.runCode('x * 2')
  assert.equal(b.text, '82')
  assert.ok(b.executionCount >= 2)
})

test('stdout/stderr callbacks stream; error name/value/traceback', async () => {
  const out = [], err = []
  const r = await sbx.runCode('import sys\nprint("to out")\nprint("to err", file=sys.stderr)', {
    onStdout: (m) => out.push(m.line), onStderr: (m) => err.push(m.line),
  })
  assert.deepEqual(r.logs.stdout, ['to out\n'])
  assert.deepEqual(r.logs.stderr, ['to err\n'])
  assert.deepEqual(out, ['to out\n'])
  assert.deepEqual(err, ['to err\n'])
  const e = await sbx.runCode('1/0')
  assert.equal(e.error.name, 'ZeroDivisionError')
  assert.match(e.error.value, /division by zero/)
  assert.match(e.error.traceback, /ZeroDivisionError/)
})

test('html and matplotlib png results', async () => {
  const h = await sbx.runCode('from IPython.display import HTML\nHTML("<b>bold</b>")')
  assert.equal(h.results[0].html, '<b>bold</b>')
  const p = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()')
  const png = p.results.find((x) => x.png)
  assert.ok(png, JSON.stringify(p.results.map((x) => Object.keys(x))))
  assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG')
})

test('contexts: create, list, run in it, restart, remove', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
  assert.ok(ctx.id)
  assert.equal(ctx.cwd, '/tmp')
  const r = await sbx.runCode('import os\ny = 5\nos.getcwd()', { context: ctx })
  assert.equal(r.text, "'/tmp'")
  const other = await sbx.runCode("'y' in dir()")
  assert.equal(other.text, 'False', 'the default context does not see y')
  const list = await sbx.listCodeContexts()
  assert.ok(list.some((c) => c.id === ctx.id))
  await sbx.restartCodeContext(ctx)
  const after = await sbx.runCode("'y' in dir()", { context: ctx })
  assert.equal(after.text, 'False', 'a restart forgets the state')
  await sbx.removeCodeContext(ctx)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
})

test('the sandbox id alone runs nothing: /execute and /contexts need a credential', async () => {
  const base = process.env.E2B_SANDBOX_URL
  const h = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999', 'Content-Type': 'application/json' }
  const calls = [['/execute', 'POST', JSON.stringify({ code: '1 + 1' })], ['/contexts', 'GET'], ['/contexts', 'POST', '{}']]
  for (const [path, method, body] of calls) {
    const res = await fetch(`${base}${path}`, { method, headers: h, body })
    assert.equal(res.status, 401, `${method} ${path}`)
    const other = await fetch(`${base}${path}`, { method, headers: { ...h, 'X-Access-Token': 'x'.repeat(64) }, body })
    assert.equal(other.status, 401, `${method} ${path} with a wrong token`)
  }
  // what the SDK holds opens it: the access token, or the traffic token it sends with /contexts
  assert.ok(sbx.trafficAccessToken, 'the create answer carries a trafficAccessToken')
  const ok = await fetch(`${base}/contexts`, { headers: { ...h, 'E2B-Traffic-Access-Token': sbx.trafficAccessToken } })
  assert.equal(ok.status, 200)
  // ... but the traffic token, which opens the sandbox's web ports, runs no code
  const run = await fetch(`${base}/execute`, {
    method: 'POST', headers: { ...h, 'E2B-Traffic-Access-Token': sbx.trafficAccessToken },
    body: JSON.stringify({ code: '1 + 1' }),
  })
  assert.equal(run.status, 401)
})

test('runCode calls at once and in turn, small and past 64 KiB: each gets its own output, whole', async () => {
  // a request up to 64 KiB goes out with the tunnel's TUNNEL_OPEN, a larger
  // one after it (e2b_ci.c): both, side by side, on tunnels of their own
  const big = 'x'.repeat(100 * 1024)
  const code = (i) => i % 2 ? `s = '${big}'\nprint('run-${i}')\nlen(s) + ${i}` : `print('run-${i}')\n${i}`
  const want = (i) => String(i % 2 ? big.length + i : i)
  const together = await Promise.all([0, 1, 2, 3].map((i) => sbx.runCode(code(i))))
  together.forEach((r, i) => {
    assert.equal(r.error, undefined, `run ${i}`)
    // the kernel may send a print's text and its newline apart
    assert.equal(r.logs.stdout.join(''), `run-${i}\n`, `run ${i}`)
    assert.equal(r.text, want(i), `run ${i}`)
  })
  for (const i of [4, 5, 6, 7]) {
    const r = await sbx.runCode(code(i))
    assert.equal(r.logs.stdout.join(''), `run-${i}\n`, `run ${i}`)
    assert.equal(r.text, want(i), `run ${i}`)
  }
})

test('the input history is kept in memory: In and Out work, no SQLite history written', async () => {
  await sbx.runCode('21 * 2')
  const r = await sbx.runCode('(get_ipython().history_manager.enabled, In[-2], Out[len(In) - 2])')
  assert.equal(r.error, undefined)
  assert.equal(r.text, "(False, '21 * 2', 42)")
})
