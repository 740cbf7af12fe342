// What E2B's default template promises and code written for it uses:
// `python` on the PATH (python3), for the default user and for root.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

let sbx
before(async () => { sbx = await Sandbox.create() })
after(async () => { await sbx?.kill() })

test('python runs python3, as user and as root', async () => {
  for (const user of ['user', 'root']) {
    const r = await sbx.commands.run('python -c "import sys; print(sys.version_info[0])"', { user })
    assert.equal(r.stdout.trim(), '3', user)
  }
  const which = await sbx.commands.run('command -v python')
  assert.equal(which.stdout.trim(), '/opt/paddock/bin/python')
  // a python the sandbox installs itself comes first
  await sbx.commands.run('printf "#!/bin/sh\\necho mine\\n" > /usr/local/bin/python && chmod +x /usr/local/bin/python', { user: 'root' })
  assert.equal((await sbx.commands.run('python')).stdout.trim(), 'mine')
})
