// The paddock console (docs/console.md): plain JS over the native API.
// Auth is the HttpOnly session cookie the sign-in sets; every call carries
// X-Paddock-Console, which the server requires of cookie requests that
// change something (CSRF). User data goes into the page only as text.
'use strict';

const $ = (sel) => document.querySelector(sel);
const API = '/api/v1';

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : String(k));
  return e;
}

class ApiError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

async function api(method, path, body) {
  const opts = { method, credentials: 'same-origin', headers: { 'X-Paddock-Console': '1' } };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path.startsWith('/') ? path : API + '/' + path, opts);
  if (r.status === 401 && path !== '/api/v1/console/session') {
    showSignin('Your session ended: sign in again.');
    throw new ApiError(401, 'signed out');
  }
  if (!r.ok) {
    let msg = r.status + ' ' + r.statusText;
    try { msg = (await r.json()).error.message; } catch (e) { /* not JSON */ }
    throw new ApiError(r.status, msg);
  }
  if (r.status === 204) return null;
  return r.json();
}

// ---- views ----

const views = ['signin', 'list', 'sandbox', 'term'];
let timer = null;
let stopView = () => {};

function show(name) {
  for (const v of views) $('#' + v).hidden = v !== name;
}

function leave() {
  clearInterval(timer);
  timer = null;
  stopView();
  stopView = () => {};
}

function showSignin(msg) {
  leave();
  $('#who').hidden = $('#signout').hidden = true;
  $('#signin-error').textContent = msg || '';
  show('signin');
  $('#key').focus();
}

async function start() {
  try {
    const me = await api('GET', '/api/v1/console/session');
    $('#who').textContent = 'key ' + (me.name || me.key_id);
    $('#who').hidden = $('#signout').hidden = false;
    route();
  } catch (e) {
    if (e.status !== 401) showSignin(e.message);
    else showSignin();
  }
}

$('#signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const key = $('#key').value;
  $('#key').value = '';
  try {
    await api('POST', '/api/v1/console/session', { key });
    start();
  } catch (e) {
    $('#signin-error').textContent = e.status === 401 ? 'Wrong API key.' : e.message;
  }
});

$('#signout').addEventListener('click', async () => {
  try { await api('DELETE', '/api/v1/console/session'); } catch (e) { /* gone already */ }
  location.hash = '#/';
  showSignin('Signed out.');
});

function route() {
  leave();
  const m = location.hash.match(/^#\/sb\/([a-z0-9]+)(?:\/term\/(\d+))?$/);
  if (m && m[2]) return termView(m[1], +m[2]);
  if (m) return sandboxView(m[1]);
  return listView();
}
window.addEventListener('hashchange', () => { if ($('#signin').hidden) route(); });

// ---- formatting ----

function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  return dur(s);
}
function dur(s) {
  if (s < 60) return Math.floor(s) + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + Math.floor(s % 60) + 's';
  return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
}
function ttlLeft(sb) {
  if (sb.state === 'paused' && sb.timeout_remaining_ms != null) return dur(sb.timeout_remaining_ms / 1000) + ' (paused)';
  if (!sb.expires_at) return '-';
  return dur(Math.max(0, (Date.parse(sb.expires_at) - Date.now()) / 1000));
}
function mib(b) { return (b / 1048576).toFixed(b < 10485760 ? 1 : 0) + ' MiB'; }
function bar(used, limit, text) {
  const pct = limit ? Math.min(100, (100 * used) / limit) : 0;
  const b = el('span', { class: 'bar', title: pct.toFixed(0) + '%' }, el('span'));
  b.firstChild.style.width = pct + '%';
  return el('span', {}, b, text);
}

// ---- the list ----

async function loadTemplates() {
  const sel = $('#c-template');
  if (sel.options.length) return;
  try {
    const t = await api('GET', 'templates');
    for (const x of t.templates) sel.append(el('option', { value: x.name }, x.name));
    const snaps = await api('GET', 'snapshots').catch(() => ({ snapshots: [] }));
    for (const x of snaps.snapshots) sel.append(el('option', { value: x.name }, x.name + ' (snapshot)'));
    $('#templates').replaceChildren(...t.templates.map((x) => el('li', { 'data-template': x.name },
      el('code', {}, x.name), x.builtin ? ' (built in)' : x.shared ? ' (shared)' : '',
      x.status && x.status !== 'ready' ? ' - ' + x.status : '', x.created_at ? ' - ' + x.created_at : '',
      ' ', el('button', { type: 'button', 'data-act': 'inspect', onclick: () => inspectTemplate(x.name) }, 'inspect'),
      x.builtin ? '' : ' ', x.builtin ? '' : el('button', { type: 'button', 'data-act': 'log', onclick: () => followLog(x.name) }, 'log'))),
      ...snaps.snapshots.map((x) => el('li', { 'data-snapshot': x.name }, el('code', {}, x.name),
        ' snapshot of ' + x.source + ' (' + x.isolation + ')')));
  } catch (e) {
    sel.append(el('option', { value: 'base' }, 'base'));
  }
}

// ---- templates: inspect one (GET /api/v1/templates/{name}) ----

const size = (b) => b == null ? '-' : b < 1 << 20 ? (b / 1024).toFixed(1) + ' KiB' : mib(b);

