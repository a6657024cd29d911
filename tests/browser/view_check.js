// view_check.js PAGE FACTS.json WIDTH - drive `cumemhist view`'s page in headless Chromium
// (playwright-core, Debian's chromium) as a person would, and check what it shows against the
// reports: peak --json (the sites live at the peak), leaks --json (what is still live at the
// end), flamegraph --folded --at N (live bytes by stack at other instants).  Prints ok:/FAIL:
// lines; the exit status is the number of failures.
'use strict';
const path = require('path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE || 'playwright-core');
const fs = require('fs');
const [page_path, facts_path, width_s] = process.argv.slice(2);
const facts = JSON.parse(fs.readFileSync(facts_path, 'utf8'));
const W = Number(width_s) || 1280;
let fails = 0, passes = 0;
function check(what, cond, detail) {
  if (cond) { passes++; console.log('ok: ' + what); } else { fails++; console.log('FAIL: ' + what + (detail ? ' (' + detail + ')' : '')); }
}
const frameText = f => f.function + (f.file ? ' (' + f.file + (f.line > 0 ? ':' + f.line : '') + ')' : '');
const siteKey = s => s ? [s.function, s.file, s.line].join('|') : '<none>';
// after an input, the page draws in its next animation frame: wait for two (the page's request was
// queued first, so it has run), not for a number of milliseconds a loaded machine may not give
const settle = page => page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))));
// a wheel event reaches the page through the compositor, after mouse.wheel returns: wait for what
// it does, up to 10 s (a check below says so when it never comes)
const until = (page, fn, arg) => page.waitForFunction(fn, arg, { timeout: 10000 }).then(() => true, () => false);

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROME || '/usr/bin/chromium', args: ['--no-sandbox'] });
  const ctx = await browser.newContext({ viewport: { width: W, height: 900 } });
  const page = await ctx.newPage();
  const errors = [], requests = [];
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') errors.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', e => errors.push('pageerror: ' + e.message));
  const url = 'file://' + path.resolve(page_path);
  page.on('request', r => { if (r.url() !== url) requests.push(r.url()); });
  await page.goto(url);
  await page.waitForSelector('#cmh-view[data-ready]', { timeout: 20000 });
  const devices = await page.evaluate(() => window.cmhView.meta.devices.map(d => d.device));
  check(`${W}px: the page offers every device the reports cover (${devices})`, JSON.stringify(devices) === JSON.stringify(facts.peak.map(p => p.device)));

  // sizes print as the reports print them (C's %.1f: a tie to the even digit): 13893632 B, exactly
  // 13.25 MiB, is peak's 13.2 MiB (toFixed said 13.3); 13.75 MiB is 13.8; others round as usual
  const sizes = await page.evaluate(() => [13893632, 14417920, 13904118, 1536, 0].map(window.cmhView.size));
  check(`sizes round as the reports do (${sizes})`, JSON.stringify(sizes) === JSON.stringify(['13.2 MiB', '13.8 MiB', '13.3 MiB', '1.5 KiB', '0 B']));
  for (let k = 0; k < devices.length; k++) {
    const pk = facts.peak[k], D = devices[k];
    // the device switcher, by keyboard: focus it, pick the k-th entry
    if (k > 0) {
      await page.focus('#v-device');
      await page.selectOption('#v-device', String(k));
      await page.waitForFunction(kk => window.cmhView.view.k === kk, k);
    }
    // (the status line is drawn after the switch: wait for it up to 5 s; a line that never says so fails below)
    await page.waitForFunction(n => (document.querySelector('.v-status') || {}).textContent.includes('of ' + n), pk.trace_entries, { timeout: 5000 }).catch(() => {});
    const status = await page.textContent('.v-status');
    check(`device ${D}: the switcher shows its ${pk.trace_entries} entries`, status.includes('of ' + pk.trace_entries), status);
    // the entries in sight are numbered as the reports number them: the last is n - 1, not n
    const rng = /Entries (\d+)\u2013(\d+) of (\d+)/.exec(status);
    check(`device ${D}: the status's range of entries ends at the last entry`, rng && Number(rng[2]) < Number(rng[3]) && Number(rng[1]) >= 0, status);
    // Home: the cursor at entry 0; the table's heading counts its blocks in words that agree
    await page.focus('canvas').catch(() => {});
    await page.keyboard.press('Home');
    const home = await page.evaluate(() => [...document.querySelectorAll('#cmh-view h3')].map(h => h.textContent).find(t => t.startsWith('Live at the cursor')) || '');
    const nhome = (await page.evaluate(kk => window.cmhView.live(kk, 0), k)).length;
    check(`device ${D}: at Home, the table's heading says ${nhome} block${nhome === 1 ? '' : 's'}`,
      new RegExp(' in ' + nhome + (nhome === 1 ? ' block(,|$)' : ' blocks')).test(home), home);
    await page.keyboard.press('End');
    // the y axis's ticks read as round figures in the unit printed (100.0 MiB, not 95.4 MiB)
    const yt = await page.evaluate(() => window.cmhView.view.frame.yticks);
    const unround = (yt || []).filter(v => { let x = v; while (x >= 1024) x /= 1024; return Math.abs(x - Math.round(x)) > 1e-9; });
    check(`device ${D}: the y axis's ${(yt || []).length} ticks are whole numbers of B, KiB, MiB or GiB`, yt && yt.length > 1 && !unround.length,
      JSON.stringify(unround.slice(0, 4)));
    // and their labels fit left of the plot, whole, at this width (a narrow page cut '953.7 MiB' to '3.7 MiB')
    const fits = await page.evaluate(() => {
      const f = window.cmhView.view.frame, ctx = document.querySelector('#cmh-view canvas').getContext('2d');
      ctx.font = '11px sans-serif';
      const sz = b => { const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']; let x = b, i = 0; while (Math.abs(x) >= 1024 && i < 4) { x /= 1024; i++; } return (i ? x.toFixed(1) : String(x)) + ' ' + u[i]; };
      return f.yticks.every(v => ctx.measureText(sz(v)).width <= f.padl - 6);
    });
    check(`device ${D}: the y axis's labels fit left of the plot at ${W} px`, fits);
    // the OOM and mark labels stay inside the plot, whole (an OOM at the right edge read 'OOM 3')
    const cut = await page.evaluate(() => { const f = window.cmhView.view.frame; return (f.evLabels || []).filter(l => l.x < f.padl - 0.5 || l.x + l.w > f.padl + f.pw + 0.5).map(l => l.text); });
    check(`device ${D}: its event labels are inside the plot`, !cut.length, JSON.stringify(cut));

    // band for band at the peak: the page's live allocations, by site, are peak's sites
    const sites = await page.evaluate(() => window.cmhView.meta.sites);
    const keyOf = s => { const x = sites[s]; return x.length < 2 ? '<none>' : [x[1], x[2], x[3]].join('|'); };
    const at = pk.peak_allocated.index;
    const live = await page.evaluate(([kk, e]) => window.cmhView.live(kk, e), [k, at]);
    const mine = {};
    for (const b of live) { const key = keyOf(b.site); mine[key] = mine[key] || [0, 0]; mine[key][0] += b.size; mine[key][1]++; }
    const theirs = {};
    for (const s of pk.sites_at_peak) { const key = siteKey(s.site); theirs[key] = theirs[key] || [0, 0]; theirs[key][0] += s.bytes; theirs[key][1] += s.blocks; }
    const total = live.reduce((a, b) => a + b.size, 0);
    check(`device ${D}: live at the peak (entry ${at}) = peak's ${pk.peak_allocated.bytes} B`, total === pk.peak_allocated.bytes, `${total}`);
    check(`device ${D}: bytes and blocks per site at the peak = peak's sites_at_peak (${Object.keys(theirs).length} sites)`,
      JSON.stringify(Object.entries(mine).sort()) === JSON.stringify(Object.entries(theirs).sort()),
      JSON.stringify(Object.entries(mine).sort()).slice(0, 300) + ' vs ' + JSON.stringify(Object.entries(theirs).sort()).slice(0, 300));

    // other instants: live bytes by stack = flamegraph --folded --at N
    const folded = facts.folded[k] || {};
    let bad = [];
    for (const [e, lines] of Object.entries(folded)) {
      const got = await page.evaluate(([kk, ee]) => {
        const v = window.cmhView, m = v.meta, by = {};
        for (const b of v.live(kk, ee)) {
          const st = m.stacks[v._stack(kk, b.id)] || [0];
          // as flamegraph folds it: from the site outward, and inside it only what is not machinery
          // (a third-party package), one line per text (two return addresses on one line are one)
          const fr = st.slice(1), site = (m.sites[st[0]] || [])[0];
          let at = fr.findIndex(f => m.frames[f][0] === site);
          if (at < 0) at = 0;
          const drawn = fr.filter((f, i) => i >= at || !m.frames[f][1]);
          const txt = st.length < 2 ? '<no stack>' : drawn.reverse().map(f => m.frames[f][0].replace(/;/g, ':')).join(';');
          by[txt] = (by[txt] || 0) + b.size;
        }
        // the same set whichever checkpoint of the live set the page starts from: none (one
        // pass from the start), only the first, or the one at or before the instant
        const ids = m => v.live(kk, ee, m).map(b => b.id).join(','), all = ids();
        if (ids(0) !== all || ids(1) !== all || ids(2) !== all) return ['the live set depends on the checkpoints used'];
        return Object.values(by).sort((a, b) => a - b);
      }, [k, Number(e)]);
      const want = lines.map(l => Number(l.slice(l.lastIndexOf(' ') + 1))).sort((a, b) => a - b);
      if (JSON.stringify(got) !== JSON.stringify(want)) bad.push(`entry ${e}: ${JSON.stringify(got).slice(0, 120)} vs ${JSON.stringify(want).slice(0, 120)}`);
    }
    check(`device ${D}: live bytes by stack at ${Object.keys(folded).length} instants = flamegraph --folded --at N`, bad.length === 0, bad.join('; '));

    // the writer's level-of-detail columns: each keeps the exact bytes per site of its instant
    const colsBad = await page.evaluate(kk => {
      const v = window.cmhView, out = [];
      for (const [e, by] of v.columns(kk)) {
        const ex = {};
        for (const b of v.live(kk, e)) ex[b.site] = (ex[b.site] || 0) + b.size;
        const a = JSON.stringify(Object.entries(ex).sort()), b = JSON.stringify(Object.entries(by).sort());
        if (a !== b) out.push(e);
      }
      return [out.length, v.columns(kk).length];
    }, k);
    check(`device ${D}: every level-of-detail column (${colsBad[1]}) holds its instant's bytes per site, folded or drawn`, colsBad[0] === 0, `${colsBad[0]} differ`);
  }

  // back to the first device; zoom into one step with the keyboard, then hover and click a band
  await page.selectOption('#v-device', '0');
  await page.waitForFunction(() => window.cmhView.view.k === 0);
  const pk = facts.peak[0];
  const steps = await page.evaluate(() => window.cmhView.meta.devices[0].steps);
  let a = 0, b = pk.trace_entries;
  for (let i = 0; i + 1 < steps.length; i++) if (steps[i] <= pk.peak_allocated.index && pk.peak_allocated.index < steps[i + 1]) { a = steps[i]; b = steps[i + 1]; }
  await page.focus('#v-canvas');
  await page.keyboard.press('p'); // the peak: cursor on it
  for (let i = 0; i < 30; i++) {
    const v = await page.evaluate(() => [window.cmhView.view.x0, window.cmhView.view.x1]);
    if (v[1] - v[0] <= Math.max(b - a, 8)) break;
    await page.keyboard.press('+');
  }
  await settle(page);
  const vw = await page.evaluate(() => [window.cmhView.view.x0, window.cmhView.view.x1, window.cmhView.view.cursor]);
  check(`zoomed by keyboard into the peak's step (entries ${a}-${b}): the window is within a step's width and holds the peak`,
    vw[1] - vw[0] <= Math.max(b - a, 8) && vw[0] <= pk.peak_allocated.index && pk.peak_allocated.index <= vw[1], JSON.stringify(vw));
  // the wheel zooms too, around the pointer
  const box = await page.locator('#v-canvas').boundingBox();
  await page.keyboard.press('0');
  const before = await page.evaluate(() => window.cmhView.view.x1 - window.cmhView.view.x0);
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, -400);
  await until(page, b => window.cmhView.view.x1 - window.cmhView.view.x0 < b, before);
  const mid = await page.evaluate(() => window.cmhView.view.x1 - window.cmhView.view.x0);
  await page.mouse.wheel(0, 400);
  await until(page, m => window.cmhView.view.x1 - window.cmhView.view.x0 > m, mid);
  const after = await page.evaluate(() => window.cmhView.view.x1 - window.cmhView.view.x0);
  check('the mouse wheel zooms in and out', mid < before && after > mid, `${before} -> ${mid} -> ${after}`);
  // a drag pans
  await page.evaluate(() => window.cmhView.setView(0, Math.max(8, window.cmhView._n(0) / 4)));
  const x0a = await page.evaluate(() => window.cmhView.view.x0);
  await page.mouse.move(box.x + box.width * 0.7, box.y + box.height / 2);
  await page.mouse.down(); await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2, { steps: 5 }); await page.mouse.up();
  const x0b = await page.evaluate(() => window.cmhView.view.x0);
  check('a drag to the left pans to later entries', x0b > x0a || await page.evaluate(() => window.cmhView.view.x1 >= window.cmhView._n(0)), `${x0a} -> ${x0b}`);
  // zoomed in, the page sweeps and paints the exact stacks itself: every band it says is drawn
  // (hover and click read these) is painted in its site's colour where it says
  const painted = await page.evaluate(e => {
    const v = window.cmhView, n = v._n(0), w = Math.min(n, 3000);
    v.setView(Math.max(0, e - w / 2), Math.max(0, e - w / 2) + w);
    const f = v.view.frame, dpr = window.devicePixelRatio || 1, im = v.view.img, img = im.data, H = im.height; // the bands' image, before the lines go over it
    const ox = Math.round(f.padl * dpr), oy = Math.round(f.Y(f.ph / f.sy) * dpr);
    let seen = 0, bad = 0;
    for (const c of f.cols) {
      const bs = v.bandsOf(c), x = Math.floor((f.X(c.a) + f.X(c.b)) / 2 * dpr);
      if (f.X(c.b) - f.X(c.a) < 2) continue;
      // and the stack's top where the bands end (above it the image is white)
      let top = 0; for (let j = 0; j < bs.length; j += 3) top += bs[j + 2];
      const at = y => (y * im.width + (x - ox)) * 4;
      let y0 = 0; while (y0 < H && img[at(y0) + 3] === 255 && img[at(y0)] === 255 && img[at(y0) + 1] === 255 && img[at(y0) + 2] === 255) y0++;
      const want0 = Math.round(H - top * f.sy * dpr);
      seen++;
      if (Math.abs(y0 - want0) > 1 && !(top * f.sy * dpr < 1 && y0 >= H - 1)) bad++;
      for (let j = 0; j < bs.length; j += 3) {
        if (bs[j + 2] * f.sy * dpr < 6) continue;
        const y = Math.floor(f.Y(bs[j + 1] + bs[j + 2] / 2) * dpr) - oy, o = at(y), want = v.colour(bs[j]);
        seen++;
        if (img[o] !== (want & 255) || img[o + 1] !== ((want >>> 8) & 255) || img[o + 2] !== ((want >>> 16) & 255)) bad++;
      }
    }
    return [seen, bad, f.cols.length];
  }, pk.peak_allocated.index);
  check(`zoomed in (${painted[2]} columns): each column is painted to its stack's top and every band where and as the page says (${painted[0]} checked)`,
    painted[0] >= 10 && painted[1] === 0, JSON.stringify(painted));

  // the biggest band live at the peak: where it is drawn, hover it, click it
  await page.evaluate(e => { window.cmhView.setCursor(e); window.cmhView.draw(); }, pk.peak_allocated.index);
  const target = await page.evaluate(e => {
    const v = window.cmhView, f = v.view.frame;
    let best = null;
    for (const c of f.cols) {
      if (c.e !== e) continue;
      c.bands = v.bandsOf(c);
      for (let j = 0; j < c.bands.length; j += 3) if (c.bands[j] >= 0 && (!best || c.bands[j + 2] > best[2])) best = [c.bands[j], c.bands[j + 1], c.bands[j + 2], c.a, c.b];
    }
    if (!best) return null;
    const p0 = v.project((best[3] + best[4]) / 2, best[1] + best[2] / 2);
    const info = v.live(0, e).find(x => x.id === best[0]);
    return { id: best[0], x: p0[0], y: p0[1], size: info.size, site: v.meta.sites[info.site] };
  }, pk.peak_allocated.index);
  check('a band is drawn at the peak instant', target !== null);
  if (target) {
    const box2 = await page.locator('#v-canvas').boundingBox(); // (where the canvas is now)
    await page.mouse.move(box2.x + target.x, box2.y + target.y);
    await until(page, () => !document.querySelector('.v-tip').hidden);
    const tip = await page.textContent('.v-tip');
    const tipShown = await page.evaluate(() => !document.querySelector('.v-tip').hidden);
    check(`hover: the tooltip names the band's site and size (${tip})`, tipShown && tip.includes(target.site[0]));
    await page.mouse.click(box2.x + target.x, box2.y + target.y);
    await until(page, () => !!document.querySelector('#v-panel .v-size'));
    const panel = await page.evaluate(() => ({
      size: document.querySelector('#v-panel .v-size')?.textContent || '',
      site: document.querySelector('#v-panel .v-site')?.textContent || '',
      from: document.querySelector('#v-panel .v-from')?.textContent || '',
      to: document.querySelector('#v-panel .v-to')?.textContent || '',
      stack: Array.from(document.querySelectorAll('#v-panel .v-stack li')).map(li => li.textContent)
    }));
    check(`click: the panel gives the size in bytes (${target.size})`, panel.size.includes('(' + target.size + ' bytes)'), panel.size);
    const ps = pk.sites_at_peak.find(s => s.site && frameText(s.site) === panel.site);
    check(`click: the panel's site (${panel.site}) is one peak lists at that instant`, !!ps || (panel.site.startsWith('<no stack') && pk.sites_at_peak.some(s => !s.site)));
    if (ps) {
      const want = ps.frames.map(frameText), st = panel.stack;
      let found = false;
      for (let i = 0; i + want.length <= st.length && !found; i++) found = want.every((f, j) => st[i + j] === f);
      check(`click: the panel's stack holds the frames peak shows for that site (${want.length})`, found, JSON.stringify(st.slice(0, 4)) + ' vs ' + JSON.stringify(want.slice(0, 4)));
    }
    check('click: the panel gives the allocation\'s life', /entry|before the first/.test(panel.from) && /entry|still live/.test(panel.to), panel.from + ' / ' + panel.to);
    // what is still live at the end is leaks' (the panel of a band live at the end)
    const endLive = await page.evaluate(() => window.cmhView.live(0, window.cmhView._n(0) - 1));
    const lk = facts.leaks[0];
    const endBytes = endLive.reduce((x, y) => x + y.size, 0);
    check(`live at the last entry (${endBytes} B) = what leaks says is still live (${lk.live_bytes} B)`, endBytes === lk.live_bytes);
  }

  // keyboard only: tab to the canvas, pick bands with up and down
  await page.keyboard.press('Escape');
  await page.focus('#v-search');
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => document.activeElement && document.activeElement.tagName);
  await page.focus('#v-canvas');
  await page.keyboard.press('ArrowUp');
  await page.keyboard.press('ArrowUp');
  const kb = await page.evaluate(() => [window.cmhView.view.sel, document.querySelector('#v-panel .v-size')?.textContent || '']);
  check(`keyboard: tab moves on from the search box (${focused}); up picks a band and fills the panel`, focused !== 'INPUT' && kb[0] >= 0 && kb[1].includes('bytes'), JSON.stringify(kb));
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('Shift+ArrowLeft');
  await page.keyboard.press('0');
  const fitv = await page.evaluate(() => [window.cmhView.view.x0, window.cmhView.view.x1]);
  check('keyboard: 0 shows the whole record again', fitv[0] === 0 && fitv[1] === pk.trace_entries, JSON.stringify(fitv));

  // the x axis: its labels stay on the canvas.  In entries each tick is at its entry; with t,
  // ticks at even steps of time are evenly spaced, and each lies between the entry at or before
  // its time and the next one, as the page places them (so the bands are spaced by time)
  const axis = async () => page.evaluate(() => {
    const v = window.cmhView, f = v.view.frame, k = v.view.k, n = v._n(k), ctx = document.getElementById('v-canvas').getContext('2d');
    ctx.font = '11px sans-serif';
    const off = t => Math.abs(t.x - (f.timeAxis ? t.x : f.X(t.e))) > 0.01;
    let uneven = 0, misplaced = 0;
    if (f.timeAxis) {
      for (let i = 2; i < f.ticks.length; i++) if (Math.abs((f.ticks[i].x - f.ticks[i - 1].x) - (f.ticks[i - 1].x - f.ticks[i - 2].x)) > 0.01) uneven++;
      for (const t of f.ticks) {
        let e = 0; while (e + 1 < n && v.time(k, e + 1) <= t.t) e++;
        if (!(f.X(e) <= t.x + 0.5 && (e + 1 >= n || f.X(e + 1) >= t.x - 0.5))) misplaced++;
      }
    }
    return { time: f.timeAxis, n: f.ticks.length, clipped: f.ticks.filter(t => t.x + ctx.measureText(t.label).width / 2 > f.W || t.x - ctx.measureText(t.label).width / 2 < 0).length,
      wrong: f.ticks.filter(t => off(t) || t.label !== (f.timeAxis ? (t.t / 1e6).toFixed(t.label.split('.')[1]?.length || 0) : String(t.e))).length,
      uneven, misplaced, button: document.getElementById('v-axis').textContent, can: !document.getElementById('v-axis').disabled };
  });
  const ax0 = await axis();
  check(`x axis in entries: ${ax0.n} labels, none past the canvas's edge`, !ax0.time && ax0.n >= 2 && ax0.clipped === 0 && ax0.wrong === 0, JSON.stringify(ax0));
  if (ax0.can) {
    await page.focus('#v-canvas');
    await page.keyboard.press('t');
    await settle(page);
    const ax1 = await axis();
    check(`t: the x axis in time (${ax1.n} labels, "${ax1.button}"), linear in time, each between the entries around its time, none clipped`,
      ax1.time && ax1.n >= 2 && ax1.wrong === 0 && ax1.clipped === 0 && ax1.uneven === 0 && ax1.misplaced === 0, JSON.stringify(ax1));
    await page.keyboard.press('t');
  }

  // search: a site's file highlights its sites and counts them (the device's allocation sites:
  // a free's or an OOM's stack is no site)
  const q = facts.search;
  await page.fill('#v-search', q);
  await settle(page);
  const sr = await page.evaluate(qq => {
    const m = window.cmhView.meta, own = window.cmhView.allocSites(window.cmhView.view.k);
    return [own.filter(i => m.sites[i] && m.sites[i].join(' ').toLowerCase().includes(qq.toLowerCase())).length, document.querySelector('.v-match').textContent,
      document.querySelectorAll('.v-sites tr.v-hit').length];
  }, q);
  check(`search "${q}": ${sr[0]} sites match, said, and their rows marked`, sr[0] > 0 && sr[1].startsWith(sr[0] + ' site') && sr[2] > 0, JSON.stringify(sr));
  await page.fill('#v-search', '');

  // fits the width: nothing wider than the viewport
  const sw = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  check(`${W}px: no horizontal overflow`, sw[0] <= sw[1], JSON.stringify(sw));
  const inked = await page.evaluate(() => {
    const c = document.getElementById('v-canvas'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0; for (let i = 0; i < d.length; i += 16) if (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240) n++;
    return n / (d.length / 16);
  });
  check(`${W}px: the timeline is drawn (${(inked * 100).toFixed(0)}% of the canvas inked)`, inked > 0.05);
  if (process.env.SHOT) await page.screenshot({ path: process.env.SHOT, fullPage: true });
  check(`${W}px: no console error or warning`, errors.length === 0, errors.slice(0, 3).join(' | '));
  check(`${W}px: no request but the page itself`, requests.length === 0, requests.slice(0, 3).join(' '));
  await browser.close();
  console.log(`${passes} passed, ${fails} failed`);
  process.exit(fails ? 1 : 0);
})().catch(e => { console.log('FAIL: ' + e.stack); process.exit(1); });
