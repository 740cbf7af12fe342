// The console's pause choice on a tier that pauses to disk (gvisor here):
// "Pause to disk" releases the memory (the API says paused_to: disk) and
// "Resume" brings back the same sandbox, its files and its processes;
// "Pause in memory" keeps it resident. A container sandbox offers one
// "Pause" (its tier pauses in memory only). Run by test_console_browser.py
// (test_console_pause_choice), which starts the server and cleans up.
//
//   PD_URL=... PD_KEY=... PD_PROFILE=DIR PD_DISK_TIER=gvisor node pause_disk.test.mjs
import assert from 'node:assert/strict';
import puppeteer from 'puppeteer-core';

const BASE = process.env.PD_URL;
const KEY = process.env.PD_KEY;
const TIER = process.env.PD_DISK_TIER;
const WAIT = { timeout: 120000 };

let n = 0;
async function step(name, fn) {
  n++;
  try {
    await fn();
  } catch (e) {
    console.log(`not ok ${n} - ${name}: ${e.message}`);
    throw e;
  }
  console.log(`ok ${n} - ${name}`);
}

async function api(method, path, body) {
  const r = await fetch(BASE + '/api/v1' + path, {
    method,
    headers: { Authorization: 'Bearer ' + KEY, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: r.status === 204 ? null : await r.json() };
}

const browser = await puppeteer.launch({
  executablePath: process.env.PD_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  userDataDir: process.env.PD_PROFILE,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
const made = [];
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  page.on('dialog', (d) => d.accept());

  await step('sign in', async () => {
    await page.goto(BASE + '/', { waitUntil: 'load' });
    await page.waitForSelector('#signin:not([hidden]) #key', WAIT);
    await page.type('#key', KEY);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#list:not([hidden])', WAIT);
  });

  const open = async (id) => {
    await page.goto(BASE + '/#/sb/' + id, { waitUntil: 'load' });
    await page.waitForSelector('#sb-info[data-state="running"]', WAIT);
  };

  await step('a container sandbox offers one Pause (its tier keeps memory)', async () => {
    const c = await api('POST', '/sandboxes', { isolation: 'container', timeout: 600 });
    assert.equal(c.status, 201, JSON.stringify(c.body));
    made.push(c.body.id);
    await open(c.body.id);
    const acts = await page.$$eval('#sb-actions button', (bs) => bs.map((b) => b.dataset.act));
    assert.deepEqual(acts, ['pause', 'kill']);
  });

  let sid;
  await step(`a ${TIER} sandbox: Pause to disk, then Resume; its files and processes are back`, async () => {
    const c = await api('POST', '/sandboxes', { isolation: TIER, timeout: 600 });
    assert.equal(c.status, 201, JSON.stringify(c.body));
    sid = c.body.id;
    made.push(sid);
    const w = await api('POST', `/sandboxes/${sid}/exec`, { cmd: ['sh', '-c', 'echo kept > /tmp/f'] });
    assert.equal(w.body.exit_code, 0, JSON.stringify(w.body));
    const bg = await api('POST', `/sandboxes/${sid}/processes`, { cmd: ['sleep', '100000'] });
    assert.equal(bg.status, 201, JSON.stringify(bg.body));
    await open(sid);
    const acts = await page.$$eval('#sb-actions button', (bs) => bs.map((b) => b.dataset.act));
    assert.deepEqual(acts, ['pause-disk', 'pause-memory', 'kill']);
    await page.click('#sb-actions button[data-act=pause-disk]');
    await page.waitForSelector('#sb-info[data-state="paused"][data-paused-to="disk"]', WAIT);
    const g = await api('GET', '/sandboxes/' + sid);
    assert.equal(g.body.paused_to, 'disk', JSON.stringify(g.body));
    assert.match(await page.$eval('#sb-info', (e) => e.textContent), /paused \(to disk\)/);
    await page.click('#sb-actions button[data-act=resume]');
    await page.waitForSelector('#sb-info[data-state="running"]', WAIT);
    const r = await api('POST', `/sandboxes/${sid}/exec`, { cmd: ['cat', '/tmp/f'] });
    assert.equal(r.body.stdout, 'kept\n', JSON.stringify(r.body));
    const ps = await api('GET', `/sandboxes/${sid}/processes`);
    assert.ok(ps.body.processes.some((p) => p.pid === bg.body.pid && p.state === 'running'), JSON.stringify(ps.body));
  });

  await step(`Pause in memory on the same ${TIER} sandbox keeps it resident`, async () => {
    await page.waitForSelector('#sb-actions button[data-act=pause-memory]', WAIT);
    await page.click('#sb-actions button[data-act=pause-memory]');
    await page.waitForSelector('#sb-info[data-state="paused"][data-paused-to="memory"]', WAIT);
    const g = await api('GET', '/sandboxes/' + sid);
    assert.equal(g.body.paused_to, 'memory', JSON.stringify(g.body));
    await page.click('#sb-actions button[data-act=resume]');
    await page.waitForSelector('#sb-info[data-state="running"]', WAIT);
  });
} finally {
  for (const id of made) await api('DELETE', '/sandboxes/' + id).catch(() => {});
  await browser.close();
}
console.log(`1..${n}`);