async function inspectTemplate(name) {
  const box = $('#tpl-inspect');
  let t;
  try {
    t = await api('GET', 'templates/' + encodeURIComponent(name));
  } catch (e) {
    $('#tpl-error').textContent = 'inspect: ' + e.message;
    return;
  }
  const cfg = t.config || {};
  const rows = [
    ['kind', t.builtin ? "built in (the host's /usr)" : t.kind || '-'],
    ['shared', t.shared ? 'yes (visible to every key)' : "no (this key's)"],
    ['status', t.status + (t.error ? ' - ' + t.error : '')],
    ['source', t.source || t.image || '-'],
    ['created', t.created ? new Date(t.created * 1000).toISOString() : t.created_at || '-'],
    ['layers', t.layers == null ? '-' : String(t.layers)],
    ['size', t.bytes_total == null ? '-' : size(t.bytes_total) + ' (own ' + size(t.bytes_own) + ', shared ' +
      size(t.bytes_shared) + ')'],
    ['env', (cfg.Env || []).join('\n') || '-'],
    ['working dir', cfg.WorkingDir || '-'],
    ['user', cfg.User || (t.run ? t.run.name + ' (' + t.run.uid + ', the default user story)' : '-')],
    ['command', [...(cfg.Entrypoint || []), ...(cfg.Cmd || [])].join(' ') || '-'],
    ['used by', t.used_by == null ? '-' : t.used_by + ' sandbox(es) or snapshot(s)'],
  ];
  $('#tpl-inspect-name').textContent = name;
  $('#tpl-inspect-info').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  box.dataset.template = name;
  box.hidden = false;
}

// ---- streamed answers: read, and resume after a drop ----

// GET urlOf() again after a dropped stream, up to `tries` times: urlOf
// builds the URL from what the caller kept of the bytes already shown (its
// offsets), so a resume loses nothing. read(reader) takes the body; it
// returns true when the stream is over for good. giveUp(e) on an error:
// true ends the loop. Returns true if read finished, false otherwise.
async function followResuming(urlOf, read, { tries, delayMs = 0, signal, giveUp = () => false, alive = () => true }) {
  for (let i = 0; alive() && i < tries; i++) {
    try {
      const r = await fetch(urlOf(), { credentials: 'same-origin', headers: { 'X-Paddock-Console': '1' }, signal });
      if (!r.ok) throw new ApiError(r.status, r.status + ' ' + r.statusText);
      if (await read(r.body.getReader())) return true;
    } catch (e) {
      if (e.name === 'AbortError' || !alive() || giveUp(e)) return false;
    }
    if (delayMs) await new Promise((res) => setTimeout(res, delayMs));
  }
  return false;
}

// JSON lines of a streamed answer, one onLine(parsed) each (lines that do
// not parse are skipped); onLine returning true stops the reading. Returns
// true if it did, false at the stream's end.
async function readJsonLines(reader, onLine) {
  const td = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buf += td.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line) continue;
      let v;
      try { v = JSON.parse(line); } catch (e) { continue; }
      if (onLine(v)) return true;
    }
  }
}

// ---- templates: pull or build one, its build log streamed ----

// Follow a template's build log to the build's end (the same route the CLI
// and SDKs read): a dropped stream resumes from the bytes already shown.
async function followLog(name) {
  const pre = $('#tpl-log');
  const status = $('#tpl-status');
  const path = API + '/templates/' + encodeURIComponent(name);
  pre.hidden = false;
  pre.textContent = '';
  status.textContent = name + ': building';
  delete status.dataset.status;
  let got = 0;
  const dec = new TextDecoder();
  let failed = null;
  await followResuming(() => path + '/log?follow=1&offset=' + got, async (rd) => {
    for (;;) {
      const { value, done } = await rd.read();
      if (done) return true;
      got += value.length;
      pre.textContent += dec.decode(value, { stream: true });
      pre.scrollTop = pre.scrollHeight;
    }
  }, { tries: 5, giveUp: (e) => { if (e.status && e.status !== 416) failed = e; return !!failed; } });
  if (failed) { status.textContent = name + ': log: ' + failed.status; return; }
  try {
    const t = await api('GET', 'templates/' + encodeURIComponent(name));
    status.textContent = name + ': ' + t.status + (t.error ? ' - ' + t.error : '');
    status.dataset.status = t.status;
  } catch (e) {
    status.textContent = name + ': ' + e.message;
  }
  $('#c-template').replaceChildren();
  loadTemplates();
}

$('#t-kind').addEventListener('change', () => {
  $('#t-source').placeholder = $('#t-kind').value === 'image' ? 'registry.example.com/python:3.12'
    : 'FROM registry.example.com/python:3.12\nRUN pip install pandas';
});

// ---- a build context: the files picked, packed as a ustar in the page ----

const RECIPE_ENTRY = '.paddock-recipe';   // the recipe's text, in the context

// The picked files as [path in the context, File]: a folder's files lose
// the folder's own name (the folder is the context's root).
function contextFiles() {
  const out = [];
  for (const f of $('#t-dir').files) out.push([f.webkitRelativePath.split('/').slice(1).join('/'), f]);
  for (const f of $('#t-files').files) out.push([f.name, f]);
  return out;
}

