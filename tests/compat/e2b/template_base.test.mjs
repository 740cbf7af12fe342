// E2B SDK v2's Template on E2B's default base (fromBaseImage: paddock's
// `base`, the host's /usr) with runCmd, copy and setStartCmd: the build runs
// in a sandbox of base that is then snapshotted, and each Sandbox.create
// starts the start command and waits for its ready command (docs/e2b.md
// "Templates"). No registry needed.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Sandbox, Template, waitForPort, waitForFile } from 'e2b'

let ctx
const made = []
before(() => {
  ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'pd-e2b-base-'))
  fs.writeFileSync(path.join(ctx, 'hello.txt'), 'hello from the context\n')
  fs.mkdirSync(path.join(ctx, 'folder'))
  fs.writeFileSync(path.join(ctx, 'folder', 'a.txt'), 'a\n')
  fs.writeFileSync(path.join(ctx, 'folder', 'b.txt'), 'b\n')
})
after(async () => {
  fs.rmSync(ctx, { recursive: true, force: true })
  for (const s of made) await s.kill().catch(() => {})
})

async function count () {
  return (await Sandbox.list().nextItems()).length
}

test('fromBaseImage + runCmd + copy + setStartCmd(waitForPort): a sandbox has it running and ready', async () => {
  const t = Template({ fileContextPath: ctx })
    .fromBaseImage()
    .copy('hello.txt', '/srv/hello.txt')
    .copy('folder/*', '/srv/folder')
    .runCmd('echo built-on-base > /opt/built.txt')
    .setEnvs({ GREETING: 'hi' })
    .setStartCmd('python3 -m http.server 8321 --bind 127.0.0.1', waitForPort(8321))
  const logs = []
  await Template.build(t, 'e2bbase-port', { onBuildLogs: (l) => logs.push(l.message) })
  const sbx = await Sandbox.create('e2bbase-port', { timeoutMs: 120000 })
  made.push(sbx)
  // no wait: the create answered once the port listened
  const r = await sbx.commands.run(
    'cat /opt/built.txt /srv/hello.txt /srv/folder/a.txt /srv/folder/b.txt; echo "$GREETING"; ls /usr/bin/python3; ' +
    'python3 -c "import urllib.request as u; print(u.urlopen(\'http://127.0.0.1:8321/\').status)"')
  assert.equal(r.stdout, 'built-on-base\nhello from the context\na\nb\nhi\n/usr/bin/python3\n200\n')
  // the start command is one of the sandbox's processes, as the template's user
  const ps = await sbx.commands.run('ps -o user=,args= -C python3')
  assert.match(ps.stdout, /^user +python3 -m http.server 8321/m)
})

test('fromTemplate("base") + setStartCmd(waitForFile)', async () => {
  const t = Template().fromTemplate('base')
    .setStartCmd('sleep 0.2; touch /tmp/ready-now; exec sleep 3600', waitForFile('/tmp/ready-now'))
  await Template.build(t, 'e2bbase-file')
  const sbx = await Sandbox.create('e2bbase-file', { timeoutMs: 120000 })
  made.push(sbx)
  assert.equal(await sbx.files.exists('/tmp/ready-now'), true)
})

test('a start command that fails fails the build with its output', async () => {
  const t = Template().fromBaseImage()
    .setStartCmd('echo cannot-start-here >&2; exit 3', waitForFile('/tmp/never'))
  await assert.rejects(Template.build(t, 'e2bbase-bad'), (e) => {
    assert.match(String(e.message), /start command/)
    assert.match(String(e.message), /cannot-start-here/)
    return true
  })
})

test('a start command that fails at create: a clear error, no sandbox left', async () => {
  // ready at build (no MODE there), refused at a create that sets MODE=bad
  const t = Template().fromBaseImage()
    .setStartCmd('[ "$MODE" != bad ] || { echo refusing-mode-bad >&2; exit 4; }; touch /tmp/ok; exec sleep 3600',
      waitForFile('/tmp/ok'))
  await Template.build(t, 'e2bbase-mode')
  const n = await count()
  await assert.rejects(Sandbox.create('e2bbase-mode', { envs: { MODE: 'bad' }, timeoutMs: 60000 }), (e) => {
    assert.match(String(e.message), /refusing-mode-bad/)
    // the template's fault, not the server's: a 4xx (E2B's spec: 400)
    assert.equal(e.statusCode, 400, String(e.message))
    return true
  })
  assert.equal(await count(), n)
})
