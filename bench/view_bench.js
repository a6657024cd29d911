// view_bench.js PAGE ours|memviz - one page in headless Chromium (playwright-core), the same
// harness for `cumemhist view`'s page and for PyTorch's MemoryViz.js: the first frame after load,
// then 40 zoom steps in, 40 pan steps, 40 zoom steps out, each timed from the input event to the
// end of the frame it caused (vsync off, so no frame waits for the display), and the browser's
// memory after (PSS of every Chromium process, and the page's JS heap); for ours also the script's
// own time in each of those frames (draw_ms), which the machine's load moves less.  Prints one line of JSON.
// Figures only: nothing passes or fails.
'use strict';
const fs = require('fs');
const { chromium } = require(process.env.PLAYWRIGHT_CORE || 'playwright-core');
const [page_path, kind] = process.argv.slice(2);
const LIMIT_S = Number(process.env.VIEW_BENCH_LIMIT_S || 180);

function pss(pid) { /* -pid: every descendant of pid, not pid itself (the browser node launched) */
  let kb = 0;
  const self = pid < 0;
  pid = Math.abs(pid);
  const kids = [pid];
  for (let i = 0; i < kids.length; i++) {
    try {
      for (const t of fs.readdirSync(`/proc/${kids[i]}/task`))
        for (const c of fs.readFileSync(`/proc/${kids[i]}/task/${t}/children`, 'utf8').split(' ').filter(Boolean)) kids.push(Number(c));
    } catch (e) { /* gone */ }
  }
  for (const p of kids.slice(self ? 1 : 0)) {
    try { const m = /Pss:\s+(\d+)/.exec(fs.readFileSync(`/proc/${p}/smaps_rollup`, 'utf8')); if (m) kb += Number(m[1]); } catch (e) { /* gone */ }
  }
  return kb * 1024;
}
const q = (a, p) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : null; };

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROME || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu-vsync', '--disable-frame-rate-limit'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const out = { kind, page: page_path, bytes: fs.statSync(page_path).size };
  const t0 = Date.now();
  await page.goto('file://' + require('path').resolve(page_path), { waitUntil: 'commit', timeout: LIMIT_S * 1000 });
  const ready = kind === 'ours' ? '#cmh-view[data-ready]' : 'svg polygon';
  try {
    await page.waitForSelector(ready, { timeout: LIMIT_S * 1000, state: 'attached' });
  } catch (e) {
    out.first_frame_ms = null;
    out.note = `no first frame within ${LIMIT_S} s (${Math.round((Date.now() - t0) / 1000)} s waited)`;
    out.pss_bytes = pss(-process.pid);
    console.log(JSON.stringify(out));
    await browser.close();
    return;
  }
  // the first frame: the next frame's end after the view exists, from navigation start
  out.first_frame_ms = await page.evaluate(() => new Promise(r => requestAnimationFrame(() => setTimeout(() => r(performance.now()), 0))));
  const steps = await page.evaluate(async kind => {
    const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
    let target, box;
    if (kind === 'ours') target = document.getElementById('v-canvas');
    else target = document.querySelector('svg g[clip-path]');
    box = target.getBoundingClientRect();
    const cx = box.left + box.width / 2, cy = box.top + box.height / 2, res = { zoom: [], pan: [] };
    async function timed(list, fire) { const t = performance.now(); fire(); await frame(); list.push(performance.now() - t); }
    const wheel = (dy, shift) => target.dispatchEvent(new WheelEvent('wheel', { deltaY: dy, deltaMode: 0, clientX: cx, clientY: cy, shiftKey: !!shift, bubbles: true, cancelable: true, view: window }));
    await frame();
    const drawn0 = kind === 'ours' ? window.cmhView.stats.frames.length : 0;
    for (let i = 0; i < 40; i++) await timed(res.zoom, () => wheel(-120));
    if (kind === 'ours') {
      for (let i = 0; i < 40; i++) await timed(res.pan, () => wheel(i < 20 ? 60 : -60, true));
    } else {
      target.dispatchEvent(new MouseEvent('mousedown', { clientX: cx, clientY: cy, button: 0, buttons: 1, bubbles: true, view: window }));
      for (let i = 0; i < 40; i++) {
        const x = cx + (i < 20 ? -(i + 1) * 10 : -(40 - i - 1) * 10);
        await timed(res.pan, () => window.dispatchEvent(new MouseEvent('mousemove', { clientX: x, clientY: cy, buttons: 1, bubbles: true, view: window })));
      }
      window.dispatchEvent(new MouseEvent('mouseup', { clientX: cx, clientY: cy, bubbles: true, view: window }));
    }
    for (let i = 0; i < 40; i++) await timed(res.zoom, () => wheel(120));
    if (kind === 'ours') res.draw = window.cmhView.stats.frames.slice(drawn0); /* the page's own work in each frame */
    return res;
  }, kind);
  const all = steps.zoom.concat(steps.pan);
  out.frame_ms = { median: q(all, 0.5), p99: q(all, 0.99), max: Math.max(...all), n: all.length,
    zoom_median: q(steps.zoom, 0.5), pan_median: q(steps.pan, 0.5) };
  if (steps.draw) out.draw_ms = { median: q(steps.draw, 0.5), p99: q(steps.draw, 0.99), max: Math.max(...steps.draw), n: steps.draw.length };
  const m = await cdp.send('Performance.getMetrics');
  out.js_heap_bytes = (m.metrics.find(x => x.name === 'JSHeapUsedSize') || {}).value || null;
  out.pss_bytes = pss(-process.pid);
  if (errors.length) out.errors = errors.slice(0, 3);
  console.log(JSON.stringify(out));
  await browser.close();
})().catch(e => { console.log(JSON.stringify({ kind, page: page_path, error: String(e.message || e).slice(0, 300) })); process.exit(1); });