// One 512-byte ustar header (POSIX.1-1988): a name over 100 bytes goes
// into the 155-byte prefix, split at a '/'.
function tarHeader(path, size) {
  const enc = new TextEncoder();
  const h = new Uint8Array(512);
  const put = (off, len, text) => h.set(enc.encode(text).subarray(0, len), off);
  const octal = (off, len, n) => put(off, len, n.toString(8).padStart(len - 1, '0') + '\0');
  let name = enc.encode(path), prefix = new Uint8Array(0);
  if (name.length > 100) {
    const cut = path.lastIndexOf('/', path.length - 1);
    prefix = enc.encode(path.slice(0, cut));
    name = enc.encode(path.slice(cut + 1));
    if (cut < 0 || name.length > 100 || prefix.length > 155) throw new Error('path too long for the context: ' + path);
  }
  h.set(name, 0);
  octal(100, 8, 0o644);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, Math.floor(Date.now() / 1000));
  h.fill(32, 148, 156);            // the checksum counts itself as spaces
  put(156, 1, '0');
  put(257, 6, 'ustar\0');
  put(263, 2, '00');
  h.set(prefix, 345);
  let sum = 0;
  for (const b of h) sum += b;
  octal(148, 7, sum);
  return h;
}

// The context as a tar Blob: the recipe's text, then each file (its bytes
// are the File itself: nothing is read into the page's memory).
function contextTar(recipe, files) {
  const parts = [];
  const add = (path, data, size) => {
    parts.push(tarHeader(path, size), data);
    if (size % 512) parts.push(new Uint8Array(512 - (size % 512)));
  };
  const text = new TextEncoder().encode(recipe);
  add(RECIPE_ENTRY, text, text.length);
  for (const [path, f] of files) {
    if (!path || path.split('/').some((c) => c === '..' || c === '')) throw new Error('bad file name: ' + path);
    add(path, f, f.size);
  }
  parts.push(new Uint8Array(1024));  // two zero blocks end it
  return new Blob(parts, { type: 'application/x-tar' });
}

async function buildWithContext(name, recipe, net) {
  const q = new URLSearchParams({ recipe: RECIPE_ENTRY });
  if (net !== 'none') q.set('network', net);
  const r = await fetch(API + '/templates/' + encodeURIComponent(name) + '/build?' + q, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'X-Paddock-Console': '1', 'Content-Type': 'application/x-tar' },
    body: contextTar(recipe, contextFiles()),
  });
  if (!r.ok) {
    let msg = r.status + ' ' + r.statusText;
    try { msg = (await r.json()).error.message; } catch (e) { /* not JSON */ }
    throw new ApiError(r.status, msg);
  }
}

$('#tpl-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const name = $('#t-name').value.trim();
  const src = $('#t-source').value;
  const net = $('#t-net').value;
  const image = $('#t-kind').value === 'image';
  const body = image ? { name, image: src.trim() } : { name, recipe: src };
  if (!image && net !== 'none') body.network = { mode: net };
  $('#tpl-error').textContent = '';
  try {
    if (!image && contextFiles().length) await buildWithContext(name, src, net);
    else await api('POST', 'templates', body);
  } catch (e) {
    $('#tpl-error').textContent = 'build: ' + e.message;
    return;
  }
  await followLog(name);
});

async function sandboxAction(id, what) {
  $('#list-error').textContent = '';
  try {
    if (what === 'kill') await api('DELETE', 'sandboxes/' + id);
    // pause: the tier's default; pause-disk / pause-memory: that kind
    else if (what.startsWith('pause')) {
      const mode = { 'pause-disk': 'disk', 'pause-memory': 'memory' }[what];
      await api('POST', 'sandboxes/' + id + '/pause', mode ? { mode } : {});
    } else await api('POST', 'sandboxes/' + id + '/' + what, undefined);
  } catch (e) {
    const err = $('#sandbox').hidden ? $('#list-error') : $('#sb-error');
    err.textContent = what + ': ' + e.message;
  }
}

function actionButtons(sb, after) {
  const act = (what) => async () => { await sandboxAction(sb.id, what); after(); };
  const out = [];
  // a tier that pauses to disk (microvm, gvisor) can also keep the memory
  // resident (a quicker resume): both, said plainly; others pause in memory
  if (sb.state === 'running' && sb.pause_mode === 'disk') {
    out.push(el('button', { type: 'button', 'data-act': 'pause-disk', title: 'memory saved to disk and released',
      onclick: act('pause-disk') }, 'Pause to disk'));
    out.push(el('button', { type: 'button', 'data-act': 'pause-memory', title: 'memory kept resident',
      onclick: act('pause-memory') }, 'Pause in memory'));
  } else if (sb.state === 'running') {
    out.push(el('button', { type: 'button', 'data-act': 'pause', onclick: act('pause') }, 'Pause'));
  }
  if (sb.state === 'paused') out.push(el('button', { type: 'button', 'data-act': 'resume', onclick: act('resume') }, 'Resume'));
  out.push(el('button', { type: 'button', 'data-act': 'kill', onclick: async () => {
    if (confirm('Kill sandbox ' + sb.id + '?')) await act('kill')();
  } }, 'Kill'));
  return out;
}

