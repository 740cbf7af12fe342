// Sandbox ports through the E2B SDK: the host of sandbox.getHost(port)
// reaches a WebSocket service inside the sandbox (tests/server/
// ws_echo_server.py), sent as the Host header to the server's address, with
// the sandbox's port token and, once the ports are public, without it.
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
  sbx = await Sandbox.create()
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
               (token ? `X-Paddock-Port-Token: ${token}\r\n` : '') + '\r\n')
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

test('getHost(port) reaches a WebSocket service, with the port token or public ports', async () => {
  const host = sbx.getHost(PORT)
  assert.equal(host, `${PORT}-${sbx.sandboxId}.localhost`)
  const info = await (await fetch(`${API}/api/v1/sandboxes/${sbx.sandboxId}/ports`,
    { headers: { Authorization: `Bearer ${KEY}` } })).json()
  const token = info.port_token
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
