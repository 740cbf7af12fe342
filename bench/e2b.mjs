// E2B SDK benchmark: the official `e2b` JS SDK against paddock, beside the
// same work through paddock's native HTTP API (fetch), in the same run.
//
//   1. Sandbox.create() + sandbox.commands.run('echo hi') + sandbox.kill(),
//      end to end, against POST /api/v1/sandboxes + POST .../exec
//      {"cmd":"echo hi"} + DELETE, the same with the argv form
//      {"cmd":["echo","hi"]}, and `bwrap --unshare-all ... echo hi` run
//      from Node; the peers' order rotates round by round.
//   1b. (--kill-rounds N) the kill alone: sbx.kill() and DELETE of a
//      pooled sandbox, on this build's server and the --before one.
//   2. commands.run('true') in one running sandbox, against POST .../exec
//      {"cmd":"true"} in the same sandbox; alternated.
//
// Run it through bench/e2b-run.sh, which starts a private `paddock serve`,
// sets E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY (and PADDOCK_BENCH_*), and
// stops and garbage-collects the server afterwards:
//
//   sudo bench/e2b-run.sh [--rounds N] [--exec-rounds N] [--report FILE]
//
// Writes bench/reports/e2b.md. Uses Node's own modules and the SDK installed
// in tests/compat/e2b/node_modules (scripts/setup-node.sh).
import { readFileSync, writeFileSync, renameSync, mkdirSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import os from 'node:os'
import { execFile } from 'node:child_process'

const here = dirname(fileURLToPath(import.meta.url))
const top = dirname(here)
const sdkDir = join(top, 'tests/compat/e2b/node_modules/e2b')
const { Sandbox } = await import(pathToFileURL(join(sdkDir, 'dist/index.mjs')).href)
const sdkVersion = JSON.parse(readFileSync(join(sdkDir, 'package.json'), 'utf8')).version

// ---- options
const opts = { rounds: 200, execRounds: 200, killRounds: 0, warmup: 3, poolWait: 15, report: join(here, 'reports/e2b.md') }
const argv = process.argv.slice(2)
for (let i = 0; i < argv.length; i++) {
  const a = argv[i]
  const v = () => { if (i + 1 >= argv.length) throw new Error(`${a} needs a value`); return argv[++i] }
  if (a === '--rounds') opts.rounds = +v()
  else if (a === '--exec-rounds') opts.execRounds = +v()
  else if (a === '--kill-rounds') opts.killRounds = +v()
  else if (a === '--warmup') opts.warmup = +v()
  else if (a === '--pool-wait') opts.poolWait = +v()
  else if (a === '--report') opts.report = v()
  else if (a === '-h' || a === '--help') { console.log('usage: bench/e2b-run.sh [--before OLD_PADDOCK] [--rounds N] [--exec-rounds N] [--kill-rounds N] [--warmup N] [--pool-wait S] [--report FILE]'); process.exit(0) }
  else throw new Error(`unknown option ${a}`)
}
const API = process.env.E2B_API_URL
const KEY = process.env.E2B_API_KEY
const POOL = +(process.env.PADDOCK_BENCH_POOL || 0)
// a second server of an older build (bench/e2b-run.sh --before PATH): its
// peers alternate with these in part 1 (before/after in one run)
const MAIN = { url: API, key: KEY, conn: {} }
const BEFORE = process.env.PADDOCK_BENCH_BEFORE_URL
  ? { url: process.env.PADDOCK_BENCH_BEFORE_URL, key: process.env.PADDOCK_BENCH_BEFORE_KEY,
      conn: { apiUrl: process.env.PADDOCK_BENCH_BEFORE_URL, sandboxUrl: process.env.PADDOCK_BENCH_BEFORE_URL, apiKey: process.env.PADDOCK_BENCH_BEFORE_KEY } }
  : null
if (!API || !KEY || !process.env.E2B_SANDBOX_URL) {
  console.error('e2b.mjs: run it through bench/e2b-run.sh (E2B_* variables)')
  process.exit(2)
}

// ---- helpers
const now = () => Number(process.hrtime.bigint()) / 1e6 // ms
const median = (v) => { const s = [...v].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2 }
const pct = (v, q) => { const s = [...v].sort((a, b) => a - b); const k = Math.max(1, Math.ceil(q / 100 * s.length)); return s[Math.min(k, s.length) - 1] }
const f = (x) => x >= 0.995 ? x.toFixed(2) : x.toFixed(3)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const auth = { Authorization: `Bearer ${KEY}` }
const live = new Set() // sandbox ids to delete if we fail

async function api (method, path, body, srv = MAIN) {
  const a = { Authorization: `Bearer ${srv.key}` }
  const r = await fetch(`${srv.url}/api/v1${path}`, {
    method,
    headers: body === undefined ? a : { ...a, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await r.text()
  let json = null
  try { json = text ? JSON.parse(text) : null } catch { }
  return { status: r.status, json, text }
}

// The fullness of the least full pool class (paddock_pool_ready{template=...},
// one series per class: the plain pool and, on a server with the E2B network
// class, e2b_pool.c's). Not paddock_pool_ready_isolation, which counts the
// same sandboxes again.
async function poolReady (srv = MAIN) {
  const r = await fetch(`${srv.url}/metrics`)
  const text = await r.text()
  let n = null
  for (const line of text.split('\n')) {
    if (!line.startsWith('paddock_pool_ready{')) continue
    const v = +line.split(/\s+/).pop()
    n = n === null ? v : Math.min(n, v)
  }
  return n ?? 0
}

async function waitPool (srv = MAIN) {
  if (!POOL) return 0
  const t0 = now()
  while (now() - t0 < opts.poolWait * 1000) {
    if (await poolReady(srv) >= POOL) return now() - t0
    await sleep(5)
  }
  return null
}

class Peer {
  constructor (name, label, command, srv = MAIN) { Object.assign(this, { name, label, command, srv, walls: [], parts: {}, failures: [], error: null }) }
  part (k, v) { (this.parts[k] ||= []).push(v) }
}

// ---- 1. create + run + kill
const tag = BEFORE ? ' (after)' : ''
const sdk = new Peer('sdk', `E2B SDK ${sdkVersion}${tag}`, "await Sandbox.create(); await sbx.commands.run('echo hi'); await sbx.kill()")
const nat = new Peer('native', `native API (fetch)${tag}`, 'POST /api/v1/sandboxes {} ; POST /api/v1/sandboxes/{id}/exec {"cmd":"echo hi"} ; DELETE /api/v1/sandboxes/{id}')
const natArgv = new Peer('argv', `native API, argv form${tag}`, 'POST /api/v1/sandboxes {} ; POST /api/v1/sandboxes/{id}/exec {"cmd":["echo","hi"]} ; DELETE /api/v1/sandboxes/{id}')
const BWRAP = ['--unshare-all', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', 'echo', 'hi']
const bw = new Peer('bwrap', 'bwrap', `bwrap ${BWRAP.join(' ')} (execFile from Node)`)
const sdkB = BEFORE && new Peer('sdk', `E2B SDK ${sdkVersion} (before)`, 'the same, on the older build\'s server', BEFORE)
const natB = BEFORE && new Peer('native', 'native API (fetch) (before)', 'the same, on the older build\'s server', BEFORE)

async function runSdk (p) {
  const t0 = now()
  const sbx = await Sandbox.create(p.srv.conn)
  const t1 = now()
  live.add(sbx.sandboxId)
  const r = await sbx.commands.run('echo hi')
  const t2 = now()
  await sbx.kill()
  const t3 = now()
  live.delete(sbx.sandboxId)
  if (r.stdout !== 'hi\n' || r.exitCode !== 0) throw new Error(`commands.run: exit ${r.exitCode}, stdout ${JSON.stringify(r.stdout)}`)
  p.walls.push(t3 - t0); p.part('create', t1 - t0); p.part('run', t2 - t1); p.part('kill', t3 - t2)
}

async function runNative (p, cmd = 'echo hi') {
  const t0 = now()
  const c = await api('POST', '/sandboxes', {}, p.srv)
  const t1 = now()
  if (c.status !== 201) throw new Error(`create: HTTP ${c.status} ${c.text.slice(0, 200)}`)
  const id = c.json.id
  if (p.srv === MAIN) live.add(id)
  const e = await api('POST', `/sandboxes/${id}/exec`, { cmd }, p.srv)
  const t2 = now()
  const d = await api('DELETE', `/sandboxes/${id}`, undefined, p.srv)
  const t3 = now()
  if (d.status === 204) live.delete(id)
  if (e.status !== 200 || e.json?.stdout !== 'hi\n') throw new Error(`exec: HTTP ${e.status} ${e.text.slice(0, 200)}`)
  if (d.status !== 204) throw new Error(`delete: HTTP ${d.status} ${d.text.slice(0, 200)}`)
  p.walls.push(t3 - t0); p.part('create', t1 - t0); p.part('run', t2 - t1); p.part('kill', t3 - t2)
}

// bwrap from Node, the way the peers above reach paddock: a child process
// whose output Node reads (execFile: no shell)
function runBwrap (p) {
  return new Promise((resolve, reject) => {
    const t0 = now()
    execFile('bwrap', BWRAP, (err, stdout) => {
      const t1 = now()
      if (err) return reject(new Error(`bwrap: ${err.message}`))
      if (stdout !== 'hi\n') return reject(new Error(`bwrap: stdout ${JSON.stringify(stdout)}`))
      p.walls.push(t1 - t0)
      resolve()
    })
  })
}

const fns = { sdk: runSdk, native: (p) => runNative(p), argv: (p) => runNative(p, ['echo', 'hi']), bwrap: runBwrap }
const peers = BEFORE ? [sdk, nat, natArgv, bw, sdkB, natB] : [sdk, nat, natArgv, bw]
const teardownWaits = []
let teardownTimeouts = 0

// The server's teardown of deleted sandboxes (after the delete answered,
// issue 19) finished: GET /api/v1/health "teardowns_pending" == 0. Older
// servers have no such field (their delete answered after it): 0 wait.
async function waitTeardowns (srv = MAIN) {
  const t0 = now()
  while (now() - t0 < opts.poolWait * 1000) {
    const r = await fetch(`${srv.url}/api/v1/health`)
    const j = await r.json()
    if (!j.teardowns_pending) return now() - t0
    await sleep(1)
  }
  return null
}

// paddock_pool_takes_total{result="hit"|"miss"}: did the creates find a warm sandbox
async function poolTakes (srv = MAIN) {
  const text = await (await fetch(`${srv.url}/metrics`)).text()
  const out = { hit: 0, miss: 0 }
  for (const line of text.split('\n')) {
    const m = line.match(/^paddock_pool_takes_total\{result="(hit|miss)"\} (\d+)/)
    if (m) out[m[1]] = +m[2]
  }
  return out
}
const poolWaits = []
let poolTimeouts = 0

async function once (p, timed) {
  const saved = timed ? null : [p.walls.length, Object.fromEntries(Object.entries(p.parts).map(([k, v]) => [k, v.length]))]
  try {
    await fns[p.name](p)
    p.streak = 0
  } catch (e) {
    const msg = `${e?.name || 'Error'}: ${e?.message || e}`
    if (timed) {
      p.failures.push(msg)
      console.error(`${p.label} failed: ${msg}`)
      if (++p.streak >= 3) p.error = msg
    } else p.lastWarm = msg
  } finally {
    if (saved) { p.walls.length = saved[0]; for (const [k, n] of Object.entries(saved[1])) p.parts[k].length = n }
    if (p.name !== 'bwrap') {
      // untimed: the teardown after the answer done, so that it does not
      // run during the next peer's turn, and the pool refilled, so that
      // the next create (of any peer) finds it full
      const tw = await waitTeardowns(p.srv)
      if (timed) { if (tw === null) teardownTimeouts++; else teardownWaits.push(tw) }
      const w = await waitPool(p.srv)
      if (timed) { if (w === null) poolTimeouts++; else if (POOL) poolWaits.push(w) }
    }
  }
}

const loadBefore = os.loadavg().map((x) => x.toFixed(2)).join(' ')
await waitPool()
if (BEFORE) await waitPool(BEFORE)
console.error('warm-up ...')
for (const p of peers) for (let i = 0; i < opts.warmup; i++) await once(p, false)
for (const p of peers) if (p.lastWarm && !p.walls.length && opts.warmup) { /* keep going; timed runs decide */ }
const takes0 = await poolTakes()
for (let rnd = 0; rnd < opts.rounds; rnd++) {
  const k = rnd % peers.length
  const order = [...peers.slice(k), ...peers.slice(0, k)]
  for (const p of order) if (!p.error) await once(p, true)
  if ((rnd + 1) % 50 === 0 || rnd + 1 === opts.rounds) console.error(`round ${rnd + 1}/${opts.rounds}`)
}

const takes1 = await poolTakes()

// ---- 1b. the kill alone (--kill-rounds): a pooled create (untimed), then
// the timed sbx.kill() / DELETE; peers on both servers, rotated
const kills = []
if (opts.killRounds) {
  const mk = (label, srv, sdkPath) => ({ label, srv, sdkPath, v: [] })
  kills.push(mk('E2B SDK sbx.kill()', MAIN, true), mk('native DELETE', MAIN, false))
  if (BEFORE) kills.push(mk('E2B SDK sbx.kill() (before)', BEFORE, true), mk('native DELETE (before)', BEFORE, false))
  console.error('kill alone ...')
  for (let rnd = 0; rnd < opts.killRounds; rnd++) {
    const k = rnd % kills.length
    for (const p of [...kills.slice(k), ...kills.slice(0, k)]) {
      try {
        if (p.sdkPath) {
          const sbx = await Sandbox.create(p.srv.conn)
          const t0 = now(); await sbx.kill(); p.v.push(now() - t0)
        } else {
          const c = await api('POST', '/sandboxes', {}, p.srv)
          if (c.status !== 201) throw new Error(`create: HTTP ${c.status}`)
          const t0 = now(); const d = await api('DELETE', `/sandboxes/${c.json.id}`, undefined, p.srv); const t1 = now()
          if (d.status !== 204) throw new Error(`delete: HTTP ${d.status}`)
          p.v.push(t1 - t0)
        }
      } catch (e) { console.error(`${p.label}: ${e?.message || e}`) }
      await waitTeardowns(p.srv)
      await waitPool(p.srv)
    }
  }
}

// ---- 2. run `true` in one running sandbox
const ex = { sdk: [], native: [], sdkFail: [], nativeFail: [] }
let sbx = null
try {
  console.error('exec in one running sandbox ...')
  sbx = await Sandbox.create()
  live.add(sbx.sandboxId)
  const id = sbx.sandboxId
  const oneSdk = async () => {
    const t0 = now()
    try { const r = await sbx.commands.run('true'); if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}`); ex.sdk.push(now() - t0) } catch (e) { ex.sdkFail.push(String(e?.message || e)) }
  }
  const oneNat = async () => {
    const t0 = now()
    const r = await api('POST', `/sandboxes/${id}/exec`, { cmd: 'true' })
    if (r.status === 200 && r.json?.exit_code === 0) ex.native.push(now() - t0); else ex.nativeFail.push(`HTTP ${r.status} ${r.text.slice(0, 200)}`)
  }
  for (let i = 0; i < opts.warmup * 3; i++) { await oneSdk(); await oneNat() }
  ex.sdk.length = 0; ex.native.length = 0; ex.sdkFail.length = 0; ex.nativeFail.length = 0
  for (let i = 0; i < opts.execRounds; i++) {
    if (i % 2) { await oneNat(); await oneSdk() } else { await oneSdk(); await oneNat() }
    if (ex.sdkFail.length >= 3 && !ex.sdk.length && ex.nativeFail.length >= 3 && !ex.native.length) break
  }
} catch (e) {
  ex.error = `${e?.name || 'Error'}: ${e?.message || e}`
  console.error(`exec part failed: ${ex.error}`)
} finally {
  if (sbx) { try { await sbx.kill(); live.delete(sbx.sandboxId) } catch { } }
  for (const id of live) { try { await api('DELETE', `/sandboxes/${id}`) } catch { } }
}

// ---- output
const health = await api('GET', '/health').catch(() => null)
const rows1 = []
const ref = nat.walls.length ? median(nat.walls) : null
const ref99 = nat.walls.length ? pct(nat.walls, 99) : null
const bref = bw.walls.length ? median(bw.walls) : null
for (const p of peers) {
  if (!p.walls.length) { rows1.push([p.label, '0', '-', '-', '-', '-', '-', '-', '-', '-', `not measured: ${p.error || p.lastWarm || 'no runs'}`]); continue }
  const m = median(p.walls)
  const parts = p.parts.create ? `create ${f(median(p.parts.create))} + run ${f(median(p.parts.run))} + kill ${f(median(p.parts.kill))}` : '-'
  rows1.push([p.label, String(p.walls.length), f(Math.min(...p.walls)), f(m), f(pct(p.walls, 99)), f(Math.max(...p.walls)),
    ref ? `${(m / ref).toFixed(2)}×` : '-', ref99 ? `${(pct(p.walls, 99) / ref99).toFixed(2)}×` : '-',
    bref ? `${(m / bref).toFixed(2)}×` : '-', parts,
    p.error ? `dropped: ${p.error}` : p.failures.length ? `${p.failures.length} failed run(s) not counted` : ''])
}
const head1 = ['peer', 'runs', 'min ms', 'p50 ms', 'p99 ms', 'max ms', 'p50 / native', 'p99 / native', 'p50 / bwrap', 'p50 of the parts', 'note']
const rows2 = []
const head2 = ['peer', 'runs', 'min ms', 'p50 ms', 'p99 ms', 'max ms', 'p50 / native', 'p99 / native']
if (ex.sdk.length && ex.native.length) {
  const n50 = median(ex.native); const n99 = pct(ex.native, 99)
  for (const [label, v] of [[`E2B SDK commands.run('true')`, ex.sdk], ['native POST .../exec {"cmd":"true"}', ex.native]]) {
    rows2.push([label, String(v.length), f(Math.min(...v)), f(median(v)), f(pct(v, 99)), f(Math.max(...v)),
      `${(median(v) / n50).toFixed(2)}×`, `${(pct(v, 99) / n99).toFixed(2)}×`])
  }
}

function textTable (head, rows) {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)))
  const line = (r) => r.map((c, i) => i === 0 ? c.padEnd(w[i]) : c.padStart(w[i])).join('  ').trimEnd()
  return [line(head), ...rows.map(line)].join('\n')
}
function mdTable (head, rows, left = [0]) {
  return [`| ${head.join(' | ')} |`, `|${head.map((_, i) => left.includes(i) ? '---' : '---:').join('|')}|`,
    ...rows.map((r) => `| ${r.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`)].join('\n')
}

let goal = ''
if (sdk.walls.length) {
  const m = median(sdk.walls)
  goal = `**E2B SDK create + run + kill p50: ${f(m)} ms** (target ≤ 10 ms (issue 19): ${m <= 10 ? 'met' : 'NOT met'}; E2B's own service advertises about 150 ms for a start alone: ${(150 / m).toFixed(1)}× that).`
  if (natArgv.walls.length && bref) {
    // the target's own figure: the first output, without the delete
    const fo = natArgv.walls.map((w, i) => natArgv.parts.create[i] + natArgv.parts.run[i])
    const r = median(fo) / bref
    goal += `\n\n**Pooled create + exec of \`echo hi\` (argv) over HTTP p50: ${f(median(fo))} ms = ${r.toFixed(2)}× bwrap's ${f(bref)} ms** (target ≤ 0.5× (issue 19, 3): ${r <= 0.5 ? 'met' : 'NOT met'}; with the delete: ${(median(natArgv.walls) / bref).toFixed(2)}×).`
  }
  if (BEFORE && sdkB.walls.length && natB.walls.length && nat.walls.length) {
    goal += `\n\n- after / before p50, same run: E2B SDK ${(m / median(sdkB.walls)).toFixed(2)}× (${f(median(sdkB.walls))} → ${f(m)} ms), native ${(median(nat.walls) / median(natB.walls)).toFixed(2)}× (${f(median(natB.walls))} → ${f(median(nat.walls))} ms).`
  }
}
for (const p of kills) if (p.v.length) console.log(`kill alone: ${p.label}: p50 ${f(median(p.v))} ms (${p.v.length} runs)`)
console.log()
console.log("1. Sandbox.create() + commands.run('echo hi') + kill(), end to end (ms; ratios to the native API)")
console.log(textTable(head1.slice(0, -1), rows1.map((r) => r.slice(0, -1))))
if (goal) console.log(goal.replace(/\*\*/g, ''))
if (rows2.length) {
  console.log()
  console.log("2. run 'true' in one running sandbox (ms)")
  console.log(textTable(head2, rows2))
}

const cpu = (() => { try { const m = readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/); return `${m ? m[1] : os.cpus()[0]?.model} (${os.cpus().length} online CPUs)` } catch { return '?' } })()
const rel = (p) => relative(top, p)
const L = ['# paddock E2B SDK benchmark', '',
  'Generated by `bench/e2b.mjs` through `bench/e2b-run.sh` (see `bench/README.md`). Do not edit by hand.', '',
  '## Machine', '',
  `- Date: ${new Date().toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC')}`,
  `- Kernel: ${os.release()}`,
  `- CPU: ${cpu}`,
  `- Load average (1/5/15 min) before: ${loadBefore}; after: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`,
  `- Command line: \`${process.env.PADDOCK_BENCH_CMDLINE || 'bench/e2b-run.sh' + process.argv.slice(2).map((a) => ' ' + a).join('')}\``, '',
  '## Versions', '',
  `- paddock: \`${process.env.PADDOCK_BENCH_VERSION || health?.json?.version || '?'}\``,
  `- e2b (JS SDK): \`${sdkVersion}\` (${rel(sdkDir)})`,
  `- node: \`${process.version}\` (${rel(process.execPath)})`, '',
  '## Server', '', '```', process.env.PADDOCK_BENCH_SERVE || '?', '```', '',
  ...(BEFORE ? [`The "(before)" peers use a second server of an older build (\`${process.env.PADDOCK_BENCH_BEFORE_VERSION || '?'}\`, ${process.env.PADDOCK_BENCH_BEFORE_SERVE || '?'}), passed to the SDK as \`{apiUrl, sandboxUrl, apiKey}\`; part 1's peers rotate their order round by round.`, ''] : []),
  `The SDK reaches it through \`E2B_API_URL\` = \`E2B_SANDBOX_URL\` = \`http://127.0.0.1:<port>\` and \`E2B_API_KEY\` = the server's key (docs/e2b.md); the native peer uses Node's \`fetch\` (undici, keep-alive) on \`/api/v1\` with the same key. Both run in the same Node process, one after the other.`, '',
  "## 1. Create + run + kill", '',
  `Per round, the peers' order rotated by one each round (${opts.rounds} rounds, ${opts.warmup} untimed warm-up runs of each first):`, '',
  ...peers.map((p) => `- **${p.label}**: \`${p.command}\``), '',
  `Timed end to end, from the create call to the return of the kill / DELETE; the parts are the three calls; bwrap from its spawn to its exit, output read. After every paddock run the benchmark waits (untimed) until \`/api/v1/health\` says no teardown is pending (a delete answers once the sandbox's processes are dead; its mounts, network, cgroups and directory go after the answer) and \`/metrics\` shows every warm pool class full again (${POOL} sandboxes each), so each create of any peer finds a full pool and no teardown running. \`commands.run\` and a string \`cmd\` both run \`/bin/bash -l -c 'echo hi'\` in the sandbox; the argv peer runs \`echo hi\` itself, as bwrap does.`, '',
  mdTable(head1, rows1, [0, 9, 10]), '', goal, '']
if (poolWaits.length) L.push(`- Pool refill after a run (untimed, polled every 5 ms): median ${median(poolWaits).toFixed(0)} ms, p99 ${pct(poolWaits, 99).toFixed(0)} ms.`)
if (teardownWaits.length) L.push(`- Teardown after the answer, waited for (untimed) after every paddock run until \`/api/v1/health\` said \`teardowns_pending\` 0, polled every 1 ms: median ${median(teardownWaits).toFixed(1)} ms, p99 ${pct(teardownWaits, 99).toFixed(1)} ms.`)
if (teardownTimeouts) L.push(`- The teardown did not finish within ${opts.poolWait} s after ${teardownTimeouts} run(s).`)
L.push(`- Warm pool takes during the timed rounds (\`paddock_pool_takes_total\`): ${takes1.hit - takes0.hit} hits, ${takes1.miss - takes0.miss} misses (${peers.filter((p) => p.name !== 'bwrap' && p.srv === MAIN).reduce((a, p) => a + p.walls.length + p.failures.length, 0)} creates on this build's server).`)
if (poolTimeouts) L.push(`- The pool did not refill within ${opts.poolWait} s after ${poolTimeouts} run(s).`)
for (const p of peers) if (p.failures.length) L.push(`- ${p.label}: ${p.failures.length} failed run(s): ${p.failures.slice(0, 3).join('; ')}`)
if (kills.length) {
  const nk = kills[1].v.length ? median(kills[1].v) : null
  const rows = kills.filter((p) => p.v.length).map((p) => [p.label, String(p.v.length), f(Math.min(...p.v)), f(median(p.v)), f(pct(p.v, 99)), f(Math.max(...p.v)), nk ? `${(median(p.v) / nk).toFixed(2)}×` : '-'])
  L.push('', '## 1b. The kill alone', '', `A pooled create (untimed), then the timed \`await sbx.kill()\` or \`DELETE /api/v1/sandboxes/{id}\`; the peers' order rotated each round (${opts.killRounds} rounds), the teardown and the pool's refill waited for (untimed) after each.`, '',
    mdTable(['peer', 'runs', 'min ms', 'p50 ms', 'p99 ms', 'max ms', 'p50 / native DELETE'], rows), '')
}
L.push('', "## 2. `run('true')` in one running sandbox", '')
if (rows2.length) {
  L.push(`One sandbox from \`Sandbox.create()\`; then, alternating, \`await sbx.commands.run('true')\` (the SDK's Connect stream: start, output events, end) and the native \`POST /api/v1/sandboxes/{id}/exec {"cmd":"true"}\` on the same sandbox, ${opts.execRounds} each.`, '', mdTable(head2, rows2), '')
} else L.push(`Not measured: ${ex.error || [...ex.sdkFail, ...ex.nativeFail].slice(0, 3).join('; ') || 'no runs'}`, '')
if (ex.sdkFail.length || ex.nativeFail.length) L.push(`- Failures: SDK ${ex.sdkFail.length}, native ${ex.nativeFail.length}: ${[...ex.sdkFail, ...ex.nativeFail].slice(0, 3).join('; ')}`, '')
L.push('## Notes', '',
  '- The machine has 2 shared cores and other work on it; the server, its agents and Node share them. Compare p50s; max is mostly noise.',
  `- Sandboxes left at the end according to \`/api/v1/health\`: ${health?.json?.sandboxes ?? '?'} (the pool's warm sandboxes are not counted there); bench/e2b-run.sh then stops the server with SIGTERM and runs \`paddock gc --state-dir\`.`)
mkdirSync(dirname(opts.report), { recursive: true })
writeFileSync(opts.report + '.tmp', L.join('\n').trimEnd() + '\n')
renameSync(opts.report + '.tmp', opts.report)
console.log(`report: ${relative(process.cwd(), opts.report)}`)
process.exit(sdk.walls.length && nat.walls.length ? 0 : 1)
