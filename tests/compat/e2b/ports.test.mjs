// Sandbox ports through the E2B SDK: sandbox.getHost(port) is a name that
// resolves on this machine (*.localhost, libnss-myhostname) and carries the
// server's port, so `http://${getHost(port)}` works as it is; E2B's
// allowPublicTraffic: false needs the trafficAccessToken (header
// e2b-traffic-access-token); autoResume sandboxes wake on a request; a
// WebSocket service inside the sandbox (tests/server/ws_echo_server.py) is
// reached by the same host.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import net from 'node:net'
import { Sandbox } from 'e2b'
import { API, KEY, until } from './common.mjs'

const PORT = 9000
const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
let sbx

before(async () => {
  sbx = await Sandbox.create({ network: { allowPublicTraffic: false } })
  const src = readFileSync(new URL('../../server/ws_echo_server.py', import.meta.url), 'utf8')
  await sbx.files.write('/tmp/ws_echo.py', src)
  await sbx.commands.run(`python3 /tmp/ws_echo.py ${PORT}`, { background: true })
})
after(async () => { await sbx?.kill() })

// One WebSocket handshake to the server with Host: host; resolves with
// { status, headers, socket, rest } once the answer's head is in.
function handshake(host, token) {
  const { hostname, port } = new URL(API)
  const key = randomBytes(16).toString('base64')
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: hostname, port: Number(port) })
    let buf = Buffer.alloc(0)
    const onData = (d) => {
      buf = Buffer.concat([buf, d])
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) return
      sock.off('data', onData)
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n')
      const headers = {}
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':')
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim()
      }
      resolve({ status: Number(lines[0].split(' ')[1]), headers, sock, key, rest: buf.subarray(end + 4) })
    }
    sock.on('data', onData)
    sock.on('error', reject)
    sock.write(`GET /e2b HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
               `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n` +
               (token ? `e2b-traffic-access-token: ${token}\r\n` : '') + '\r\n')
  })
}

// Read whole unfragmented server frames (small ones: length < 126).
function frames(h, count) {
  return new Promise((resolve, reject) => {
    let buf = h.rest
    const out = []
    const take = () => {
      while (buf.length >= 2 && out.length < count) {
        const n = buf[1] & 0x7f
        let off = 2
        let len = n
        if (n === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4 }
        if (buf.length < off + len) return
        out.push({ op: buf[0] & 0x0f, data: buf.subarray(off, off + len) })
        buf = buf.subarray(off + len)
      }
      if (out.length === count) { h.sock.off('data', onData); h.rest = buf; resolve(out) }
    }
    const onData = (d) => { buf = Buffer.concat([buf, d]); take() }
    h.sock.on('data', onData)
    h.sock.on('error', reject)
    take()
  })
}

function sendText(sock, text) {
  const p = Buffer.from(text)
  const mask = randomBytes(4)
  const m = Buffer.from(p.map((b, i) => b ^ mask[i % 4]))
  sock.write(Buffer.concat([Buffer.from([0x81, 0x80 | p.length]), mask, m]))
}

test('getHost(port) reaches a WebSocket service, with the traffic token or public ports', async () => {
  const host = sbx.getHost(PORT)
  assert.equal(host, `${PORT}-${sbx.sandboxId}.localhost:${new URL(API).port}`)
  const token = sbx.trafficAccessToken
  assert.equal(token.length, 64)
  const up = await until(async () => {
    const h = await handshake(host, token)
    if (h.status === 101) return h
    h.sock.destroy()
    return null
  }, 30000, 200)
  assert.ok(up, 'the echo service answers 101 within 30 s')
  const want = createHash('sha1').update(up.key + GUID).digest('base64')
  assert.equal(up.headers['sec-websocket-accept'], want)
  const [hello] = await frames(up, 1)
  assert.equal(JSON.parse(hello.data).path, '/e2b')
  sendText(up.sock, 'hi from e2b')
  const [echo] = await frames(up, 1)
  assert.equal(echo.op, 1)
  assert.equal(echo.data.toString(), 'hi from e2b')
  up.sock.destroy()

  const denied = await handshake(host, null)
  assert.equal(denied.status, 401)
  denied.sock.destroy()
  const r = await fetch(`${API}/api/v1/sandboxes/${sbx.sandboxId}/ports/public`, {
    method: 'POST', headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ public: true }),
  })
  assert.equal(r.status, 200)
  const open = await handshake(host, null)
  assert.equal(open.status, 101)
  open.sock.destroy()
})

// A web server in a sandbox, answered through `http://${getHost(port)}`.
async function webServer(s, port) {
  await s.commands.run(`mkdir -p /tmp/www && echo hi > /tmp/www/hello.txt`)
  await s.commands.run(`cd /tmp/www && python3 -m http.server ${port} --bind 127.0.0.1`, { background: true })
}

async function get(url, headers = {}) {
  const r = await fetch(url, { headers })
  return { status: r.status, text: await r.text() }
}

test('http://getHost(port) resolves and works as is; E2B sandboxes are public by default', async () => {
  const s = await Sandbox.create()
  try {
    await webServer(s, 8000)
    const url = `http://${s.getHost(8000)}/hello.txt`
    // the name goes through this machine's resolver (node's dns.lookup = getaddrinfo)
    const { lookup } = await import('node:dns/promises')
    const a = await lookup(`8000-${s.sandboxId}.localhost`, { family: 4 })
    assert.equal(a.address, '127.0.0.1')
    const r = await until(async () => { const x = await get(url); return x.status === 200 ? x : null }, 30000, 200)
    assert.ok(r, 'the web server answers through getHost within 30 s')
    assert.equal(r.text, 'hi\n')
    const info = await Sandbox.getInfo(s.sandboxId)
    assert.equal(info.network.allowPublicTraffic, true)
    assert.equal(info.sandboxDomain, `localhost:${new URL(API).port}`)
  } finally { await s.kill() }
})

test('allowPublicTraffic: false needs the trafficAccessToken', async () => {
  const s = await Sandbox.create({ network: { allowPublicTraffic: false } })
  try {
    await webServer(s, 8000)
    const url = `http://${s.getHost(8000)}/hello.txt`
    const ok = await until(async () => {
      const x = await get(url, { 'e2b-traffic-access-token': s.trafficAccessToken })
      return x.status === 200 ? x : null
    }, 30000, 200)
    assert.ok(ok, 'answers with the token')
    assert.equal((await get(url)).status, 401)
    assert.equal((await get(url, { 'e2b-traffic-access-token': '0'.repeat(64) })).status, 401)
    assert.equal((await get(url, { 'X-Access-Token': s.envdAccessToken ?? 'x' })).status, 401)
    assert.equal((await Sandbox.getInfo(s.sandboxId)).network.allowPublicTraffic, false)
  } finally { await s.kill() }
})

test('autoResume: a request to a paused sandbox\'s port resumes it; without it, E2B\'s 502', async () => {
  const s = await Sandbox.create({ lifecycle: { onTimeout: 'pause', autoResume: true } })
  const plain = await Sandbox.create()
  try {
    for (const x of [s, plain]) await webServer(x, 8000)
    const urlOf = (x) => `http://${x.getHost(8000)}/hello.txt`
    for (const x of [s, plain]) {
      assert.ok(await until(async () => (await get(urlOf(x))).status === 200, 30000, 200), 'web server up')
    }
    assert.equal((await Sandbox.getInfo(s.sandboxId)).lifecycle.autoResume, true)
    await s.pause()
    await plain.pause()
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'paused')
    const r = await get(urlOf(s))
    assert.deepEqual([r.status, r.text], [200, 'hi\n'])
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'running')
    assert.equal(await s.isRunning(), true)
    const p = await get(urlOf(plain))
    assert.equal(p.status, 502)
    const body = JSON.parse(p.text)
    assert.equal(body.sandboxId, plain.sandboxId)
    assert.match(body.message, /paused/)
    assert.equal((await Sandbox.getInfo(plain.sandboxId)).state, 'paused')
  } finally { await Promise.allSettled([s.kill(), plain.kill()]) }
})
