// E2B SDK v2's Template.build() against paddock (docs/e2b.md "Templates"),
// then a sandbox from the template, and its tags (Template.assignTags and co.). Not a *.test.mjs of run.sh: it needs an
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

test('Template.assignTags / getTags / removeTags, then Sandbox.create(NAME:TAG)', async () => {
  // the template the test above built: Template.build without a tag gives it `default`
  const before = await Template.getTags('sdkbuilt')
  assert.deepEqual(before.map((t) => t.tag), ['default'])
  const buildId = before[0].buildId
  assert.ok(before[0].createdAt instanceof Date && !isNaN(before[0].createdAt), before[0].createdAt)
  const info = await Template.assignTags('sdkbuilt:default', ['prod', 'sdkbuilt:stable'])
  assert.equal(info.buildId, buildId)
  assert.deepEqual(info.tags, ['prod', 'stable'])
  assert.deepEqual((await Template.assignTags('sdkbuilt:prod', 'canary')).tags, ['canary'])
  const tags = await Template.getTags('sdkbuilt')
  assert.deepEqual(tags.map((t) => t.tag).sort(), ['canary', 'default', 'prod', 'stable'])
  assert.ok(tags.every((t) => t.buildId === buildId))
  const sbx = await Sandbox.create('sdkbuilt:prod', { timeoutMs: 60000 })
  try {
    assert.equal((await sbx.commands.run('cat /built')).stdout, 'built-by-sdk\n')
  } finally {
    await sbx.kill()
  }
  // E2B's tags.test.ts: a tag without its alias or without its tag is refused
  await assert.rejects(Template.assignTags('sdkbuilt:default', ':invalid-tag'))
  await assert.rejects(Template.assignTags('sdkbuilt:default', 'sdkbuilt:'))
  await Template.removeTags('sdkbuilt', ['prod', 'canary'])
  assert.deepEqual((await Template.getTags('sdkbuilt')).map((t) => t.tag).sort(), ['default', 'stable'])
  await assert.rejects(Sandbox.create('sdkbuilt:prod', { timeoutMs: 60000 }))
  await assert.rejects(Template.getTags('sdk-no-such'))
  await assert.rejects(Template.removeTags('sdk-no-such', 'x'))
})