async function refreshList() {
  const seq = ++listSeq;
  let list;
  try {
    const state = $('#f-state').value;
    list = await api('GET', 'sandboxes?limit=1000' + (state ? '&state=' + state : ''));
  } catch (e) {
    if (e.status !== 401) $('#list-error').textContent = e.message;
    return;
  }
  const metrics = await Promise.all(list.sandboxes.map((sb) =>
    sb.state === 'failed' ? null : api('GET', 'sandboxes/' + sb.id + '/metrics').catch(() => null)));
  if (seq !== listSeq) return;
  // Rows are updated in place and rebuilt only when their state changes:
  // a button under the pointer or the keyboard focus stays where it is.
  const body = $('#sandboxes tbody');
  const old = new Map([...body.children].map((tr) => [tr.dataset.id, tr]));
  const rows = list.sandboxes.map((sb, i) => {
    const m = metrics[i];
    const live = [
      el('td', {}, ago(sb.created_at)),
      el('td', {}, ttlLeft(sb)),
      el('td', {}, m ? bar(m.memory_bytes, m.memory_limit_bytes, mib(m.memory_bytes) + ' / ' + mib(m.memory_limit_bytes)) : '-'),
      el('td', {}, m ? bar(m.pids, m.pids_limit, m.pids + ' / ' + m.pids_limit) : '-'),
    ];
    let tr = old.get(sb.id);
    if (tr && tr.dataset.state === sb.state) {
      for (let k = 0; k < live.length; k++) tr.children[4 + k].replaceWith(live[k]);
      return tr;
    }
    return el('tr', { 'data-id': sb.id, 'data-state': sb.state },
      el('td', {}, el('a', { href: '#/sb/' + sb.id }, el('code', {}, sb.id))),
      el('td', { class: 'state-' + sb.state }, sb.state),
      el('td', {}, sb.isolation),
      el('td', {}, sb.template),
      ...live,
      el('td', { class: 'actions' }, ...actionButtons(sb, refreshList)));
  });
  for (const [id, tr] of old) if (!rows.includes(tr)) tr.remove();
  rows.forEach((tr, i) => { if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] || null); });
  applyTextFilter();
  $('#list-empty').hidden = list.sandboxes.length > 0;
  $('#sandboxes').dataset.loaded = '1';
}

function applyTextFilter() {
  const t = $('#f-text').value.trim().toLowerCase();
  for (const tr of $('#sandboxes tbody').children) {
    const hay = [0, 2, 3].map((k) => tr.children[k].textContent).join(' ').toLowerCase();
    tr.hidden = !!t && !hay.includes(t);
  }
}
$('#f-text').addEventListener('input', applyTextFilter);
$('#f-state').addEventListener('change', () => { delete $('#sandboxes').dataset.loaded; refreshList(); });
$('#filter-form').addEventListener('submit', (ev) => ev.preventDefault());

function listView() {
  show('list');
  loadTemplates();
  refreshList();
  timer = setInterval(tick(refreshList), 3000);
}

$('#create-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('#create-error').textContent = '';
  const body = {
    template: $('#c-template').value || 'base',
    isolation: $('#c-isolation').value,
    memory_mb: +$('#c-memory').value,
    cpus: +$('#c-cpus').value,
    pids: +$('#c-pids').value,
    timeout: +$('#c-timeout').value,
  };
  const mode = $('#c-network').value;
  if (mode !== 'none') body.network = { mode, rules: lines($('#c-rules').value) };
  $('#create').disabled = true;
  try {
    const sb = await api('POST', 'sandboxes', body);
    await refreshList();
    $('#create-error').textContent = '';
    $('#create-box').dataset.created = sb.id;
  } catch (e) {
    $('#create-error').textContent = e.message;
  } finally {
    $('#create').disabled = false;
  }
});

// ---- one sandbox ----

let current = null;        // the sandbox view's id
let follow = null;         // the output being followed: {pid, ctl}

// A refresh started later wins: an earlier one still in flight (the timer's,
// overtaken by an action's) must not paint an older state over it.
let sbSeq = 0;
let listSeq = 0;
// The timer skips a beat while a refresh is still out (a slow server must
// not see its answers superseded forever).
let inflight = 0;
function tick(fn) {
  return async () => {
    if (inflight) return;
    inflight++;
    try { await fn(); } finally { inflight--; }
  };
}

