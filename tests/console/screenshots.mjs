// Screenshots of the console's main pages for the docs (scripts/screenshots.sh):
// the same browser and driver as console.test.mjs. Writes PNGs into PD_OUT.
import puppeteer from 'puppeteer-core';

const BASE = process.env.PD_URL;
const KEY = process.env.PD_KEY;
const OUT = process.env.PD_OUT;
const WAIT = { timeout: 60000 };

const browser = await puppeteer.launch({
  executablePath: process.env.PD_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  userDataDir: process.env.PD_PROFILE,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
try {
  for (const [name, vp, scheme] of [['desktop', { width: 1280, height: 800 }, 'light'],
    ['desktop-dark', { width: 1280, height: 800 }, 'dark'], ['phone', { width: 390, height: 844, isMobile: true }, 'light']]) {
    const page = await browser.newPage();
    await page.setViewport(vp);
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: scheme }]);
    await page.goto(BASE + '/', { waitUntil: 'load' });
    await page.waitForSelector('#signin:not([hidden])', WAIT);
    await page.screenshot({ path: `${OUT}/signin-${name}.png` });
    await page.type('#key', KEY);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#sandboxes[data-loaded]', WAIT);
    await page.waitForFunction(() => document.querySelectorAll('#sandboxes tbody tr').length >= 3 &&
      document.querySelector('#sandboxes tbody').textContent.includes('MiB'), WAIT);
    await page.screenshot({ path: `${OUT}/list-${name}.png`, fullPage: true });
    const sid = await page.$eval('#sandboxes tbody tr', (e) => e.dataset.id);
    await page.goto(`${BASE}/#/sb/${sid}`, { waitUntil: 'load' });
    await page.waitForSelector('#sb-info[data-state="running"]', WAIT);
    await page.type('#cmd', 'uname -a; python3 -c "print(sum(range(10**6)))"; ls -la /home/user');
    await page.click('#run');
    await page.waitForFunction(() => document.querySelector('#output').dataset.exit === '0', WAIT);
    await page.waitForFunction(() => document.querySelectorAll('#charts polyline').length === 3, WAIT);
    await page.screenshot({ path: `${OUT}/sandbox-${name}.png`, fullPage: true });
    await page.click('#terminal');
    await page.waitForSelector('#xterm[data-connected="1"]', WAIT);
    await page.click('#xterm');
    await page.keyboard.type('ls --color=always /usr/lib/python3* | head -20; echo "hello from paddock"\n');
    await page.waitForFunction(() => {
      const b = window.pdTerm.buffer.active;
      for (let i = 0; i < b.length; i++) if (b.getLine(i).translateToString(true).startsWith('hello from paddock')) return true;
      return false;
    }, WAIT);
    await page.screenshot({ path: `${OUT}/terminal-${name}.png` });
    await page.keyboard.type('exit\n');
    await page.goto(BASE + '/#/', { waitUntil: 'load' });
    await page.waitForSelector('#signout:not([hidden])', WAIT);
    await page.click('#signout');
    await page.waitForSelector('#signin:not([hidden])', WAIT);
    await page.close();
  }
} finally {
  await browser.close();
}
