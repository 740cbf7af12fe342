// @e2b/code-interpreter from the warm pool: sandboxes of the code-interpreter
// template are pooled with a running kernel (src/server/e2b/e2b_ci.c,
// pd_e2b_ci_prep), never shared, their warm-up leaving no name behind.
// They use a class of their own (allowInternetAccess: false: the network
// is part of a pool class) so that other files' creates do not take them.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { Sandbox } from '@e2b/code-interpreter'
import { API, KEY, until, tracker } from './common.mjs'

const made = tracker()
const OFFLINE = { allowInternetAccess: false }
after(() => made.cleanup())

// Warm sandboxes of the code-interpreter class, from paddock's /metrics.
async function warmReady() {
  const text = await (await fetch(`${API}/metrics`)).text()
  const m = text.match(/^paddock_pool_ready\{template="base\+code-interpreter"\} (\d+)$/m)
  return m ? Number(m[1]) : 0
}

async function pooled(opts = {}) {
  // run.sh serves with --pool 1: the first create of the class registers it
  // (and is cold); the filler then warms one, the wait is its kernel start
  assert.ok(await until(warmReady, 140000, 250), 'a warm code-interpreter sandbox in the pool')
  return made.add(await Sandbox.create({ ...OFFLINE, ...opts }))
}

const names = "sorted(n for n in globals() if not n.startswith('_'))"
const FRESH_NAMES = "['In', 'Out', 'exit', 'get_ipython', 'quit']"

test('a pooled sandbox: imports done, no name left behind, its own envs, its own kernel', async () => {
  await made.add(await Sandbox.create(OFFLINE)).kill()      // registers the class
  const a = await pooled({ envs: { WHO: 'a' } })
  // the names the user sees: those of a kernel that had no warm-up (Debian
  // 12's IPython; a fresh context of the bridge shows these, the interpreter
  // test's contexts check that other state does not leak between them)
  const warm = await a.runCode(names)
  assert.equal(warm.text, FRESH_NAMES)
  const mods = await a.runCode("import sys\n[m in sys.modules for m in ('pandas', 'numpy', 'matplotlib.pyplot')]")
  assert.equal(mods.error, undefined)
  assert.equal(mods.text, '[True, True, True]', 'the warm-up imported the common modules')
  // envVars given at create reach the kernel that was started before them
  assert.equal((await a.runCode("import os\nos.environ.get('WHO')")).text, "'a'")
  assert.equal((await a.commands.run('echo $WHO')).stdout, 'a\n')
  await a.runCode('secret = 42')

  // another key's sandbox, from the pool too: nothing of a's
  const other = execFileSync(process.env.PADDOCK_BIN, ['key', 'create', '--state-dir', process.env.PADDOCK_E2B_STATE])
    .toString().trim()
  assert.ok(other, 'a second key')
  const b = await pooled({ apiKey: other, envs: { WHO: 'b' } })
  assert.notEqual(b.sandboxId, a.sandboxId)
  assert.equal((await b.runCode("'secret' in globals()")).text, 'False')
  assert.equal((await b.runCode("import os\nos.environ.get('WHO')")).text, "'b'")
  assert.equal((await a.runCode('secret')).text, '42', "a's kernel still has its state")
})