async function refreshSandbox(id) {
  const seq = ++sbSeq;
  let sb, m, procs;
  try {
    sb = await api('GET', 'sandboxes/' + id);
  } catch (e) {
    $('#sb-error').textContent = e.message;
    return;
  }
  m = sb.state === 'failed' ? null : await api('GET', 'sandboxes/' + id + '/metrics').catch(() => null);
  procs = sb.state === 'running' ? await api('GET', 'sandboxes/' + id + '/processes').catch(() => null) : null;
  if (current !== id || seq !== sbSeq) return;
  const info = [
    ['state', sb.state + (sb.paused_to ? ' (' + (sb.paused_to === 'disk' ? 'to disk' : 'in memory') + ')' : '')],
    ['tier', sb.isolation], ['template', sb.template], ['age', ago(sb.created_at)],
    ['TTL left', ttlLeft(sb)], ['cpus', sb.cpus], ['network', (sb.network && sb.network.mode) || 'none'],
  ];
  if (m) {
    info.push(['memory', mib(m.memory_bytes) + ' / ' + mib(m.memory_limit_bytes) + ' (peak ' + mib(m.memory_peak_bytes) + ')']);
    info.push(['pids', m.pids + ' / ' + m.pids_limit]);
    info.push(['disk', mib(m.disk_used_bytes) + ' / ' + mib(m.disk_limit_bytes)]);
    info.push(['cpu time', m.cpu_seconds.toFixed(2) + ' s']);
    drawCharts(m);
  }
  $('#sb-info').replaceChildren(...info.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));
  $('#sb-info').dataset.state = sb.state;
  if (sb.paused_to) $('#sb-info').dataset.pausedTo = sb.paused_to;
  else delete $('#sb-info').dataset.pausedTo;
  if ($('#sb-actions').dataset.state !== sb.state) {   // rebuilt only on a change: focus stays
    $('#sb-actions').replaceChildren(...actionButtons(sb, () => {
      if (!$('#sandbox').hidden) refreshSandbox(id);
    }));
    $('#sb-actions').dataset.state = sb.state;
  }
  const procsKey = procs && JSON.stringify(procs.processes.map((p) => [p.pid, p.state, p.exit_code, p.signal]));
  if (procs && $('#procs').dataset.key !== procsKey) {   // unchanged: keep the rows (and the focus)
    $('#procs').dataset.key = procsKey;
    $('#procs tbody').replaceChildren(...procs.processes.map((p) => el('tr', { 'data-pid': p.pid },
      el('td', {}, p.pid),
      el('td', {}, el('code', {}, p.cmd.join(' ').slice(0, 120))),
      el('td', {}, p.state),
      el('td', {}, p.exit_code == null ? (p.signal == null ? '' : 'signal ' + p.signal) : p.exit_code),
      el('td', {},
        el('button', { type: 'button', onclick: () => followOutput(id, p.pid) }, 'Follow'),
        p.pty && p.state === 'running' ? el('a', { href: '#/sb/' + id + '/term/' + p.pid }, ' terminal') : ''))));
  }
}

// Small live charts of the samples taken while the page is open (one each
// refresh): CPU use (from cpu_seconds deltas), memory, pids.
const SVGNS = 'http://www.w3.org/2000/svg';
let samples = [];

function chart(label, values, max, fmt) {
  const svg = document.createElementNS(SVGNS, 'svg');
  svg.setAttribute('viewBox', '0 0 100 30');
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  const line = document.createElementNS(SVGNS, 'polyline');
  const n = values.length;
  const top = Math.max(max || 0, ...values, 1e-9);
  line.setAttribute('points', values.map((v, i) => (n < 2 ? 0 : (100 * i) / (n - 1)).toFixed(1) + ',' +
    (29 - (28 * v) / top).toFixed(1)).join(' '));
  line.setAttribute('vector-effect', 'non-scaling-stroke');
  svg.append(line);
  const last = n ? values[n - 1] : 0;
  return el('div', { class: 'chart', 'data-chart': label }, el('div', { class: 'label' }, label + ': ' + fmt(last)), svg);
}

function drawCharts(m) {
  const now = Date.now();
  samples.push({ t: now, cpu: m.cpu_seconds, mem: m.memory_bytes, pids: m.pids, memLimit: m.memory_limit_bytes,
    pidsLimit: m.pids_limit });
  if (samples.length > 60) samples.shift();
  const cpu = samples.slice(1).map((x, i) => Math.max(0, (100 * (x.cpu - samples[i].cpu)) / ((x.t - samples[i].t) / 1000)));
  $('#charts').replaceChildren(
    chart('CPU %', cpu, 100, (v) => v.toFixed(1) + '%'),
    chart('memory', samples.map((x) => x.mem), m.memory_limit_bytes, mib),
    chart('pids', samples.map((x) => x.pids), Math.min(m.pids_limit, Math.max(16, ...samples.map((x) => x.pids)) * 2),
      (v) => String(v)));
}

function sandboxView(id) {
  samples = [];
  $('#charts').replaceChildren();
  show('sandbox');
  current = id;
  $('#sb-id').textContent = id;
  $('#sb-error').textContent = '';
  $('#sb-info').replaceChildren();
  delete $('#sb-info').dataset.state;
  $('#sb-actions').replaceChildren();
  delete $('#sb-actions').dataset.state;
  $('#procs tbody').replaceChildren();
  delete $('#procs').dataset.key;
  if (!follow || follow.sandbox !== id) {
    $('#output').textContent = '';
    $('#out-pid').textContent = '';
  }
  refreshSandbox(id);
  timer = setInterval(tick(() => refreshSandbox(id)), 3000);
  const audit = followAudit(id);
  $('#files tbody').replaceChildren();
  $('#port-urls').replaceChildren();
  loadPortsPublic(id);
  listFiles(id);
  loadNetwork(id);
  stopView = () => { current = null; stopFollow(); audit.abort(); };
}

// The sandbox's audit log, followed (GET .../audit?follow=1: JSON lines).
// The filter only hides rows; every line is kept.
function auditVisible(tr) {
  const f = $('#audit-filter').value;
  return !f || tr.dataset.event.startsWith(f) || (f === 'deny' && tr.dataset.decision === 'deny');
}
$('#audit-filter').addEventListener('change', () => {
  for (const tr of $('#audit tbody').children) tr.hidden = !auditVisible(tr);
});

