// E2B SDK v2's Template.build() against paddock (docs/e2b.md "Templates"),
// then a sandbox from the template. Not a *.test.mjs of run.sh: it needs an
// image in a registry the server allows, which tests/templates has (its
// loopback registry); tests/templates/test_e2b_sdk.py runs it with
// E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, PD_TPL_IMAGE, PD_TPL_CONTEXT.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, Template } from 'e2b'

const IMAGE = process.env.PD_TPL_IMAGE
const CONTEXT = process.env.PD_TPL_CONTEXT
assert.ok(IMAGE && CONTEXT && process.env.E2B_API_URL, 'run through tests/templates/test_e2b_sdk.py')

test('Template.build from a registry image, then a sandbox from it', async () => {
  const logs = []
  const t = Template({ fileContextPath: CONTEXT })
    .fromImage(IMAGE)
    .copy('hello.txt', '/app/hello.txt')
    .setEnvs({ GREETING: 'hi from the sdk' })
    // the SDK's commands.run is `/bin/bash -l -c`: busybox's sh stands in
    .runCmd(['echo built-by-sdk > /built', "echo '#!/bin/sh' > /bin/bash",
      `echo 'exec /bin/sh "$@"' >> /bin/bash`, 'chmod 755 /bin/bash'])
    .setWorkdir('/app')
  const info = await Template.build(t, 'sdkbuilt', { onBuildLogs: (l) => logs.push(l.message) })
  assert.equal(info.templateId, 'sdkbuilt')
  assert.ok(logs.some((m) => m.includes('Uploaded')), logs.join('\n'))
  assert.equal(await Template.exists('sdkbuilt'), true)
  assert.equal(await Template.exists('sdk-no-such'), false)
  const sbx = await Sandbox.create('sdkbuilt', { timeoutMs: 60000 })
  try {
    const r = await sbx.commands.run('cat /app/hello.txt /built; echo "$GREETING"; pwd').catch((e) => {
      throw new Error(`exit ${e.exitCode}: ${e.stdout} | ${e.stderr}`)
    })
    assert.equal(r.stdout, 'hello from the context\nbuilt-by-sdk\nhi from the sdk\n/app\n')
  } finally {
    await sbx.kill()
  }
})
