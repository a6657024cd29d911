// view_bench.js PAGE ours|memviz, or - blank - one page in headless Chromium (playwright-core), the same
// harness for `cumemhist view`'s page and for PyTorch's MemoryViz.js: the first frame after load,
// then 40 wheel steps in, 40 steps of a mouse drag (pan), 40 wheel steps out, input sent through
// the browser as a user's is, each timed from the input event's timestamp to the end of the frame
// it caused (vsync off, so no frame waits for the display), and the browser's
// memory after (PSS of every Chromium process, and the page's JS heap); for ours also the script's
// own time in each of those frames (draw_ms), which the machine's load moves less.  Prints one line of JSON.
// Figures only: nothing passes or fails.
'use strict';
const fs = require('fs');
const { chromium } = require(process.env.PLAYWRIGHT_CORE || 'playwright-core');
let [page_path, kind] = process.argv.slice(2);
if (kind === 'blank') { /* the control: one canvas, refilled in the frame after a wheel or drag step */
  page_path = require('path').join(require('os').tmpdir(), `cmh-view-blank-${process.pid}.html`);
  fs.writeFileSync(page_path, `<!DOCTYPE html><html><body><div id="cmh-view" data-ready="1"><canvas id="v-canvas" width="1200" height="380"></canvas></div><script>
var c = document.getElementById('v-canvas'), x = c.getContext('2d'), n = 0;
function again(ev) { if (ev.type === 'wheel') ev.preventDefault(); if (ev.type === 'wheel' || ev.buttons) requestAnimationFrame(function () { x.fillStyle = n++ % 2 ? '#4e79a7' : '#f28e2c'; x.fillRect(0, 0, 1200, 380); }); }
c.addEventListener('wheel', again, {passive: false}); c.addEventListener('pointermove', again);
</script></body></html>`);
  process.on('exit', () => fs.rmSync(page_path, { force: true }));
}
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
  const ready = kind !== 'memviz' ? '#cmh-view[data-ready]' : 'svg polygon';
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
  // Input goes in as a user's does, through the browser (CDP Input.dispatchMouseEvent, which
  // playwright's mouse drives), and each wheel or drag step is timed in the page to the end of
  // the frame that shows it (the first task after that frame's animation callbacks, style,
  // layout, paint and commit), from two starts: when the page's first listener sees the event
  // (frame_ms: the page's and the renderer's part), and the event's own timestamp, when the
  // browser made it (input_ms: also the browser's routing, and any wait behind the page's other
  // tasks).  A blank page (kind blank: a canvas filled once a wheel or drag step) gives the
  // browser's own floor for both.
  // MemoryViz.js: the plot's svg (its zoomed group's own box runs far past the screen, with
  // polygons the clip path hides), so that the pointer is over the plot
  const target = kind !== 'memviz' ? '#v-canvas' : 'svg[viewBox="0 0 1024 576"]';
  const box = await page.evaluate(sel => { const r = document.querySelector(sel).getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; }, target);
  const cx = box.x + box.w / 2, cy = box.y + box.h / 2;
  await page.evaluate(kind => {
    const mark = ev => {
      if (ev.type === 'mousemove' && !ev.buttons) return;
      const t0 = ev.timeStamp, t1 = performance.now();
      window.__next = new Promise(r => requestAnimationFrame(() => setTimeout(() => { const t2 = performance.now(); r([t2 - t1, t2 - t0]); }, 0)));
    };
    window.addEventListener('wheel', mark, { capture: true, passive: true });
    window.addEventListener('mousemove', mark, { capture: true, passive: true });
    window.__drawn0 = kind === 'ours' ? window.cmhView.stats.frames.length : 0;
  }, kind);
  await page.mouse.move(cx, cy);
  await page.evaluate(() => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0))));
  const steps = { zoom: [], pan: [] };
  const step = async (list, act) => { await page.evaluate(() => { window.__next = null; }); await act(); list.push(await page.evaluate(() => window.__next)); };
  for (let i = 0; i < 40; i++) await step(steps.zoom, () => page.mouse.wheel(0, -120));
  await page.mouse.down();
  for (let i = 0; i < 40; i++) await step(steps.pan, () => page.mouse.move(cx + (i < 20 ? -(i + 1) * 10 : -(40 - i - 1) * 10), cy));
  await page.mouse.up();
  for (let i = 0; i < 40; i++) await step(steps.zoom, () => page.mouse.wheel(0, 120));
  if (kind === 'ours') { /* the page's own work in each frame; when its idle work (warm-up, checkpoints) was done */
    const st = await page.evaluate(() => { const s = window.cmhView.stats; return { draw: s.frames.slice(window.__drawn0), warm: s.warm, cps: s.cps }; });
    steps.draw = st.draw; out.idle_done_ms = { warm: st.warm, checkpoints: st.cps };
  }
  if (steps.zoom.concat(steps.pan).some(x => x === null)) out.note = 'an input step drew no frame';
  const fig = (k) => {
    const z = steps.zoom.filter(Boolean).map(x => x[k]), p = steps.pan.filter(Boolean).map(x => x[k]), all = z.concat(p);
    return { median: q(all, 0.5), p99: q(all, 0.99), max: Math.max(...all), n: all.length, zoom_median: q(z, 0.5), pan_median: q(p, 0.5) };
  };
  out.frame_ms = fig(0);
  out.input_ms = fig(1);
  if (process.env.VIEW_BENCH_FRAMES) out.frames = { zoom: steps.zoom.map(x => x && x.map(Math.round)), pan: steps.pan.map(x => x && x.map(Math.round)), draw: (steps.draw || []).map(x => Math.round(x * 10) / 10) };
  if (steps.draw) out.draw_ms = { median: q(steps.draw, 0.5), p99: q(steps.draw, 0.99), max: Math.max(...steps.draw), n: steps.draw.length };
  const m = await cdp.send('Performance.getMetrics');
  out.js_heap_bytes = (m.metrics.find(x => x.name === 'JSHeapUsedSize') || {}).value || null;
  out.pss_bytes = pss(-process.pid);
  if (errors.length) out.errors = errors.slice(0, 3);
  console.log(JSON.stringify(out));
  await browser.close();
})().catch(e => { console.log(JSON.stringify({ kind, page: page_path, error: String(e.message || e).slice(0, 300) })); process.exit(1); });