function followAudit(id) {
  const ctl = new AbortController();
  const body = $('#audit tbody');
  body.replaceChildren();
  // once: aborted, or the sandbox went away, ends it
  followResuming(() => API + '/sandboxes/' + id + '/audit?follow=1', (reader) => readJsonLines(reader, (ev) => {
    const { ts, sandbox, key, event, ...rest } = ev;
    const tr = el('tr', { 'data-event': event || '', 'data-decision': rest.decision || '' },
      el('td', {}, (ts || '').replace('T', ' ').replace('Z', '')),
      el('td', {}, event || ''),
      el('td', {}, el('code', {}, JSON.stringify(rest))));
    tr.hidden = !auditVisible(tr);
    body.append(tr);
    return false;
  }).then(() => true), { tries: 1, signal: ctl.signal, giveUp: () => true });
  return ctl;
}

function lines(text) {
  return text.split('\n').map((l) => l.trim()).filter((l) => l);
}

// ---- network, snapshots, forks ----

async function loadNetwork(id) {
  let n;
  try {
    n = await api('GET', 'sandboxes/' + id + '/network');
  } catch (e) {
    $('#net-info').textContent = e.message;
    return;
  }
  const none = !n.mode || n.mode === 'none';
  $('#net-form').hidden = none;
  $('#net-info').textContent = none ? 'No network (loopback only); a network is chosen at create time.'
    : 'Dropped by the kernel so far: ' + (n.dropped_packets || 0) + ' packets, ' + (n.dropped_bytes || 0) + ' bytes.';
  if (!none) {
    $('#net-mode').value = n.mode;
    $('#net-rules').value = (n.rules || []).join('\n');
  }
  $('#net-form').dataset.mode = n.mode || 'none';
}

$('#net-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const id = current;
  $('#sb-error').textContent = '';
  try {
    await api('PUT', 'sandboxes/' + id + '/network', { mode: $('#net-mode').value, rules: lines($('#net-rules').value) });
    await loadNetwork(id);
    $('#net-form').dataset.applied = String(Date.now());
  } catch (e) {
    $('#sb-error').textContent = 'network: ' + e.message;
  }
});

$('#snapshot').addEventListener('click', async () => {
  const name = $('#snap-name').value.trim();
  $('#sb-error').textContent = '';
  try {
    const r = await api('POST', 'sandboxes/' + current + '/snapshots', { name });
    $('#sb-error').textContent = '';
    $('#snap-name').value = '';
    $('#templates').replaceChildren();
    $('#c-template').replaceChildren();
    $('#net-info').dataset.snapshot = r.name;
  } catch (e) {
    $('#sb-error').textContent = 'snapshot: ' + e.message;
  }
});

$('#fork').addEventListener('click', async () => {
  $('#sb-error').textContent = '';
  try {
    const r = await api('POST', 'sandboxes/' + current + '/fork', { count: 1 });
    location.hash = '#/sb/' + r.sandboxes[0].id;
  } catch (e) {
    $('#sb-error').textContent = 'fork: ' + e.message;
  }
});

// Whether the sandbox's ports need a token (POST .../ports/public, audited
// as the API call is); the box shows what the server says, not what was clicked.
async function loadPortsPublic(id) {
  const box = $('#port-public');
  box.disabled = true;
  try {
    const p = await api('GET', 'sandboxes/' + id + '/ports');
    if (current !== id) return;
    box.checked = !!p.public;
    box.disabled = false;
  } catch (e) {
    $('#sb-error').textContent = 'ports: ' + e.message;
  }
}

$('#port-public').addEventListener('change', async () => {
  const id = current;
  const box = $('#port-public');
  const want = box.checked;
  box.disabled = true;
  try {
    const p = await api('POST', 'sandboxes/' + id + '/ports/public', { public: want });
    if (current !== id) return;
    box.checked = !!p.public;
    if ($('#port-urls').childElementCount) $('#port-form').requestSubmit();
  } catch (e) {
    box.checked = !want;
    $('#sb-error').textContent = 'ports: ' + e.message;
  } finally {
    if (current === id) box.disabled = false;
  }
});

// The URLs of a port (docs/api.md, "Ports"): the host form, its own origin
// (the one to open in a browser), and the path form, which answers
// sandboxed (an opaque origin) because it shares the console's.
$('#port-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const id = current;
  const port = +$('#port').value;
  try {
    const p = await api('GET', 'sandboxes/' + id + '/ports');
    const tok = p.public ? '' : '?paddock_port_token=' + p.port_token;
    const domain = p.domain.includes(':') ? p.domain : p.domain + (location.port ? ':' + location.port : '');
    const host = location.protocol + '//' + port + '-' + id + '.' + domain + '/' + tok;
    const path = location.origin + API + '/sandboxes/' + id + '/ports/' + port + '/' + tok;
    const link = (href, text) => el('li', {}, text + ': ', el('a', { href, target: '_blank', rel: 'noopener noreferrer' }, href));
    $('#port-urls').replaceChildren(link(host, 'own origin'), link(path, 'path form (sandboxed)'));
  } catch (e) {
    $('#sb-error').textContent = 'ports: ' + e.message;
  }
});

// ---- files ----

function q(params) {
  return Object.entries(params).map(([k, v]) => k + '=' + encodeURIComponent(v)).join('&');
}

