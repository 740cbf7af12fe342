// @e2b/code-interpreter results as E2B gives them: a figure of a script that
// chose the Agg backend, E2B's structured chart, json; language 'bash'
// (src/sandbox-tools/kernel_bridge.py); and a clear error for a language
// there is no kernel for.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'
import { tracker } from './common.mjs'

const made = tracker()
let s
before(async () => { s = made.add(await Sandbox.create()) })
after(() => made.cleanup())

test('matplotlib.use("Agg"): the figure still comes back, with its chart', async () => {
  // the first runCode may start the kernel (a cold sandbox): a loaded host
  // takes its time
  const r = await s.runCode('import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n' +
    'plt.plot([1, 2, 3], [4, 5, 6], label="up")\nplt.title("rise")\nplt.xlabel("t")\nplt.savefig("/tmp/x.png")', { requestTimeoutMs: 170000, timeoutMs: 170000 })
  assert.equal(r.error, undefined, JSON.stringify(r.error))
  const fig = r.results.find((x) => x.png)
  assert.ok(fig, JSON.stringify(r.results.map((x) => Object.keys(x))))
  assert.equal(Buffer.from(fig.png, 'base64').subarray(1, 4).toString(), 'PNG')
  assert.equal(fig.chart?.type, 'line', JSON.stringify(fig.chart))
  assert.equal(fig.chart.title, 'rise')
  assert.equal(fig.chart.x_label, 't')
  assert.deepEqual(fig.chart.elements[0].points, [[1, 4], [2, 5], [3, 6]])
  assert.equal(fig.chart.elements[0].label, 'up')
  // the figure was shown once: the next run has none
  assert.equal((await s.runCode('1')).results.filter((x) => x.png).length, 0)

  const bar = await s.runCode('import matplotlib.pyplot as plt\nplt.bar(["a", "b"], [3, 4])\nplt.show()')
  const chart = bar.results.find((x) => x.chart)?.chart
  assert.equal(chart?.type, 'bar', JSON.stringify(bar.results.map((x) => Object.keys(x))))
  assert.deepEqual(chart.elements.map((e) => [e.label, Number(e.value)]), [['a', 3], ['b', 4]])
  const pie = await s.runCode('import matplotlib.pyplot as plt\nplt.pie([1, 3], labels=["x", "y"])\nplt.show()')
  const pc = pie.results.find((x) => x.chart)?.chart
  assert.equal(pc?.type, 'pie')
  assert.deepEqual(pc.elements.map((e) => [e.label, Math.round(e.angle)]), [['x', 90], ['y', 270]])

  const j = await s.runCode('from IPython.display import JSON\nJSON({"a": [1, 2]})')
  assert.deepEqual(j.results[0].json, { a: [1, 2] })
})

test("language 'bash': state kept between runs, failures are errors; other languages named", async () => {
  const a = await s.runCode('X=5; cd /tmp; echo "x is $X"; echo oops >&2', { language: 'bash' })
  assert.deepEqual(a.logs.stdout, ['x is 5\n'])
  assert.deepEqual(a.logs.stderr, ['oops\n'])
  assert.equal(a.error, undefined)
  const b = await s.runCode('echo "$X $(pwd)"', { language: 'bash' })
  assert.deepEqual(b.logs.stdout, ['5 /tmp\n'])
  const bad = await s.runCode('false', { language: 'bash' })
  assert.equal(bad.error?.value, 'exit status 1')
  const syntax = await s.runCode('if then', { language: 'bash' })
  assert.ok(syntax.error, 'a syntax error is a failed run')
  assert.deepEqual((await s.runCode('echo still $X', { language: 'bash' })).logs.stdout, ['still 5\n'])
  const ctx = await s.createCodeContext({ language: 'bash', cwd: '/' })
  assert.deepEqual((await s.runCode('echo "[$X]" $(pwd)', { context: ctx })).logs.stdout, ['[] /\n'])
  const js = await s.runCode('1', { language: 'js' })
  assert.equal(js.error?.name, 'UnsupportedLanguage')
  assert.match(js.error.value, /'js' is not supported.*python, bash/)
  await assert.rejects(s.createCodeContext({ language: 'r' }), /400/)
  const raw = await fetch(`${process.env.E2B_SANDBOX_URL}/contexts`, {
    method: 'POST', body: JSON.stringify({ language: 'r' }),
    headers: { 'E2b-Sandbox-Id': s.sandboxId, 'E2b-Sandbox-Port': '49999', 'X-Access-Token': s.envdAccessToken,
      'Content-Type': 'application/json' },
  })
  assert.equal(raw.status, 400)
  assert.match((await raw.json()).error, /'r' is not supported.*python, bash/)
})
