/* view.js - the page of `cumemhist view` (and of the report's timeline section).  It only
 * draws: the writer (viz/view.c) did the replay, the sites, the steps and the level-of-detail
 * columns.  Data: a JSON object (#cmh-view-meta) and per device two base64 streams of varints
 * (#cmh-view-dK: allocations, lines, columns, levels; #cmh-view-tK: entry times), read here in
 * the order docs/VIEW.md gives.  No request, no library: one canvas, a panel, a table. */
(function () {
  'use strict';
  var root = document.getElementById('cmh-view');
  var metaEl = document.getElementById('cmh-view-meta');
  if (!root || !metaEl) return;
  var meta = JSON.parse(metaEl.textContent);
  var CP = 4096; /* entries between the page's own checkpoints of the live set */
  var PALETTE = ['#4e79a7', '#f28e2c', '#e15759', '#76b7b2', '#59a14f', '#edc949', '#af7aa1', '#ff9da7',
    '#9c755f', '#bab0ab', '#2f6690', '#d1495b', '#66a182', '#8d6a9f', '#c39f3a', '#3a7ca5'];

  function bytesOf(id) {
    var s = document.getElementById(id).textContent;
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(s); /* where the browser has it: native */
    var bin = atob(s), u = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
    return u;
  }
  function reader(u) {
    var p = 0;
    return {
      v: function () {
        var x = 0, m = 1, c;
        do { c = u[p++]; x += (c & 127) * m; m *= 128; } while (c & 128);
        return x;
      },
      z: function () { var x = this.v(); return x % 2 ? -(x + 1) / 2 : x / 2; }
    };
  }
  function varints(u) { /* every varint of a stream, in one tight loop */
    var a = new Float64Array(u.length), n = 0, x = 0, m = 1;
    for (var i = 0; i < u.length; i++) {
      var c = u[i];
      if (c < 128) { a[n++] = x + c * m; x = 0; m = 1; } else { x += (c - 128) * m; m *= 128; }
    }
    return a;
  }
  function grown(a, n) { if (a.length >= n) return a; var g = new a.constructor(Math.max(n, 2 * a.length)); g.set(a); return g; }

  /* ---- one device's data, decoded on first use ---- */
  function load(k) {
    var m = meta.devices[k];
    if (m.data) return m.data;
    var a = varints(bytesOf('cmh-view-d' + k)), q = 0, z, d = {n: a[q++], na: a[q++]}; /* a[q++]: the next varint */
    var na = d.na, n = d.n, i, prev = 0;
    d.start = new Int32Array(na); d.end = new Int32Array(na); d.size = new Float64Array(na);
    d.stack = new Uint32Array(na); d.site = new Uint32Array(na);
    for (i = 0; i < na; i++) {
      prev += a[q++];
      d.start[i] = prev - 1;
      var life = a[q++];
      d.end[i] = life ? d.start[i] + life : n;
      d.size[i] = a[q++];
      d.stack[i] = a[q++];
      var st = meta.stacks[d.stack[i]];
      d.site[i] = st ? st[0] : 0;
    }
    d.lines = [];
    for (var l = 0; l < 2; l++) {
      var cnt = a[q++], idx = new Int32Array(cnt), val = new Float64Array(cnt), li = 0, lv = 0;
      for (i = 0; i < cnt; i++) { li += a[q++]; lv += ((z = a[q++]) % 2 ? -(z + 1) / 2 : z / 2); idx[i] = li; val[i] = lv; }
      d.lines.push({idx: idx, val: val});
    }
    var ncols = a[q++], col = m.col;
    d.ncols = ncols;
    d.inst = new Int32Array(ncols); d.bandStart = new Uint32Array(ncols + 1); d.foldStart = new Uint32Array(ncols + 1);
    d.amax = new Float64Array(ncols); d.rmax = new Float64Array(ncols);
    /* typed arrays grown as they fill: no million-element JS arrays left for the collector */
    var bands = new Int32Array(16 * ncols + 16), fsite = new Uint32Array(4 * ncols + 16), fbytes = new Float64Array(fsite.length), nbt = 0, nft = 0;
    for (var c = 0; c < ncols; c++) {
      d.inst[c] = c * col + a[q++];
      var nb = a[q++], last = 0;
      d.bandStart[c] = nbt;
      if (nbt + nb > bands.length) bands = grown(bands, nbt + nb);
      for (i = 0; i < nb; i++) { last += a[q++]; bands[nbt++] = last; }
      var nf = a[q++]; last = 0;
      d.foldStart[c] = nft;
      if (nft + nf > fsite.length) { fsite = grown(fsite, nft + nf); fbytes = grown(fbytes, nft + nf); }
      for (i = 0; i < nf; i++) { last += a[q++]; fsite[nft] = last; fbytes[nft++] = a[q++]; }
      d.amax[c] = a[q++]; d.rmax[c] = a[q++];
    }
    d.bandStart[ncols] = nbt; d.foldStart[ncols] = nft;
    d.bands = bands.subarray(0, nbt); d.fsite = fsite.subarray(0, nft); d.fbytes = fbytes.subarray(0, nft);
    var nl = a[q++], lvmap = [null];
    for (l = 0; l < nl; l++) {
      var cn = a[q++], map = new Uint32Array(cn), lst = 0;
      for (i = 0; i < cn; i++) { lst += a[q++]; map[i] = lst; }
      lvmap.push(map);
    }
    d.levels = lvmap;
    /* the band stack's height after each entry */
    var dl = new Float64Array(n + 1);
    for (i = 0; i < na; i++) { dl[Math.max(d.start[i], 0)] += d.size[i]; dl[d.end[i]] -= d.size[i]; }
    d.act = new Float64Array(n);
    var run = 0;
    for (i = 0; i < n; i++) { run += dl[i]; d.act[i] = run; }
    d.k = k;
    m.data = d;
    return d;
  }

  function allocatedAt(d, e) { return e >= 0 && e < d.n ? lineAt(d.lines[0], e) + d.act[e] : 0; } /* stored less the band stack */
  function lineAt(line, e) { /* the value after entry e */
    var lo = 0, hi = line.idx.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (line.idx[mid] <= e) lo = mid + 1; else hi = mid; }
    return lo ? line.val[lo - 1] : 0;
  }
  function firstStartAfter(d, e) {
    var lo = 0, hi = d.na;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (d.start[mid] <= e) lo = mid + 1; else hi = mid; }
    return lo;
  }
  /* the live set every CP entries, made in short slices while the page is idle after the first
   * frame (soon); no frame waits for them: liveAt starts from the latest one made so far */
  function cpSlice(d, until) {
    var j = d.cpj || (d.cpj = {cps: [], live: new Int32Array(256), nl: 0, p: 0, e: 0}), cps = j.cps, live = j.live, nl = j.nl, p = j.p, e = j.e;
    while (e < d.n) {
      var k = 0, i;
      for (i = 0; i < nl; i++) if (d.end[live[i]] > e) live[k++] = live[i];
      nl = k;
      for (; p < d.na && d.start[p] <= e; p++) if (d.end[p] > e) { if (nl >= live.length) live = j.live = grown(live, nl + 1); live[nl++] = p; }
      cps.push(live.slice(0, nl));
      e += CP;
      if (performance.now() > until) break;
    }
    j.nl = nl; j.p = p; j.e = e;
    if (e < d.n) return false;
    d.cps = cps;
    stats.cps = performance.now();
    return true;
  }
  /* every allocation live after entry e, in allocation order (exact): the checkpoint at or
   * before e still live, then what started after it and is live (from the start where none is
   * made yet: one pass, well under a millisecond on a million entries) */
  function liveAt(d, e, maxCps) { /* maxCps: use only the first ones (the tests: every path) */
    var out = [];
    if (!d.n) { /* no trace entries (enabled=state, history off): the cursor stands at the end, and what is live is the end state */
      for (var k = 0; k < d.na; k++) if (d.end[k] >= d.n) out.push(k);
      return out;
    }
    if (e < 0 || e >= d.n) return out;
    var cps = d.cps || (d.cpj ? d.cpj.cps : []), c = Math.min(Math.floor(e / CP), cps.length - 1, maxCps === undefined ? Infinity : maxCps - 1), i;
    if (c < 0) {
      for (i = 0; i < d.na && d.start[i] <= e; i++) if (d.end[i] > e) out.push(i);
      return out;
    }
    var cp = cps[c];
    for (i = 0; i < cp.length; i++) if (d.end[cp[i]] > e) out.push(cp[i]);
    for (i = firstStartAfter(d, c * CP); i < d.na && d.start[i] <= e; i++) if (d.end[i] > e) out.push(i);
    return out;
  }

  /* ---- formatting ---- */
  /* one decimal as the reports print it (C's %.1f): a tie goes to the even digit, so 13.25 MiB
   * reads 13.2 MiB here too (toFixed gave 13.3 beside peak's 13.2) */
  function fixed1(x) {
    var y = Math.abs(x) * 10, f = Math.floor(y), r = y - f === 0.5 ? (f % 2 ? f + 1 : f) : Math.round(y);
    return (x < 0 ? '-' : '') + (r / 10).toFixed(1);
  }
  function size(b) {
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], x = b, i = 0;
    while (Math.abs(x) >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return (i ? fixed1(x) : String(x)) + ' ' + u[i];
  }
  /* each entry's time: decoded in slices while the page is idle after the first frame
   * (soon), or at once where one is needed first (the time axis) */
  function timeJob(d) {
    if (!d.tjob) { var r = reader(bytesOf('cmh-view-t' + d.k)), nt = r.v(); d.tjob = {r: r, t: new Float64Array(nt), i: 0, v: 0}; }
    return d.tjob;
  }
  function timeSlice(d, until) { /* decode until the clock passes until; true once all are */
    var j = timeJob(d), t = j.t, r = j.r, i = j.i, v = j.v, nt = t.length;
    while (i < nt) {
      for (var k = Math.min(nt, i + 8192); i < k; i++) { v += r.z(); t[i] = v; }
      if (performance.now() > until) break;
    }
    j.i = i; j.v = v;
    if (i < nt) return false;
    d.time = t;
    return true;
  }
  function times(d) { if (!d.time) timeSlice(d, Infinity); return d.time; }
  /* a fractional entry's time: entry i spans its time to the next entry's (the last, none) */
  function timeOf(tt, e) {
    var n = tt.length, i = Math.max(0, Math.min(Math.floor(e), n - 1)), a = tt[i];
    return i + 1 < n ? a + Math.max(0, Math.min(e - i, 1)) * (tt[i + 1] - a) : a;
  }
  function entryOfTime(tt, t) { /* its inverse: the last entry at or before t, and how far on */
    var lo = 0, hi = tt.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (tt[mid] <= t) lo = mid + 1; else hi = mid; }
    var i = lo - 1;
    if (i < 0) return 0;
    if (i + 1 >= tt.length || tt[i + 1] <= tt[i]) return i + (i + 1 >= tt.length ? 1 : 0);
    return i + (t - tt[i]) / (tt[i + 1] - tt[i]);
  }
  /* The painting code run once over on small images while the page is idle after the first
   * frame, at the zooms and places a user goes first (the whole record down to single entries,
   * around the peak), so that the script engine has compiled it before the first zoom or pan
   * needs it: a frame of code not compiled yet took 20-30 ms, the same compiled 1-3 ms. */
  var WARM_W = 160, WARM_H = 64;
  function warmSlice(d, until) {
    var w = d.warm;
    if (!w) {
      var m = meta.devices[d.k], at = m.peak && m.peak.index > 0 ? m.peak.index : d.n / 2, views = [], k, r;
      for (r = 0; r < 3; r++) for (k = 0; k < 10; k++) {
        var width = Math.max(8, d.n / Math.pow(4, k)), mid = at + (r - 1) * width / 8;
        views.push([Math.max(0, Math.min(mid - width / 2, d.n - width)), Math.min(d.n, Math.max(mid - width / 2, 0) + width)]);
        if (width <= 8) break;
      }
      w = d.warm = {i: 0, views: views, buf: new Uint32Array(WARM_W * WARM_H), rows: new Uint32Array(WARM_W * WARM_H)};
    }
    while (w.i < w.views.length) {
      var v = w.views[w.i++], cols = columnsFor(d, WARM_W, v[0], v[1]), ymax = 1;
      for (var i = 0; i < cols.length; i++) ymax = Math.max(ymax, cols[i].top);
      paint(d, cols, ymax / WARM_H, w.buf, WARM_W, WARM_H, WARM_H / ymax, function (e) { return Math.floor((e - v[0]) * WARM_W / (v[1] - v[0])); });
      transpose(w.buf, w.rows, WARM_W, WARM_H);
      if (performance.now() > until) break;
    }
    if (w.i < w.views.length) return false;
    stats.warm = performance.now();
    return true;
  }
  function soon(d) { /* the warm-up, the checkpoints, then the entry times, while the page is idle */
    if (d.soon) return;
    d.soon = true;
    var idle = window.requestIdleCallback || function (f) { return setTimeout(function () { f({timeRemaining: function () { return 4; }}); }, 30); };
    (function step(dl) { /* slices of at most 4 ms, so that an input waits no longer behind one */
      var until = performance.now() + Math.max(1, Math.min(dl.timeRemaining(), 4));
      if (d.n && !(d.warm && d.warm.i >= d.warm.views.length)) {
        if (warmSlice(d, until) && view.k === d.k && !pending) { draw(); stats.frames.pop(); } /* and the frame's own code once more, the same view (not a frame anyone asked for: not counted) */
        idle(step); return;
      }
      if (!d.cps) { cpSlice(d, until); idle(step); return; }
      if (!meta.origin_ns || d.time) return;
      if (!timeSlice(d, until)) idle(step);
      else if (view.k === d.k) { siteTable(); request(); }
    })({timeRemaining: function () { return 0; }});
  }
  function when(d, e) {
    if (!d.n) return 'the end state: no trace entries';
    if (e < 0) return 'before the first entry';
    if (e >= d.n) return 'after the last entry';
    var s = 'entry ' + e, t = meta.origin_ns && d.time ? d.time : null;
    if (t && t.length > e) s += ' (+' + (t[e] / 1e6).toFixed(6) + ' s)';
    return s;
  }
  var pixels = new Uint32Array(4 * meta.sites.length + 8); /* 0: not made yet (every colour is opaque) */
  function pixel(site, fold, dim) { /* a site's colour as one RGBA word, blended on white */
    var k = site * 4 + (fold ? 1 : 0) + (dim ? 2 : 0), v = pixels[k];
    if (v) return v;
    var h = colorOf(site), a = dim ? 0.12 : fold ? 0.55 : 1, c = [1, 3, 5].map(function (o) { return Math.round(parseInt(h.substr(o, 2), 16) * a + 255 * (1 - a)); });
    return (pixels[k] = ((255 << 24) | (c[2] << 16) | (c[1] << 8) | c[0]) >>> 0);
  }
  function siteName(s) { var x = meta.sites[s]; return x ? x[0] : '?'; }
  function colorOf(s) { var h = (s * 2654435761) >>> 0; return PALETTE[h % PALETTE.length]; }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  /* ---- the page ---- */
  var ui = {};
  root.appendChild(ui.bar = el('div', 'v-bar'));
  var devLabel = el('label', 'v-dev', 'Device ');
  ui.dev = el('select'); ui.dev.id = 'v-device';
  meta.devices.forEach(function (m, k) {
    var o = el('option', null, m.device < 0 ? 'pinned host' : String(m.device)); o.value = k; ui.dev.appendChild(o);
  });
  devLabel.appendChild(ui.dev); ui.bar.appendChild(devLabel);
  var sLabel = el('label', 'v-search', 'Search ');
  ui.search = el('input'); ui.search.type = 'search'; ui.search.id = 'v-search'; ui.search.placeholder = 'site, function or file';
  sLabel.appendChild(ui.search); ui.bar.appendChild(sLabel);
  function button(text, title, fn) { var b = el('button', null, text); b.type = 'button'; b.title = title; b.addEventListener('click', fn); ui.bar.appendChild(b); return b; }
  button('+', 'zoom in (+)', function () { zoomBy(0.5, view.cursor); });
  button('\u2212', 'zoom out (-)', function () { zoomBy(2, view.cursor); });
  button('Fit', 'the whole record (0)', function () { fit(); });
  button('Peak', 'the allocated peak (p)', function () { gotoPeak(); });
  ui.axis = button('Axis: entries', 'the x axis in entries or in time (t)', function () { toggleAxis(); });
  ui.axis.id = 'v-axis'; ui.axis.setAttribute('aria-pressed', 'false');
  if (!meta.origin_ns) ui.axis.disabled = true;
  function toggleAxis() {
    if (!meta.origin_ns) return;
    view.timeAxis = !view.timeAxis;
    ui.axis.textContent = view.timeAxis ? 'Axis: time' : 'Axis: entries'; ui.axis.setAttribute('aria-pressed', String(view.timeAxis));
    request();
  }
  ui.match = el('span', 'v-match'); ui.bar.appendChild(ui.match);
  /* a trace that stops before its snapshot: said above the timeline while its end is in sight */
  root.appendChild(ui.gap = el('p', 'v-gap')); ui.gap.id = 'v-gap'; ui.gap.hidden = true;
  root.appendChild(ui.wrap = el('div', 'v-plot'));
  ui.canvas = el('canvas'); ui.canvas.tabIndex = 0; ui.canvas.id = 'v-canvas';
  ui.canvas.setAttribute('role', 'application');
  ui.canvas.setAttribute('aria-label', 'Active memory timeline: arrows move the cursor, up and down pick a band, + and - zoom, shift+arrows pan');
  ui.wrap.appendChild(ui.canvas);
  ui.tip = el('div', 'v-tip'); ui.tip.hidden = true; ui.wrap.appendChild(ui.tip);
  root.appendChild(ui.status = el('p', 'v-status'));
  ui.status.setAttribute('aria-live', 'polite');
  var cols = el('div', 'v-cols'); root.appendChild(cols);
  ui.panel = el('div', 'v-panel'); ui.panel.id = 'v-panel'; cols.appendChild(ui.panel);
  ui.panel.appendChild(el('p', 'v-hint', 'Click a band (or move the cursor with the arrow keys and pick a band with up and down) for its stack and life.'));
  var tw = el('div', 'v-sites'); cols.appendChild(tw);
  tw.appendChild(ui.sitesHead = el('h3', null, 'Live at the cursor'));
  ui.sitesWrap = el('div', 'v-twrap'); tw.appendChild(ui.sitesWrap);

  var view = {k: 0, x0: 0, x1: 1, cursor: 0, sel: -1, selPos: -1, query: '', frame: null, drag: null, timeAxis: false};
  var stats = {frames: []};
  var dpr = window.devicePixelRatio || 1;
  var PADL = 64, PADB = 22, PADT = 16;

  function dev() { return load(view.k); }
  function fit() { var d = dev(); view.x0 = 0; view.x1 = Math.max(d.n, 1); request(); }
  function clampView() {
    var d = dev(), n = Math.max(d.n, 1), w = view.x1 - view.x0;
    if (w > n) w = n;
    if (w < 8) w = Math.min(8, n);
    if (view.x0 < 0) view.x0 = 0;
    if (view.x0 + w > n) view.x0 = n - w;
    view.x1 = view.x0 + w;
  }
  function zoomBy(f, at) {
    if (at === undefined || at < view.x0 || at > view.x1) at = (view.x0 + view.x1) / 2;
    var tt = view.frame && view.frame.tt;
    if (tt) { /* on the time axis, the span of time scales about the time at the point */
      var ta = timeOf(tt, at), t0 = timeOf(tt, view.x0), t1 = timeOf(tt, view.x1);
      view.x0 = entryOfTime(tt, ta - (ta - t0) * f); view.x1 = entryOfTime(tt, ta + (t1 - ta) * f);
    } else { view.x0 = at - (at - view.x0) * f; view.x1 = at + (view.x1 - at) * f; }
    clampView(); request();
  }
  function pan(dx) { view.x0 += dx; view.x1 += dx; clampView(); request(); }
  function gotoPeak() {
    var m = meta.devices[view.k], d = dev();
    if (!m.peak || !d.n) return;
    var e = Math.max(m.peak.index, 0), w = Math.min(Math.max(d.n / 50, 64), d.n);
    view.x0 = e - w / 2; view.x1 = e + w / 2; clampView();
    setCursor(e);
  }
  function setCursor(e) {
    var d = dev();
    view.cursor = Math.max(0, Math.min(Math.round(e), d.n - 1));
    if (view.cursor < view.x0 || view.cursor >= view.x1) { var w = view.x1 - view.x0; view.x0 = view.cursor - w / 2; view.x1 = view.x0 + w; clampView(); }
    siteTable(); request();
  }

  var pending = false;
  var dirty = false; /* a change not drawn yet: a frame drawn at once (draw()) leaves the queued one nothing to do */
  function request() { dirty = true; if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; if (dirty) draw(); }); } }

  /* a kept column's bands as [key, bottom, bytes] triples, made when asked (hover, outline) */
  function bandsOf(d, c) {
    if (c.bands) return c.bands;
    if (c.s0 < 0) return (c.bands = fineBands(d, c.e, c.thr));
    var b = [], off = 0, i, s0 = c.s0;
    for (i = d.bandStart[s0]; i < d.bandStart[s0 + 1]; i++) { var id = d.bands[i]; b.push(id, off, d.size[id]); off += d.size[id]; }
    for (i = d.foldStart[s0]; i < d.foldStart[s0 + 1]; i++) { b.push(-1 - d.fsite[i], off, d.fbytes[i]); off += d.fbytes[i]; }
    return (c.bands = b);
  }

  /* The columns of the frame: for each, its x range in px, the instant it shows, and its bands
   * (allocation id, bottom and height in bytes) then its folded sites (-1 - site). */
  function columnsFor(d, pw, x0, x1) {
    var epp = 2 * (x1 - x0) / pw, col = meta.devices[d.k].col, out = [], c, i;
    if (epp >= col && d.ncols) {
      var L = Math.max(0, Math.min(Math.ceil(Math.log2(epp / col)), d.levels.length - 1)), w = col * Math.pow(2, L);
      var c0 = Math.max(0, Math.floor(x0 / w)), c1 = Math.min(Math.ceil(x1 / w), L ? d.levels[L].length : d.ncols);
      for (c = c0; c < c1; c++) {
        var s0 = L ? d.levels[L][c] : c, lo = Math.max(c * w, 0), hi = Math.min((c + 1) * w, d.n);
        out.push({e: d.inst[s0], a: lo, b: hi, s0: s0, bands: null, thr: 0, top: d.act[d.inst[s0]], amax: d.amax[s0], rmax: d.rmax[s0]});
      }
      return out;
    }
    /* fine: the exact stack at the highest instant of each pixel column, swept and painted in
     * draw() (paintFine) without a band list per column; bandsOf() makes one when asked */
    var step = Math.max(epp, 1), first = Math.max(0, Math.floor(x0));
    for (var x = first; x < x1 && x < d.n; x += step) {
      var a = Math.floor(x), bnd = Math.min(Math.floor(x + step), d.n), best = a;
      if (bnd <= a) bnd = a + 1;
      for (i = a + 1; i < bnd; i++) if (d.act[i] > d.act[best]) best = i;
      out.push({e: best, a: a, b: bnd, s0: -1, bands: null, thr: 0, top: d.act[best], amax: allocatedAt(d, best), rmax: lineAt(d.lines[1], best)});
    }
    out.fine = true;
    return out;
  }

  /* the bands of the exact stack at entry e, as [key, bottom, bytes] triples: allocations of at
   * least thr bytes in allocation order, then the thinner ones folded per site, sites ascending
   * (the order paintFine paints them in) */
  function fineBands(d, e, thr) {
    var live = liveAt(d, e), b = [], o = 0, by = new Map(), i;
    for (i = 0; i < live.length; i++) {
      var id = live[i], sz = d.size[id];
      if (sz >= thr) { b.push(id, o, sz); o += sz; } else by.set(d.site[id], (by.get(d.site[id]) || 0) + sz);
    }
    Array.from(by.keys()).sort(function (x, y) { return x - y; }).forEach(function (s) { b.push(-1 - s, o, by.get(s)); o += by.get(s); });
    return b;
  }

  /* Paint the fine columns in one sweep from the first column's instant to the last's, each
   * column's stack painted as it is reached, with nothing allocated per column.  Allocations of
   * at least thr bytes (drawn one by one) are kept in a list in allocation order; the thinner
   * ones are only added to and taken from their site's folded bytes as they start and end, so a
   * column costs its drawn bands and live sites, not the whole live set. */
  var sweep = {big: new Int32Array(256), fold: null, cnt: null, act: null, head: null, next: null, cand: null};
  function paintFine(d, colsF, thr, buf, PWd, PHd, syd, x2d) {
    var C = colsF.length;
    if (!C) return;
    var nS = meta.sites.length + 1, size = d.size, end = d.end, start = d.start, site = d.site, i, c, s, id;
    if (!sweep.fold || sweep.fold.length < nS) { sweep.fold = new Float64Array(nS); sweep.cnt = new Int32Array(nS); sweep.act = new Int32Array(nS); }
    var fold = sweep.fold, cnt = sweep.cnt, act = sweep.act, na = 0; /* act[0..na): live sites, ascending */
    fold.fill(0); cnt.fill(0);
    var head = sweep.head = grown(sweep.head || new Int32Array(1024), C + 1), nxt, cand, nc = 0;
    head.fill(-1, 0, C + 1);
    var ce = sweep.ce = grown(sweep.ce || new Int32Array(1024), C);
    for (c = 0; c < C; c++) ce[c] = colsF[c].e;
    var eLast = ce[C - 1];
    function colOf(e) { var lo = 0, hi = C; while (lo < hi) { var m = (lo + hi) >> 1; if (ce[m] >= e) hi = m; else lo = m + 1; } return lo; }
    var big = sweep.big, nb = 0, nextEnd = Infinity;
    cand = sweep.cand = grown(sweep.cand || new Int32Array(1024), 64); nxt = sweep.next = grown(sweep.next || new Int32Array(1024), 64);
    function addSmall(x) { /* x joins its site's fold; queued to leave at the first column it is not live at */
      var st = site[x];
      fold[st] += size[x];
      if (cnt[st]++ === 0) { var lo = 0, hi = na; while (lo < hi) { var m = (lo + hi) >> 1; if (act[m] < st) lo = m + 1; else hi = m; } act.copyWithin(lo + 1, lo, na); act[lo] = st; na++; }
      if (end[x] <= eLast) {
        var cc = colOf(end[x]);
        if (nc >= cand.length) { cand = sweep.cand = grown(cand, nc + 1); nxt = sweep.next = grown(nxt, nc + 1); }
        cand[nc] = x; nxt[nc] = head[cc]; head[cc] = nc++;
      }
    }
    var l0 = liveAt(d, ce[0]);
    for (i = 0; i < l0.length; i++) {
      id = l0[i];
      if (size[id] >= thr) { if (nb >= big.length) big = sweep.big = grown(big, nb + 1); big[nb++] = id; if (end[id] < nextEnd) nextEnd = end[id]; }
      else addSmall(id);
    }
    var p = firstStartAfter(d, ce[0]), dim = !!view.query, sel = view.sel, selAt = colsF.sel;
    for (c = 0; c < C; c++) {
      var col = colsF[c], e = ce[c];
      if (c) {
        for (var h = head[c]; h >= 0; h = nxt[h]) { /* thin ones that ended */
          id = cand[h]; s = site[id]; fold[s] -= size[id];
          if (--cnt[s] === 0) { var lo = 0, hi = na; while (lo < hi) { var m = (lo + hi) >> 1; if (act[m] < s) lo = m + 1; else hi = m; } act.copyWithin(lo, lo + 1, na); na--; }
        }
        for (; p < d.na && start[p] <= e; p++) {
          if (end[p] <= e) continue; /* born and gone between two columns */
          if (size[p] >= thr) { if (nb >= big.length) big = sweep.big = grown(big, nb + 1); big[nb++] = p; if (end[p] < nextEnd) nextEnd = end[p]; }
          else addSmall(p);
        }
        if (nextEnd <= e) { /* a drawn one ended: drop what did */
          var k = 0; nextEnd = Infinity;
          for (i = 0; i < nb; i++) { var q = big[i], en = end[q]; if (en > e) { big[k++] = q; if (en < nextEnd) nextEnd = en; } }
          nb = k;
        }
      }
      col.thr = thr;
      var xa = x2d(col.a), xb = x2d(col.b);
      if (xb <= xa) xb = xa + 1;
      if (xa < 0) xa = 0;
      if (xb > PWd) xb = PWd;
      if (xa < xb && lower(xa, col.top)) xa++;
      if (xa >= xb) continue;
      if (tops[xa] >= 0) buf.fill(0xffffffff, xa * PHd, xa * PHd + PHd);
      painted(xa, xb, col.top);
      var row = xa * PHd, off = 0, yb, yt, px, o2, oe, q2, bytes;
      for (i = 0; i < nb + na; i++) {
        if (i < nb) { id = big[i]; bytes = size[id]; s = site[id]; px = pixel(s, false, dim && !matches(s)); if (id === sel) selAt.push(c, off, bytes); }
        else { s = act[i - nb]; bytes = fold[s]; px = pixel(s, true, dim && !matches(s)); }
        yb = Math.round(PHd - off * syd); yt = Math.round(PHd - (off + bytes) * syd);
        off += bytes;
        if (yb <= yt) { if (bytes * syd < 0.5) continue; yb = yt + 1; }
        if (yt < 0) yt = 0;
        if (yb > PHd) yb = PHd;
        o2 = row + yt; oe = row + yb;
        if (oe - o2 <= 8) for (; o2 < oe; o2++) buf[o2] = px; else buf.fill(px, o2, oe);
      }
      for (q2 = xa + 1; q2 < xb; q2++) buf.copyWithin(q2 * PHd, row, row + PHd);
    }
  }

  /* Paint a frame's columns into buf (column by column, PHd words a pixel column), x2d giving
   * an entry's pixel column: the fine ones in one sweep (paintFine), the writer's kept columns
   * one by one from their band and fold lists. */
  var tops = new Float64Array(0);
  /* a pixel column already holds a column at least as high (columns narrower than a pixel, on
   * the time axis where entries come in bursts): leave it, so a peak is never painted over */
  function lower(xa, top) { return tops[xa] >= top; }
  function painted(xa, xb, top) { for (var q = xa; q < xb; q++) tops[q] = top; }
  function paint(d, colsF, thr, buf, PWd, PHd, syd, x2d) {
    var i, j;
    buf.fill(0xffffffff);
    if (tops.length < PWd) tops = new Float64Array(PWd);
    tops.fill(-1, 0, PWd);
    colsF.sel = [];
    if (colsF.fine) { paintFine(d, colsF, thr, buf, PWd, PHd, syd, x2d); return; }
    for (i = 0; i < colsF.length; i++) {
      var c = colsF[i], xa = x2d(c.a), xb = x2d(c.b), b = c.bands;
      if (xb <= xa) xb = xa + 1;
      if (xa < 0) xa = 0;
      if (xb > PWd) xb = PWd;
      if (xa < xb && lower(xa, c.top)) xa++;
      if (xa >= xb) continue;
      if (tops[xa] >= 0) buf.fill(0xffffffff, xa * PHd, xa * PHd + PHd);
      painted(xa, xb, c.top);
      var off = 0, nb = b ? b.length / 3 : d.bandStart[c.s0 + 1] - d.bandStart[c.s0], nf = b ? 0 : d.foldStart[c.s0 + 1] - d.foldStart[c.s0];
      for (j = 0; j < nb + nf; j++) {
        var key, bytes;
        if (b) { key = b[3 * j]; bytes = b[3 * j + 2]; }
        else if (j < nb) { key = d.bands[d.bandStart[c.s0] + j]; bytes = d.size[key]; }
        else { key = -1 - d.fsite[d.foldStart[c.s0] + j - nb]; bytes = d.fbytes[d.foldStart[c.s0] + j - nb]; }
        var yb = Math.round(PHd - off * syd), yt = Math.round(PHd - (off + bytes) * syd);
        off += bytes;
        if (yb <= yt) { if (bytes * syd < 0.5) continue; yb = yt + 1; }
        if (yt < 0) yt = 0;
        if (yb > PHd) yb = PHd;
        var site = key < 0 ? -1 - key : d.site[key], px = pixel(site, key < 0, view.query ? !matches(site) : false), y;
        var o2 = xa * PHd + yt, oe = xa * PHd + yb;
        if (oe - o2 <= 8) for (; o2 < oe; o2++) buf[o2] = px; else buf.fill(px, o2, oe);
      }
      for (var q2 = xa + 1; q2 < xb; q2++) buf.copyWithin(q2 * PHd, xa * PHd, xa * PHd + PHd);
    }
  }

  var matchOf = {q: null, m: null};
  function matches(site) {
    if (!view.query) return true;
    if (matchOf.q !== view.query) {
      matchOf.q = view.query; matchOf.m = new Uint8Array(meta.sites.length);
      for (var i = 0; i < meta.sites.length; i++) matchOf.m[i] = meta.sites[i].join(' ').toLowerCase().indexOf(view.query) >= 0 ? 1 : 0;
    }
    return matchOf.m[site] === 1;
  }

  function draw() {
    var t0 = performance.now(), d = dev(), cv = ui.canvas;
    dirty = false;
    var W = Math.max(ui.wrap.clientWidth, 200), H = W < 600 ? 300 : 380;
    if (cv.width !== Math.round(W * dpr) || cv.height !== Math.round(H * dpr)) {
      cv.width = Math.round(W * dpr); cv.height = Math.round(H * dpr); cv.style.width = W + 'px'; cv.style.height = H + 'px';
    }
    var ctx = cv.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, H);
    /* the y axis's labels fit left of the plot at any width ('1000.0 MiB' the widest: at 48 px a
     * narrow page cut '953.7 MiB' to '3.7 MiB') */
    ctx.font = '11px sans-serif';
    var padl = Math.max(W < 600 ? 0 : PADL, Math.ceil(ctx.measureText('1000.0 MiB').width) + 10), pw = W - padl - 8, ph = H - PADB - PADT;
    if (!d.n) {
      ctx.fillStyle = '#5b6475'; ctx.font = '13px sans-serif';
      ctx.fillText('No trace entries: only the end state was recorded.', 8, PADT + 20);
      view.frame = null; return;
    }
    var colsF = columnsFor(d, pw, view.x0, view.x1), ymax = 1, i, j;
    for (i = 0; i < colsF.length; i++) ymax = Math.max(ymax, colsF[i].top, colsF[i].rmax, colsF[i].amax);
    ymax *= 1.05;
    /* x: entries, spaced evenly, or (the time axis) each entry where its time is, spaced linearly
     * in time; the frame keeps its own x0 and scale, for what reads it later (hover, tests) */
    var sx = pw / (view.x1 - view.x0), sy = ph / ymax, vx0 = view.x0, tt = view.timeAxis && meta.origin_ns ? times(d) : null, T0 = 0, sxT = 0;
    if (tt) { T0 = timeOf(tt, vx0); sxT = pw / (timeOf(tt, view.x1) - T0); if (!(sxT < Infinity)) tt = null; }
    function X(e) { return tt ? padl + (timeOf(tt, e) - T0) * sxT : padl + (e - vx0) * sx; }
    function Y(b) { return PADT + ph - b * sy; }
    /* bands: painted into an image of the plot (cost: the plot's pixels and bands, however many
     * allocations), then the lines and marks on top with the canvas's own strokes.  The image is
     * stored column by column (a pixel column is one row of it), so a band in a column is one
     * run of words (one fill), and a column two pixels wide a copy of the first; the canvas
     * draws it transposed. */
    var PWd = Math.max(1, Math.round(pw * dpr)), PHd = Math.max(1, Math.round(ph * dpr));
    if (!view.img || view.img.width !== PWd || view.img.height !== PHd) {
      view.buf = new Uint32Array(PWd * PHd); /* column by column */
      view.img = ctx.createImageData(PWd, PHd); view.rows = new Uint32Array(view.img.data.buffer); /* row by row */
    }
    var buf = view.buf, hl = view.sel, syd = sy * dpr;
    paint(d, colsF, ymax / ph, buf, PWd, PHd, syd, function (e) { return Math.floor((X(e) - padl) * dpr); });
    transpose(buf, view.rows, PWd, PHd);
    ctx.putImageData(view.img, Math.round(padl * dpr), Math.round(PADT * dpr));
    ctx.save();
    ctx.beginPath(); ctx.rect(padl, PADT, pw, ph); ctx.clip();
    /* the selected band outlined where it is drawn */
    if (hl >= 0) {
      ctx.strokeStyle = '#000'; ctx.lineWidth = 1.5;
      if (colsF.fine) for (i = 0; i < colsF.sel.length; i += 3) { /* where the sweep drew it */
        var sc = colsF[colsF.sel[i]];
        ctx.strokeRect(X(sc.a), Y(colsF.sel[i + 1] + colsF.sel[i + 2]), X(sc.b) - X(sc.a), colsF.sel[i + 2] * sy);
      }
      else for (i = 0; i < colsF.length; i++) {
        if (colsF[i].e < d.start[hl] || colsF[i].e >= d.end[hl]) continue;
        var bb = bandsOf(d, colsF[i]);
        for (j = 0; j < bb.length; j += 3) if (bb[j] === hl) ctx.strokeRect(X(colsF[i].a), Y(bb[j + 1] + bb[j + 2]), X(colsF[i].b) - X(colsF[i].a), bb[j + 2] * sy);
      }
    }
    /* allocated and reserved lines */
    [['amax', '#1d2129'], ['rmax', '#d1495b']].forEach(function (ln) {
      ctx.strokeStyle = ln[1]; ctx.lineWidth = 1.2; ctx.beginPath();
      for (var q = 0; q < colsF.length; q++) {
        var yy = Y(colsF[q][ln[0]]);
        if (q) ctx.lineTo(X(colsF[q].a), yy); else ctx.moveTo(X(colsF[q].a), yy);
        ctx.lineTo(X(colsF[q].b), yy);
      }
      ctx.stroke();
    });
    /* steps, marks, annotations, OOMs, the peak, the cursor */
    var m = meta.devices[view.k];
    ctx.font = '11px sans-serif';
    ctx.strokeStyle = '#9aa3b2'; ctx.setLineDash([3, 3]); ctx.lineWidth = 1;
    var lastLabel = -1e9;
    (m.steps || []).forEach(function (e, q) {
      if (e < view.x0 || e > view.x1) return;
      var x = X(e); ctx.beginPath(); ctx.moveTo(x, PADT); ctx.lineTo(x, PADT + ph); ctx.stroke();
      var lab = (m.steps_label || 'step') + ' ' + q;
      if (x > lastLabel) { ctx.fillStyle = '#5b6475'; ctx.fillText(lab, x + 2, PADT + 10); lastLabel = x + ctx.measureText(lab).width + 8; }
    });
    /* threads racing: leaks judges by each thread's own steps, drawn thread by thread (their
     * labels on rows of their own), and the page says so (the steps line leaks writes) */
    (m.thread_steps || []).forEach(function (ts, r) {
      var colr = ['#3b7dd8', '#d8873b', '#3bd87d', '#a03bd8'][r % 4], lastT = -1e9;
      ctx.strokeStyle = colr;
      ts.points.forEach(function (e, q) {
        if (e < view.x0 || e > view.x1) return;
        var x = X(e); ctx.beginPath(); ctx.moveTo(x, PADT); ctx.lineTo(x, PADT + ph); ctx.stroke();
        var lab = ts.label + ' step ' + q;
        if (x > lastT) { ctx.fillStyle = colr; ctx.fillText(lab, x + 2, PADT + 10 + 12 * (r + 1)); lastT = x + ctx.measureText(lab).width + 8; }
      });
    });
    if (m.steps_note) { /* the whole sentence where it fits, else as much as fits and an ellipsis */
      var note = m.steps_note;
      while (note.length > 20 && ctx.measureText(note).width > pw - 8) note = note.slice(0, Math.floor(note.length * 0.9)) + '\u2026';
      ctx.fillStyle = '#5b6475'; ctx.fillText(note, padl + 4, PADT + 10);
    }
    ctx.setLineDash([]);
    var lastEv = -1e9, evLabels = [];
    (m.events || []).forEach(function (ev) {
      if (ev.i < view.x0 || ev.i > view.x1) return;
      var x = X(ev.i + 0.5), oom = ev.kind === 'oom';
      ctx.strokeStyle = oom ? '#c0392b' : ev.kind === 'mark' ? '#7b4fa0' : 'rgba(123,79,160,0.35)'; ctx.lineWidth = oom ? 2 : 1;
      ctx.beginPath(); ctx.moveTo(x, PADT); ctx.lineTo(x, PADT + ph); ctx.stroke();
      var lab = oom ? 'OOM ' + size(ev.size) : ev.label;
      if (oom || x > lastEv) {
        ctx.fillStyle = oom ? '#c0392b' : '#7b4fa0';
        /* right of its line, or left of it where the plot's edge would cut it ('OOM 3' for 'OOM 300.0 MiB') */
        var lw = ctx.measureText(lab).width, lx = x + 3 + lw > padl + pw ? Math.max(padl, x - 3 - lw) : x + 3;
        ctx.fillText(lab, lx, PADT + ph - 4 - (oom ? 12 : 0)); lastEv = x + lw + 8;
        evLabels.push({text: lab, x: lx, w: lw});
      }
    });
    if (m.peak && m.peak.index >= view.x0 && m.peak.index <= view.x1) {
      var px = X(m.peak.index + 0.5), py = Y(m.peak.bytes);
      ctx.fillStyle = '#1d2129'; ctx.beginPath(); ctx.moveTo(px, py - 2); ctx.lineTo(px - 5, py - 10); ctx.lineTo(px + 5, py - 10); ctx.fill();
      ctx.fillText('peak ' + size(m.peak.bytes), Math.min(px + 7, padl + pw - 90), Math.max(py - 4, PADT + 10));
    }
    if (view.cursor >= view.x0 && view.cursor <= view.x1) {
      var cx = X(view.cursor + 0.5); ctx.strokeStyle = '#2d6fe8'; ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(cx, PADT); ctx.lineTo(cx, PADT + ph); ctx.stroke();
    }
    ctx.restore();
    /* axes */
    ctx.fillStyle = '#5b6475'; ctx.strokeStyle = '#c8ccd4'; ctx.lineWidth = 1; ctx.font = '11px sans-serif';
    var ystep = Math.max(1, niceBytes(ymax / 5)), yticks = []; /* bytes come whole: no 0.2 B tick */
    ctx.textAlign = 'right';
    for (var v = 0; v <= ymax; v += ystep) { yticks.push(v); var yv = Y(v); ctx.beginPath(); ctx.moveTo(padl - 4, yv); ctx.lineTo(padl, yv); ctx.stroke(); ctx.fillText(size(v), padl - 6, yv + 4); }
    /* the x axis: entries, or (t) seconds from the record's first event at even steps of time;
     * a label that would run past the canvas's edge is left out */
    ctx.textAlign = 'center';
    var ticks = [], timeAxis = !!tt, lastX = -1e9, nt = Math.max(2, Math.floor(pw / 90)), es = [], e3, dec = 0;
    if (tt) {
      var T1 = T0 + pw / sxT, tstep = nice((T1 - T0) / nt);
      dec = Math.max(0, Math.min(6, Math.ceil(-Math.log10(tstep / 1e6))));
      for (e3 = Math.ceil(T0 / tstep) * tstep; e3 <= T1; e3 += tstep) es.push(e3);
    } else {
      var xstep = nice((view.x1 - view.x0) / nt);
      for (e3 = Math.ceil(view.x0 / xstep) * xstep; e3 <= view.x1; e3 += xstep) if (Math.round(e3) < d.n) es.push(Math.round(e3));
    }
    for (i = 0; i < es.length; i++) {
      var lab = tt ? (es[i] / 1e6).toFixed(dec) : String(es[i]), xv = tt ? padl + (es[i] - T0) * sxT : X(es[i]), hw = ctx.measureText(lab).width / 2 + 2;
      if (xv - hw < lastX || xv + hw > W) continue;
      ctx.beginPath(); ctx.moveTo(xv, PADT + ph); ctx.lineTo(xv, PADT + ph + 4); ctx.stroke();
      ctx.fillText(lab, xv, PADT + ph + 15); lastX = xv + hw + 4;
      ticks.push(tt ? {t: es[i], x: xv, label: lab} : {e: es[i], x: xv, label: lab});
    }
    ctx.textAlign = 'left';
    ctx.fillText(timeAxis ? 's' : 'entry', 4, H - 4);
    view.frame = {cols: colsF, X: X, Y: Y, sx: sx, sy: sy, padl: padl, pw: pw, ph: ph, W: W, ticks: ticks, timeAxis: timeAxis,
      tt: tt, T0: T0, sxT: sxT, x0: vx0, yticks: yticks, evLabels: evLabels};
    /* the entries in sight, first and last (the window's right edge is the end of its last) */
    var gapNote = m.gap_note && Math.ceil(view.x1) >= d.n ? 'Note: ' + m.gap_note : ''; /* the trace's end in sight */
    if (ui.gap.textContent !== gapNote) ui.gap.textContent = gapNote;
    ui.gap.hidden = !gapNote;
    ui.status.textContent = 'Entries ' + Math.max(0, Math.floor(view.x0)) + '\u2013' + Math.max(0, Math.min(d.n, Math.ceil(view.x1)) - 1) + ' of ' + d.n +
      (m.dropped ? ' (the ring dropped ' + m.dropped + ' older entries)' : '') + ' \u00b7 cursor at ' + when(d, view.cursor) +
      ' \u00b7 ' + size(allocatedAt(d, view.cursor)) + ' allocated, ' + size(lineAt(d.lines[1], view.cursor)) + ' reserved';
    stats.frames.push(performance.now() - t0);
  }
  /* the column-by-column image into the row-by-row one putImageData takes, in 64-pixel tiles so
   * both sides stay in cache (a pixel copy the canvas needs no transform for: a transformed
   * drawImage was rasterised by the browser after the script, on every frame) */
  function transpose(src, dst, w, h) {
    for (var x0 = 0; x0 < w; x0 += 64) {
      var x1 = Math.min(w, x0 + 64);
      for (var y0 = 0; y0 < h; y0 += 64) {
        var y1 = Math.min(h, y0 + 64);
        for (var y = y0; y < y1; y++) for (var x = x0, o = y * w; x < x1; x++) dst[o + x] = src[x * h + y];
      }
    }
  }
  function nice(x) { var p = Math.pow(10, Math.floor(Math.log10(Math.max(x, 1e-9)))), f = x / p; return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p; }
  /* a tick step in the unit the axis prints (size()): 1, 2, 5 or 10 times a power of ten of
   * KiB, MiB or GiB, so that ticks read 100.0 MiB, not 95.4 MiB (a decimal step in bytes) */
  function niceBytes(x) { var u = 1; while (x >= 1024 * u && u < Math.pow(1024, 4)) u *= 1024; return nice(x / u) * u; }

  /* what is under a point of the canvas: {col, id (or -1 - site), bytes} */
  function hit(px, py) {
    var f = view.frame;
    if (!f) return null;
    for (var i = 0; i < f.cols.length; i++) {
      var c = f.cols[i];
      if (px < f.X(c.a) || px >= Math.max(f.X(c.b), f.X(c.a) + 1)) continue;
      var bytes = (f.Y(0) - py) / f.sy, bs = bandsOf(dev(), c);
      for (var j = 0; j < bs.length; j += 3) if (bytes >= bs[j + 1] && bytes < bs[j + 1] + bs[j + 2]) return {col: c, key: bs[j], bytes: bs[j + 2]};
      return {col: c, key: null};
    }
    return null;
  }
  function describe(key, bytes) {
    var d = dev();
    if (key < 0) return 'Small allocations of ' + siteName(-1 - key) + ', folded at this zoom: ' + size(bytes);
    return size(d.size[key]) + ' \u00b7 ' + siteName(d.site[key]);
  }

  function select(id, fromKeys) {
    var d = dev(), p = ui.panel;
    view.sel = id;
    p.textContent = '';
    if (id < 0 || id >= d.na) { p.appendChild(el('p', 'v-hint', 'No allocation selected.')); request(); return; }
    var st = meta.stacks[d.stack[id]] || [0];
    p.appendChild(el('h3', null, 'Allocation ' + id));
    var dl = el('dl');
    function row(k, v, cls) { dl.appendChild(el('dt', null, k)); var dd = el('dd', cls, v); dl.appendChild(dd); return dd; }
    row('Size', size(d.size[id]) + ' (' + d.size[id] + ' bytes)', 'v-size');
    row('Site', siteName(d.site[id]), 'v-site');
    row('Allocated at', d.start[id] < 0 ? 'before the first recorded entry' : when(d, d.start[id]), 'v-from');
    row('Freed at', d.end[id] >= d.n ? 'still live at the end' : when(d, d.end[id]), 'v-to');
    row('Lived', (d.end[id] - Math.max(d.start[id], 0)) + ' entries', 'v-life');
    p.appendChild(dl);
    p.appendChild(el('h4', null, 'Stack (innermost first)'));
    var ol = el('ol', 'v-stack');
    if (st.length < 2) ol.appendChild(el('li', null, '<no stack recorded>'));
    for (var i = 1; i < st.length; i++) { var fr = meta.frames[st[i]] || ['?', false]; ol.appendChild(el('li', fr[1] ? 'v-mach' : null, fr[0])); }
    p.appendChild(ol);
    if (!fromKeys && (view.cursor < d.start[id] || view.cursor >= d.end[id])) setCursor(Math.max(d.start[id], 0));
    request();
  }

  function siteTable() {
    var d = dev(), live = liveAt(d, view.cursor), by = new Map(), i;
    for (i = 0; i < live.length; i++) {
      var s = d.site[live[i]], x = by.get(s) || {site: s, bytes: 0, blocks: 0};
      x.bytes += d.size[live[i]]; x.blocks++; by.set(s, x);
    }
    var rows = Array.from(by.values()).sort(function (a, b) { return b.bytes - a.bytes || a.site - b.site; });
    var t = el('table'), hr = el('tr');
    ['Site', 'Bytes', 'Blocks'].forEach(function (h) { hr.appendChild(el('th', null, h)); });
    t.appendChild(hr);
    var total = 0, mbytes = 0;
    rows.forEach(function (r) { total += r.bytes; if (view.query && matches(r.site)) mbytes += r.bytes; });
    rows.slice(0, 30).forEach(function (r) {
      var tr = el('tr', matches(r.site) && view.query ? 'v-hit' : null);
      var td = el('td', 'v-sname'); var sw = el('i', 'v-sw'); sw.style.background = colorOf(r.site); td.appendChild(sw);
      td.appendChild(document.createTextNode(siteName(r.site))); tr.appendChild(td);
      var b = el('td', 'n', size(r.bytes)); b.setAttribute('data-bytes', r.bytes); tr.appendChild(b);
      tr.appendChild(el('td', 'n', String(r.blocks))); t.appendChild(tr);
    });
    ui.sitesWrap.textContent = '';
    ui.sitesWrap.appendChild(t);
    var mm = meta.devices[view.k];
    ui.sitesHead.textContent = 'Live at the cursor (' + when(d, view.cursor) + '): ' + size(total) + ' in ' + live.length + (live.length === 1 ? ' block' : ' blocks') + (rows.length > 30 ? ', top 30 of ' + rows.length + ' sites' : '') +
      /* at the last entry of a trace that stops before its snapshot: what the reports' end is */
      (mm && mm.gap_note && view.cursor >= d.n - 1 ? '. Note: ' + mm.gap_note : '');
    ui.match.textContent = view.query ? (function () {
      /* the allocation sites of the device that match: a site only a free or an OOM names is none */
      var n = 0, seen = new Uint8Array(meta.sites.length + 1);
      for (var q = 0; q < d.site.length; q++) { var st = d.site[q]; if (!seen[st]) { seen[st] = 1; if (matches(st)) n++; } }
      return n + ' site' + (n === 1 ? '' : 's') + ' match, ' + size(mbytes) + ' live at the cursor';
    })() : '';
  }

  /* ---- input ---- */
  function evX(ev) { var b = ui.canvas.getBoundingClientRect(); return [ev.clientX - b.left, ev.clientY - b.top]; }
  function entryAt(px) { /* the (fractional) entry under a pixel of the frame on the canvas */
    var f = view.frame;
    if (!f) return 0;
    return f.tt ? entryOfTime(f.tt, f.T0 + (px - f.padl) / f.sxT) : f.x0 + (px - f.padl) / f.sx;
  }
  ui.canvas.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var p = evX(ev);
    if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) pan((ev.deltaX || ev.deltaY) / 500 * (view.x1 - view.x0));
    else zoomBy(Math.pow(1.0015, ev.deltaY), entryAt(p[0]));
  }, {passive: false});
  ui.canvas.addEventListener('pointerdown', function (ev) {
    var p = evX(ev); view.drag = {x: p[0], x0: view.x0, x1: view.x1, moved: false};
    ui.canvas.setPointerCapture(ev.pointerId); ui.canvas.focus();
  });
  ui.canvas.addEventListener('pointermove', function (ev) {
    var p = evX(ev);
    if (view.drag) {
      var dx = p[0] - view.drag.x;
      if (Math.abs(dx) > 3) view.drag.moved = true;
      if (view.drag.moved && view.frame) {
        var f = view.frame, w = view.x1 - view.x0;
        if (f.tt) { /* the same span of time, dragged by as much time as the pixels moved */
          var shift = dx / f.sxT;
          view.x0 = entryOfTime(f.tt, timeOf(f.tt, view.drag.x0) - shift); view.x1 = entryOfTime(f.tt, timeOf(f.tt, view.drag.x1) - shift);
        } else { view.x0 = view.drag.x0 - dx / f.sx; view.x1 = view.x0 + w; }
        clampView(); request();
      }
      return;
    }
    var h = hit(p[0], p[1]);
    if (h && h.key !== null) {
      ui.tip.hidden = false; ui.tip.textContent = describe(h.key, h.bytes);
      ui.tip.style.left = Math.min(p[0] + 12, ui.wrap.clientWidth - 220) + 'px'; ui.tip.style.top = (p[1] + 12) + 'px';
    } else ui.tip.hidden = true;
  });
  ui.canvas.addEventListener('pointerleave', function () { ui.tip.hidden = true; });
  ui.canvas.addEventListener('pointerup', function (ev) {
    var dr = view.drag; view.drag = null;
    if (!dr || dr.moved) return;
    var p = evX(ev), h = hit(p[0], p[1]);
    if (h) { view.cursor = h.col.e; siteTable(); }
    if (h && h.key !== null && h.key >= 0) select(h.key);
    else request();
  });
  ui.canvas.addEventListener('keydown', function (ev) {
    var d = dev(), w = view.x1 - view.x0, step = Math.max(1, Math.round(view.frame ? 1 / view.frame.sx : 1)), done = true;
    switch (ev.key) {
      case 'ArrowLeft': if (ev.shiftKey) pan(-w / 4); else setCursor(view.cursor - step); break;
      case 'ArrowRight': if (ev.shiftKey) pan(w / 4); else setCursor(view.cursor + step); break;
      case 'PageUp': pan(-w / 2); break;
      case 'PageDown': pan(w / 2); break;
      case '+': case '=': zoomBy(0.5, view.cursor); break;
      case '-': case '_': zoomBy(2, view.cursor); break;
      case '0': fit(); break;
      case 'Home': setCursor(0); break;
      case 'End': setCursor(d.n - 1); break;
      case 'p': gotoPeak(); break;
      case 't': toggleAxis(); break;
      case '/': ui.search.focus(); break;
      case 'ArrowUp': case 'ArrowDown': {
        var live = liveAt(d, view.cursor);
        if (!live.length) break;
        var at = live.indexOf(view.sel);
        at = at < 0 ? (ev.key === 'ArrowUp' ? 0 : live.length - 1) : Math.max(0, Math.min(live.length - 1, at + (ev.key === 'ArrowUp' ? 1 : -1)));
        select(live[at], true);
        break;
      }
      case 'Escape': select(-1); break;
      default: done = false;
    }
    if (done) ev.preventDefault();
  });
  ui.search.addEventListener('input', function () { view.query = ui.search.value.trim().toLowerCase(); siteTable(); request(); });
  ui.search.addEventListener('keydown', function (ev) { if (ev.key === 'Enter' || ev.key === 'Escape') { ev.preventDefault(); ui.canvas.focus(); } });
  ui.dev.addEventListener('change', function () { view.k = Number(ui.dev.value); view.sel = -1; select(-1); fit(); setCursor(peakOr0()); soon(dev()); });
  window.addEventListener('resize', request);
  function peakOr0() { var m = meta.devices[view.k]; return m.peak && m.peak.index > 0 ? m.peak.index : 0; }

  /* for tests and benchmarks: the exact state at an instant, the frame times */
  window.cmhView = {
    meta: meta, view: view, stats: stats, size: size,
    device: function (k) { ui.dev.value = String(k); ui.dev.dispatchEvent(new Event('change')); },
    allocSites: function (k) { return Array.from(new Set(load(k).site)); }, /* the sites of device k's allocations */
    live: function (k, e, maxCps) {
      var d = load(k);
      if (maxCps !== undefined) while (!d.cps) cpSlice(d, Infinity); /* asked for a path: every checkpoint there to choose from */
      return liveAt(d, e, maxCps).map(function (id) { return {id: id, size: d.size[id], site: d.site[id], start: d.start[id], end: d.end[id]}; });
    },
    columns: function (k) { /* every column state the writer kept: [instant, {site: bytes}] */
      var d = load(k), out = [];
      for (var c = 0; c < d.ncols; c++) {
        var by = {}, i;
        for (i = d.bandStart[c]; i < d.bandStart[c + 1]; i++) by[d.site[d.bands[i]]] = (by[d.site[d.bands[i]]] || 0) + d.size[d.bands[i]];
        for (i = d.foldStart[c]; i < d.foldStart[c + 1]; i++) by[d.fsite[i]] = (by[d.fsite[i]] || 0) + d.fbytes[i];
        out.push([d.inst[c], by]);
      }
      return out;
    },
    bandsOf: function (c) { return bandsOf(dev(), c); },
    colour: function (key) { var d = dev(); return key < 0 ? pixel(-1 - key, true, false) : pixel(d.site[key], false, false); },
    _stack: function (k, id) { return load(k).stack[id]; },
    time: function (k, e) { return times(load(k))[e]; }, /* µs from the record's first event */
    _n: function (k) { return load(k).n; },
    setView: function (x0, x1) { view.x0 = x0; view.x1 = x1; clampView(); draw(); },
    setCursor: setCursor, select: select, draw: draw,
    project: function (e, bytes) { var f = view.frame; return f ? [f.X(e), f.Y(bytes)] : null; }
  };
  /* open on the first device that holds memory: PyTorch lists devices it never used */
  for (var k0 = 0; k0 < meta.devices.length; k0++) {
    var p0 = meta.devices[k0].peak;
    if (p0 && p0.reserved > 0) { view.k = k0; ui.dev.value = String(k0); break; }
  }
  fit();
  view.cursor = peakOr0();
  siteTable();
  draw();
  root.setAttribute('data-ready', '1');
  /* entry times wait until the first frame is up, then come while the page is idle */
  requestAnimationFrame(function () { setTimeout(function () { soon(dev()); }, 0); });
})();