function joinPath(dir, name) {
  return (dir.endsWith('/') ? dir : dir + '/') + name;
}

async function listFiles(id) {
  const dir = $('#files-path').value || '/';
  $('#files-error').textContent = '';
  let r;
  try {
    r = await api('GET', 'sandboxes/' + id + '/files/list?' + q({ path: dir }));
  } catch (e) {
    $('#files-error').textContent = e.message;
    return;
  }
  const rows = r.entries.sort((a, b) => (a.type === 'dir') === (b.type === 'dir') ? a.name.localeCompare(b.name)
    : a.type === 'dir' ? -1 : 1);
  $('#files tbody').replaceChildren(...rows.map((e) => {
    const path = e.path || joinPath(dir, e.name);
    const name = e.type === 'dir'
      ? el('a', { href: '#', onclick: (ev) => { ev.preventDefault(); $('#files-path').value = path; listFiles(id); } }, e.name + '/')
      : el('span', {}, e.name);
    return el('tr', { 'data-name': e.name },
      el('td', {}, name), el('td', {}, e.type), el('td', {}, e.type === 'file' ? e.size : ''),
      el('td', {}, (e.modified_at || '').replace('T', ' ').replace(/\.\d+Z$/, '')),
      el('td', {},
        e.type === 'file' ? el('button', { type: 'button', 'data-act': 'download', onclick: () => downloadFile(id, path, e.name) }, 'Download') : '',
        el('button', { type: 'button', 'data-act': 'rename', onclick: async () => {
          const to = (prompt('Rename ' + e.name + ' to', e.name) || '').trim();
          if (!to || to === e.name) return;
          if (to.includes('/')) { $('#files-error').textContent = 'rename: a name, not a path'; return; }
          try { await api('POST', 'sandboxes/' + id + '/files/move', { from: path, to: joinPath(dir, to) }); } catch (err) { $('#files-error').textContent = 'rename: ' + err.message; }
          listFiles(id);
        } }, 'Rename'),
        el('button', { type: 'button', 'data-act': 'delete', onclick: async () => {
          if (!confirm('Delete ' + path + (e.type === 'dir' ? ' and everything in it' : '') + '?')) return;
          try { await api('DELETE', 'sandboxes/' + id + '/files?' + q({ path })); } catch (err) { $('#files-error').textContent = err.message; }
          listFiles(id);
        } }, 'Delete')));
  }));
  $('#files').dataset.dir = dir;
}

async function downloadFile(id, path, name) {
  try {
    const r = await fetch(API + '/sandboxes/' + id + '/files?' + q({ path }),
      { credentials: 'same-origin', headers: { 'X-Paddock-Console': '1' } });
    if (!r.ok) throw new ApiError(r.status, 'download: ' + r.status);
    const url = URL.createObjectURL(await r.blob());
    const a = el('a', { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) {
    $('#files-error').textContent = e.message;
  }
}

// XMLHttpRequest rather than fetch: it reports upload progress.
function uploadOne(id, file, dir, progress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open('PUT', API + '/sandboxes/' + id + '/files?' + q({ path: joinPath(dir, file.name) }));
    x.setRequestHeader('X-Paddock-Console', '1');
    x.upload.onprogress = (ev) => progress(ev.loaded);
    x.onload = () => (x.status < 300 ? resolve() : reject(new ApiError(x.status, (() => {
      try { return JSON.parse(x.responseText).error.message; } catch (e) { return 'upload: ' + x.status; }
    })())));
    x.onerror = () => reject(new Error('upload failed'));
    x.send(file);
  });
}

$('#upload').addEventListener('change', async (ev) => {
  const id = current;
  const files = [...ev.target.files];
  const dir = $('#files-path').value || '/';
  const bar = $('#upload-progress');
  const total = files.reduce((n, f) => n + f.size, 0) || 1;
  let done = 0;
  bar.hidden = false;
  bar.value = 0;
  $('#files-error').textContent = '';
  try {
    for (const f of files) {
      await uploadOne(id, f, dir, (n) => { bar.value = (done + n) / total; });
      done += f.size;
    }
    bar.value = 1;
  } catch (e) {
    $('#files-error').textContent = e.message;
  }
  ev.target.value = '';
  bar.hidden = true;
  listFiles(id);
});

$('#files-form').addEventListener('submit', (ev) => { ev.preventDefault(); listFiles(current); });
$('#files-up').addEventListener('click', () => {
  const p = $('#files-path').value.replace(/\/+$/, '');
  $('#files-path').value = p.slice(0, p.lastIndexOf('/')) || '/';
  listFiles(current);
});
$('#mkdir').addEventListener('click', async () => {
  const name = $('#mkdir-name').value.trim();
  if (!name) return;
  try {
    await api('POST', 'sandboxes/' + current + '/files/mkdir', { path: joinPath($('#files-path').value || '/', name) });
    $('#mkdir-name').value = '';
  } catch (e) {
    $('#files-error').textContent = e.message;
  }
  listFiles(current);
});

$('#ttl-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const id = current;
  $('#sb-error').textContent = '';
  try {
    await api('POST', 'sandboxes/' + id + '/timeout', { timeout: +$('#ttl').value });
    refreshSandbox(id);
  } catch (e) {
    $('#sb-error').textContent = 'timeout: ' + e.message;
  }
});

function stopFollow() {
  if (follow) follow.ctl.abort();
  follow = null;
}

// Follow a process's output (format=frames, follow=1). The offsets of
// what arrived are kept: a dropped stream resumes from them, losing nothing
// still in the sandbox's ring buffer.
async function followOutput(id, pid) {
  stopFollow();
  const f = { sandbox: id, pid, ctl: new AbortController(), next: { stdout: 0, stderr: 0 } };
  follow = f;
  const out = $('#output');
  out.textContent = '';
  out.dataset.exit = '';
  $('#out-pid').textContent = 'of ' + pid;
  const dec = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  const url = () => API + '/sandboxes/' + id + '/processes/' + pid + '/output?format=frames&follow=1' +
    '&from_stdout=' + f.next.stdout + '&from_stderr=' + f.next.stderr;
  await followResuming(url, (reader) => readJsonLines(reader, (fr) => {
    if (fr.data_b64 !== undefined) {
      const bytes = Uint8Array.from(atob(fr.data_b64), (c) => c.charCodeAt(0));
      const s = fr.stream === 'stderr' ? 'stderr' : 'stdout';
      f.next[s] = fr.offset + bytes.length;
      out.append(dec[s].decode(bytes, { stream: true }));
      out.scrollTop = out.scrollHeight;
    } else if (fr.exit) {
      out.dataset.exit = fr.exit.exit_code == null ? 'signal ' + fr.exit.signal : String(fr.exit.exit_code);
      return true;
    }
    return false;
  }), { tries: 20, delayMs: 1000, signal: f.ctl.signal, alive: () => follow === f,
        giveUp: (e) => e.status === 404 || e.status === 409 });
}

$('#run-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const id = current;
  $('#sb-error').textContent = '';
  try {
    const p = await api('POST', 'sandboxes/' + id + '/processes', { cmd: $('#cmd').value, tag: 'console' });
    refreshSandbox(id);
    followOutput(id, p.pid);
  } catch (e) {
    $('#sb-error').textContent = e.message;
  }
});

$('#terminal').addEventListener('click', async () => {
  const id = current;
  try {
    const p = await api('POST', 'sandboxes/' + id + '/processes',
      { cmd: ['/bin/bash', '-l'], pty: { rows: 30, cols: 100 }, stdin: true, tag: 'terminal' });
    location.hash = '#/sb/' + id + '/term/' + p.pid;
  } catch (e) {
    $('#sb-error').textContent = e.message;
  }
});

// ---- the terminal ----

// The pty's bytes through GET .../processes/{pid}/pty (a WebSocket): binary
// both ways, resize as a JSON text message. On a drop it reconnects from
// the offset it reached; a reload replays what the ring still holds.
function termView(id, pid) {
  show('term');
  $('#term-back').href = '#/sb/' + id;
  const status = $('#term-status');
  const box = $('#xterm');
  box.replaceChildren();
  const term = new window.Terminal({ convertEol: false, cursorBlink: true, fontSize: 14, lineHeight: 1.2, scrollback: 5000 });
  window.pdTerm = term;     // the browser tests read its buffer
  term.open(box);
  let ws = null;
  let offset = 0;
  let ended = false;
  let closedByUs = false;
  const fit = () => {
    const cell = 14 * 0.6;
    const cols = Math.max(20, Math.floor(box.clientWidth / (cell + 0.4)));
    const rows = Math.max(5, Math.floor(box.clientHeight / 20));
    if (cols !== term.cols || rows !== term.rows) term.resize(cols, rows);
  };
  const sendResize = () => {
    if (ws && ws.readyState === 1) ws.send(JSON.stringify({ resize: { rows: term.rows, cols: term.cols } }));
  };
  term.onResize(sendResize);
  const enc = new TextEncoder();
  term.onData((d) => { if (ws && ws.readyState === 1) ws.send(enc.encode(d)); });
  const connect = () => {
    const proto = location.protocol === 'https:' ? 'wss://' : 'ws://';
    ws = new WebSocket(proto + location.host + API + '/sandboxes/' + id + '/processes/' + pid + '/pty?from=' + offset);
    ws.binaryType = 'arraybuffer';
    window.pdTermWs = ws;     // the browser tests drop it to check the reconnect
    ws.onopen = () => { status.textContent = 'connected'; box.dataset.connected = '1'; sendResize(); term.focus(); };
    ws.onmessage = (ev) => {
      if (typeof ev.data === 'string') {
        const x = JSON.parse(ev.data);
        ended = true;
        status.textContent = 'process ended (' + (x.exit != null ? 'exit ' + x.exit : 'signal ' + x.signal) + ')';
        return;
      }
      const b = new Uint8Array(ev.data);
      offset += b.length;
      term.write(b);
    };
    ws.onclose = () => {
      box.dataset.connected = '';
      if (ended || closedByUs) return;
      status.textContent = 'disconnected: reconnecting';
      setTimeout(() => { if (!closedByUs) connect(); }, 1000);
    };
  };
  fit();
  window.addEventListener('resize', fit);
  connect();
  stopView = () => {
    closedByUs = true;
    window.removeEventListener('resize', fit);
    if (ws) ws.close();
    term.dispose();
    window.pdTerm = null;
  };
}

start();
