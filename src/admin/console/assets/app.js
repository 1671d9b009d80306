// The Switchboard console (docs/operations.md "Console"): hand-written, no
// framework, nothing fetched but this gateway's admin API. The admin key (or
// token) typed at sign-in is kept in this tab's sessionStorage and sent as
// `Authorization: Bearer` on each API call, never in a URL; a 401 signs out.
// Pages are hash routes (#/overview ...); charts are SVG drawn here.
'use strict';

(() => {
  const TOKEN = 'switchboard.console.token';
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const PALETTE = ['#2557d6', '#e0792b', '#1d8a4e', '#c62f2f', '#7b4bd1', '#0f8b9c', '#b7791f', '#d04a93', '#51607a', '#6b9a1e'];
  const OTHER_COLOR = '#9aa3b2';
  const MAX_ROWS = 500;

  // ---- small DOM helpers -------------------------------------------------

  /// An element: `attrs` are attributes, `class`, `text`, or `on<event>` handlers.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    append(e, children);
    return e;
  }

  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    setAttrs(e, attrs);
    append(e, children);
    return e;
  }

  function setAttrs(e, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function append(e, children) {
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }

  /// Replaces `e`'s children (null and false ones left out).
  function fill(e, ...children) {
    e.replaceChildren();
    append(e, children);
  }

  const $ = (sel, root = document) => root.querySelector(sel);

  // ---- formatting --------------------------------------------------------

  const nf = new Intl.NumberFormat('en-US');
  const int = (n) => (n === null || n === undefined ? '–' : nf.format(n));
  function usd(v) {
    if (v === null || v === undefined || v === '') return '–';
    const n = Number(v);
    if (!Number.isFinite(n)) return String(v);
    if (n === 0) return '$0';
    if (Math.abs(n) < 0.01) return '$' + n.toPrecision(2);
    return '$' + n.toFixed(2);
  }
  const ms = (v) => (v === null || v === undefined ? '–' : v >= 10000 ? (v / 1000).toFixed(1) + ' s' : Math.round(v) + ' ms');
  function time(iso) {
    if (!iso) return '–';
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
  }
  function ago(msAgo) {
    const s = Math.round(msAgo / 1000);
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    return Math.round(s / 3600) + ' h ago';
  }
  const limitText = (v) => (v === null || v === undefined ? '–' : typeof v === 'object' ? int(v.limit) : int(v));
  function budgetText(b) {
    if (!b) return '–';
    const cap = b.usd !== undefined ? usd(b.usd) : '';
    return cap + (b.period ? ' / ' + b.period : '');
  }
  const spentText = (b) => (b && b.spent_usd !== undefined ? usd(b.spent_usd) : '–');
  function statusBadge(status) {
    const cls = status >= 500 ? 'bad' : status >= 400 ? 'warn' : 'good';
    return el('span', { class: 'badge ' + cls, text: status });
  }
  const isoDay = (d) => d.toISOString().slice(0, 10);

  // ---- the API -----------------------------------------------------------

  class SignedOut extends Error {}

  const token = () => sessionStorage.getItem(TOKEN);

  /// Calls the admin API with the bearer; JSON in and out. A 401 signs out.
  async function api(path, { method = 'GET', body, raw = false } = {}) {
    const headers = { Authorization: 'Bearer ' + token() };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const r = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'omit',
    });
    if (r.status === 401) {
      signOut('Signed out: the admin API refused the key.');
      throw new SignedOut();
    }
    if (raw && r.ok) return r;
    if (r.status === 204) return null;
    const text = await r.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    if (!r.ok) {
      const msg = json && json.error && json.error.message ? json.error.message : text.slice(0, 300);
      throw new Error(`${method} ${path.split('?')[0]}: ${r.status} ${msg}`);
    }
    return json;
  }

  const query = (params) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    const s = q.toString();
    return s ? '?' + s : '';
  };

  // ---- sign-in and routing ----------------------------------------------

  let view = { id: 0, timers: [] };

  function flash(msg) {
    const f = $('#flash');
    f.textContent = msg || '';
    f.hidden = !msg;
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN);
    endView();
    $('#app').hidden = true;
    $('#signin').hidden = false;
    const err = $('#signin-error');
    err.textContent = message || '';
    err.hidden = !message;
    $('#admin-key').focus();
  }

  async function signIn(ev) {
    ev.preventDefault();
    const input = $('#admin-key');
    const err = $('#signin-error');
    const candidate = input.value.trim();
    err.hidden = true;
    if (!candidate) return;
    let r;
    try {
      r = await fetch('/admin/whoami', { headers: { Authorization: 'Bearer ' + candidate }, cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      err.textContent = 'The gateway did not answer: ' + e.message;
      err.hidden = false;
      return;
    }
    if (r.status === 403) {
      err.textContent = 'That token is valid but does not grant admin.';
      err.hidden = false;
      return;
    }
    if (r.status === 401) {
      err.textContent = 'That key was refused: check the admin key and try again.';
      err.hidden = false;
      input.select();
      return;
    }
    if (r.status === 404) {
      err.textContent = 'The admin API is off on this gateway (start it with --admin-key).';
      err.hidden = false;
      return;
    }
    sessionStorage.setItem(TOKEN, candidate);
    input.value = '';
    showApp();
    if (location.hash !== '#/overview') location.hash = '#/overview';
    else route();
  }

  function showApp() {
    $('#signin').hidden = true;
    $('#app').hidden = false;
    api('/admin/whoami').then((w) => {
      $('#actor').textContent = w && w.actor ? `signed in as ${w.actor}` : '';
    }, report);
  }

  function endView() {
    for (const t of view.timers) clearInterval(t);
    view = { id: view.id + 1, timers: [] };
  }

  const PAGES = {
    overview: overviewPage,
    keys: keysPage,
    teams: teamsPage,
    usage: usagePage,
    upstreams: upstreamsPage,
    requests: requestsPage,
  };

  async function route() {
    if (!token()) return signOut();
    const name = (location.hash.match(/^#\/(\w+)/) || [])[1];
    if (!PAGES[name]) {
      location.hash = '#/overview';
      return;
    }
    endView();
    flash('');
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.page === name);
    const main = $('#page');
    main.replaceChildren();
    main.dataset.page = name;
    document.title = `${name[0].toUpperCase()}${name.slice(1)} · Switchboard`;
    try {
      await PAGES[name](main, view);
    } catch (e) {
      report(e);
    }
  }

  /// Shows an error unless it was the sign-out's.
  function report(e) {
    if (!(e instanceof SignedOut)) flash(e.message || String(e));
  }

  /// Runs `f`, reporting its failure.
  const guard = (f) => async (...args) => {
    try {
      flash('');
      await f(...args);
    } catch (e) {
      report(e);
    }
  };

  // ---- charts ------------------------------------------------------------

  function niceMax(v) {
    if (!(v > 0)) return 1;
    // Small counts: a multiple of 4, so the four gridlines fall on whole numbers.
    if (v <= 8 && Number.isInteger(v)) return Math.max(4, Math.ceil(v / 4) * 4);
    const p = 10 ** Math.floor(Math.log10(v));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  /// A line chart: one line per series over the buckets, a circle per
  /// non-zero point (its value in a tooltip), axes, a legend.
  function lineChart(title, buckets, series, fmt, bucketName) {
    const W = 560, H = 210, L = 64, R = 10, T = 10, B = 24;
    const n = buckets.length;
    const values = series.flatMap((s) => s.values.filter((v) => v !== null));
    const max = niceMax(Math.max(0, ...values));
    const x = (i) => L + (n <= 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (n - 1));
    const y = (v) => T + (H - T - B) * (1 - v / max);
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title, 'data-chart': title });
    for (let k = 0; k <= 4; k++) {
      const v = (max * k) / 4;
      root.append(svg('line', { class: 'axis', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      root.append(svg('text', { x: L - 6, y: y(v) + 3, 'text-anchor': 'end', text: fmt(v) }));
    }
    const step = Math.max(1, Math.ceil(n / 7));
    for (let i = 0; i < n; i += step) {
      const d = new Date(buckets[i]);
      const label = bucketName === 'hour'
        ? `${String(d.getHours()).padStart(2, '0')}:00`
        : `${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
      root.append(svg('text', { x: x(i), y: H - 6, 'text-anchor': 'middle', text: label }));
    }
    for (const s of series) {
      let dpath = '';
      let pen = false;
      s.values.forEach((v, i) => {
        if (v === null) {
          pen = false;
          return;
        }
        dpath += `${pen ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
        pen = true;
      });
      if (dpath) root.append(svg('path', { d: dpath, fill: 'none', stroke: s.color, 'stroke-width': 2 }));
      s.values.forEach((v, i) => {
        if (v === null || v === 0) return;
        root.append(svg('circle', { class: 'pt', cx: x(i), cy: y(v), r: 3.5, fill: s.color, 'data-series': s.name, 'data-value': v },
          svg('title', { text: `${s.name} · ${new Date(buckets[i]).toLocaleString()} · ${fmt(v)}` })));
      });
    }
    const legend = el('div', { class: 'legend' }, series.map((s) => {
      const swatch = el('i');
      swatch.style.background = s.color;
      return el('span', {}, swatch, s.name);
    }));
    return el('div', { class: 'chart' }, el('h3', { text: title }), root, legend);
  }

  // ---- Overview ----------------------------------------------------------

  const RANGES = {
    '24h': { label: 'Last 24 hours, by hour', bucket: 'hour', days: 1 },
    '7d': { label: 'Last 7 days, by hour', bucket: 'hour', days: 7 },
    '30d': { label: 'Last 30 days, by day', bucket: 'day', days: 30 },
    '90d': { label: 'Last 90 days, by day', bucket: 'day', days: 90 },
  };

  async function overviewPage(main) {
    const range = el('select', { id: 'ov-range' }, Object.entries(RANGES).map(([k, r]) => el('option', { value: k, text: r.label })));
    const by = el('select', { id: 'ov-by' }, ['model', 'key', 'team'].map((b) => el('option', { value: b, text: `by ${b}` })));
    const body = el('div', { id: 'overview-body' });
    const load = guard(async () => {
      const r = RANGES[range.value];
      const from = r.bucket === 'hour'
        ? new Date(Date.now() - r.days * 86400000 + 3600000).toISOString().slice(0, 13) + ':00:00Z'
        : isoDay(new Date(Date.now() - (r.days - 1) * 86400000));
      const s = await api('/admin/usage/series' + query({ bucket: r.bucket, by: by.value, from }));
      renderOverview(body, s);
    });
    range.addEventListener('change', load);
    by.addEventListener('change', load);
    main.append(
      el('h1', { text: 'Overview' }),
      el('div', { class: 'toolbar' }, el('label', {}, 'Range', range), el('label', {}, 'Series', by),
        el('button', { type: 'button', class: 'secondary', onclick: load, text: 'Refresh' })),
      body,
    );
    await load();
  }

  function renderOverview(body, s) {
    const t = s.total;
    const buckets = s.buckets;
    const weighted = s.series.reduce((acc, g) => {
      g.mean_latency_ms.forEach((m, i) => {
        if (m !== null) {
          acc.sum += m * g.requests[i];
          acc.n += g.requests[i];
        }
      });
      return acc;
    }, { sum: 0, n: 0 });
    const tile = (label, value, id) => el('div', { class: 'tile', id }, el('div', { class: 'v', text: value }), el('div', { class: 'l', text: label }));
    const tiles = el('div', { class: 'tiles' },
      tile('requests', int(t.requests), 'tile-requests'),
      tile(`errors (${t.requests ? ((100 * t.errors) / t.requests).toFixed(1) : 0}%)`, int(t.errors), 'tile-errors'),
      tile('mean latency', weighted.n ? ms(weighted.sum / weighted.n) : '–', 'tile-latency'),
      tile('spend', usd(t.cost_usd), 'tile-spend'));
    if (!s.series.length) {
      fill(body, tiles, el('p', { class: 'empty', text: 'No requests in this range yet.' }));
      return;
    }
    const colored = s.series.map((g, i) => ({ ...g, color: g.other ? OTHER_COLOR : PALETTE[i % PALETTE.length] }));
    const pick = (field) => colored.map((g) => ({ name: g.name, color: g.color, values: g[field] }));
    const num = (v) => (v >= 1000 ? nf.format(Math.round(v)) : String(Math.round(v * 100) / 100));
    fill(body, tiles, el('div', { class: 'charts' },
      lineChart('Requests', buckets, pick('requests'), num, s.bucket),
      lineChart('Errors', buckets, pick('errors'), num, s.bucket),
      lineChart('Mean latency (ms)', buckets, pick('mean_latency_ms'), num, s.bucket),
      lineChart('Spend (USD)', buckets, pick('cost_usd'), (v) => (v === 0 ? '$0' : '$' + Number(v.toPrecision(2))), s.bucket)));
  }

  // ---- Keys --------------------------------------------------------------

  /// The secret of a key just made or rotated: shown here once, never stored.
  function secretPanel(id, secret, what) {
    const panel = el('div', { class: 'secret', id: 'new-secret', role: 'status' },
      el('strong', { text: `${what} ${id}: copy the key now. It is shown this once and cannot be read again.` }),
      el('code', { id: 'secret-value', text: secret }),
      el('button', { type: 'button', class: 'secondary', text: 'Copy', onclick: () => navigator.clipboard && navigator.clipboard.writeText(secret) }),
      ' ',
      el('button', { type: 'button', class: 'secondary', text: 'Done', onclick: () => panel.remove() }));
    return panel;
  }

  const numOrNull = (v) => (v === '' ? null : Number(v));

  /// The limits of a key or team from a form's fields (empty: none).
  function limitsFrom(f) {
    const out = {};
    if (f.rpm) out.rpm = numOrNull(f.rpm.value);
    if (f.tpm) out.tpm = numOrNull(f.tpm.value);
    if (f.budget) out.budget = f.budget.value === '' ? null : { usd: f.budget.value, period: f.period.value };
    return out;
  }

  function limitInputs(prefix, current = {}) {
    const lim = (v) => (v === null || v === undefined ? '' : typeof v === 'object' ? v.limit : v);
    const f = {
      rpm: el('input', { name: 'rpm', id: `${prefix}-rpm`, type: 'number', min: 1, value: lim(current.rpm) }),
      tpm: el('input', { name: 'tpm', id: `${prefix}-tpm`, type: 'number', min: 1, value: lim(current.tpm) }),
      budget: el('input', { name: 'budget', id: `${prefix}-budget`, inputmode: 'decimal', placeholder: 'USD', value: current.budget && current.budget.usd !== undefined ? current.budget.usd : '' }),
      period: el('select', { name: 'period', id: `${prefix}-period` }, ['day', 'month', 'total'].map((p) => el('option', { value: p, text: p }))),
    };
    if (current.budget && current.budget.period) f.period.value = current.budget.period;
    const labels = [el('label', {}, 'rpm', f.rpm), el('label', {}, 'tpm', f.tpm), el('label', {}, 'budget (USD)', f.budget), el('label', {}, 'period', f.period)];
    return { f, labels };
  }

  async function keysPage(main) {
    const filter = el('input', { id: 'keys-filter', type: 'search', placeholder: 'id, team or model' });
    const state = el('select', { id: 'keys-state' }, ['', 'active', 'revoked', 'expired'].map((s) => el('option', { value: s, text: s || 'any state' })));
    const team = el('input', { id: 'keys-team', placeholder: 'team' });
    const notice = el('div', { id: 'keys-notice' });
    const table = el('div', { id: 'keys-table' });
    let keys = [];

    let next = null;
    const more = el('button', { type: 'button', class: 'secondary', id: 'keys-more', text: 'Load more', onclick: () => load(true) });
    const draw = () => {
      const needle = filter.value.trim().toLowerCase();
      const shown = keys.filter((k) => !needle || [k.id, k.team, ...(k.models || [])].some((v) => v && String(v).toLowerCase().includes(needle)));
      more.hidden = !next;
      fill(table, keyTable(shown.slice(0, MAX_ROWS), reload, notice),
        shown.length > MAX_ROWS ? el('p', { class: 'muted', text: `Showing ${MAX_ROWS} of ${shown.length}: narrow the filter.` }) : null,
        shown.length ? null : el('p', { class: 'empty', text: keys.length ? 'No key matches the filter.' : 'No keys.' }),
        el('div', { class: 'pager' }, more, el('span', { class: 'muted', text: `${keys.length} loaded${next ? ', more on the server' : ''}` })));
    };
    // Pages of the API (in id order, `next` the cursor), the filters applied there.
    // A load started later wins: an earlier one that answers after it (a
    // filter changed while it was on its way) is dropped.
    let loads = 0;
    const load = guard(async (append) => {
      const seq = ++loads;
      const r = await api('/admin/keys' + query({ state: state.value, team: team.value.trim(), limit: 1000, after: append ? next : undefined }));
      if (seq !== loads) return;
      keys = append ? keys.concat((r && r.data) || []) : (r && r.data) || [];
      next = (r && r.next) || null;
      draw();
    });
    const reload = () => load(false);
    filter.addEventListener('input', draw);
    state.addEventListener('change', reload);
    team.addEventListener('change', reload);

    const id = el('input', { id: 'new-key-id', placeholder: 'generated when empty' });
    const keyTeam = el('input', { id: 'new-key-team' });
    const models = el('input', { id: 'new-key-models', placeholder: 'all when empty' });
    const expires = el('input', { id: 'new-key-expires', type: 'datetime-local' });
    const lim = limitInputs('new-key');
    const create = guard(async (ev) => {
      ev.preventDefault();
      const body = { ...limitsFrom(lim.f) };
      for (const k of Object.keys(body)) if (body[k] === null) delete body[k];
      if (id.value.trim()) body.id = id.value.trim();
      if (keyTeam.value.trim()) body.team = keyTeam.value.trim();
      if (models.value.trim()) body.models = models.value.split(',').map((m) => m.trim()).filter(Boolean);
      if (expires.value) body.expires_at = new Date(expires.value).toISOString().replace(/\.\d{3}Z$/, 'Z');
      const made = await api('/admin/keys', { method: 'POST', body });
      fill(notice, secretPanel(made.id, made.key, 'New key'));
      form.reset();
      await reload();
    });
    const form = el('form', { class: 'form', id: 'new-key-form', onsubmit: create },
      el('label', {}, 'id', id), el('label', {}, 'team', keyTeam), el('label', {}, 'models (comma-separated)', models),
      lim.labels, el('label', {}, 'expires', expires), el('button', { type: 'submit', text: 'Create key' }));

    main.append(el('h1', { text: 'Keys' }), el('h2', { text: 'New key' }), form, notice,
      el('div', { class: 'toolbar' }, el('label', {}, 'Filter', filter), el('label', {}, 'State', state), el('label', {}, 'Team', team)),
      table);
    await reload();
  }

  function keyTable(keys, reload, notice) {
    const rows = keys.map((k) => {
      const st = k.state || 'active';
      const editable = k.source !== 'file';
      const actions = el('td', { class: 'actions' });
      const tr = el('tr', { 'data-key': k.id },
        el('td', { class: 'mono', text: k.id }),
        el('td', { text: k.team || '–' }),
        el('td', {}, el('span', { class: 'badge ' + (st === 'active' ? 'good' : 'bad'), text: st })),
        el('td', { text: k.source || 'api' }),
        el('td', { text: (k.models && k.models.length ? k.models.join(', ') : 'all') }),
        el('td', { class: 'num', text: limitText(k.rpm) }),
        el('td', { class: 'num', text: limitText(k.tpm) }),
        el('td', { text: budgetText(k.budget) }),
        el('td', { text: k.expires_at ? time(k.expires_at) : '–' }),
        actions);
      if (editable && st === 'active') {
        actions.append(
          el('button', { type: 'button', class: 'secondary', text: 'Edit', onclick: () => editRow(tr, k, `/admin/keys/${encodeURIComponent(k.id)}`, reload, true) }),
          el('button', { type: 'button', class: 'secondary', text: 'Rotate', onclick: () => rotateRow(tr, k, reload, notice) }),
          confirmButton('Revoke', async () => {
            await api(`/admin/keys/${encodeURIComponent(k.id)}`, { method: 'DELETE' });
            await reload();
          }));
      } else if (!editable) {
        actions.append(el('span', { class: 'muted', text: 'keys.json' }));
      }
      return tr;
    });
    return el('table', { id: 'keys' },
      el('thead', {}, el('tr', {}, ['id', 'team', 'state', 'source', 'models', 'rpm', 'tpm', 'budget', 'expires', ''].map((h) => el('th', { text: h })))),
      el('tbody', {}, rows));
  }

  /// A button that asks for a second click before it acts.
  function confirmButton(label, act) {
    const b = el('button', { type: 'button', class: 'danger', text: label });
    let armed = null;
    b.addEventListener('click', guard(async () => {
      if (!armed) {
        b.textContent = `Confirm ${label.toLowerCase()}`;
        armed = setTimeout(() => {
          armed = null;
          b.textContent = label;
        }, 5000);
        return;
      }
      clearTimeout(armed);
      b.disabled = true;
      await act();
    }));
    return b;
  }

  /// An inline form under a row that PATCHes the limits (and a key's team and expiry).
  function editRow(tr, item, path, reload, isKey) {
    if (tr.nextSibling && tr.nextSibling.classList && tr.nextSibling.classList.contains('detail')) {
      tr.nextSibling.remove();
      return;
    }
    const lim = limitInputs('edit', item);
    const extra = {};
    if (isKey) {
      extra.team = el('input', { name: 'team', id: 'edit-team', value: item.team || '' });
      extra.expires = el('input', { name: 'expires', id: 'edit-expires', type: 'datetime-local' });
    }
    const save = guard(async (ev) => {
      ev.preventDefault();
      const body = limitsFrom(lim.f);
      if (isKey) {
        body.team = extra.team.value.trim() || null;
        if (extra.expires.value) body.expires_at = new Date(extra.expires.value).toISOString().replace(/\.\d{3}Z$/, 'Z');
      }
      await api(path, { method: 'PATCH', body });
      await reload();
    });
    const form = el('form', { class: 'form', onsubmit: save }, lim.labels,
      isKey ? [el('label', {}, 'team', extra.team), el('label', {}, 'expires', extra.expires)] : null,
      el('button', { type: 'submit', text: 'Save' }),
      el('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: () => detail.remove() }));
    const detail = el('tr', { class: 'detail' }, el('td', { colspan: tr.children.length }, form));
    tr.after(detail);
  }

  function rotateRow(tr, k, reload, notice) {
    if (tr.nextSibling && tr.nextSibling.classList && tr.nextSibling.classList.contains('detail')) {
      tr.nextSibling.remove();
      return;
    }
    const grace = el('input', { id: 'rotate-grace', type: 'number', min: 0, value: 0 });
    const go = guard(async (ev) => {
      ev.preventDefault();
      const r = await api(`/admin/keys/${encodeURIComponent(k.id)}/rotate`, { method: 'POST', body: { grace_seconds: Number(grace.value || 0) } });
      fill(notice, secretPanel(k.id, r.key, 'Rotated key'));
      await reload();
    });
    const form = el('form', { class: 'form', onsubmit: go },
      el('label', {}, 'the old key keeps working for (seconds)', grace),
      el('button', { type: 'submit', text: 'Rotate now' }),
      el('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: () => detail.remove() }));
    const detail = el('tr', { class: 'detail' }, el('td', { colspan: tr.children.length }, form));
    tr.after(detail);
  }

  // ---- Teams -------------------------------------------------------------

  async function teamsPage(main) {
    const table = el('div', { id: 'teams-table' });
    const reload = guard(async () => {
      const r = await api('/admin/teams');
      const teams = (r && r.data) || [];
      const rows = teams.map((t) => {
        const tr = el('tr', { 'data-team': t.id },
          el('td', { class: 'mono', text: t.id }),
          el('td', { text: t.source || 'api' }),
          el('td', { class: 'num', text: t.keys ?? '–' }),
          el('td', { class: 'num', text: limitText(t.rpm) }),
          el('td', { class: 'num', text: limitText(t.tpm) }),
          el('td', { text: budgetText(t.budget) }),
          el('td', { class: 'num spent', text: spentText(t.budget) }),
          el('td', { class: 'actions' },
            t.source === 'file' ? el('span', { class: 'muted', text: 'keys.json' }) : [
              el('button', { type: 'button', class: 'secondary', text: 'Edit', onclick: () => editRow(tr, t, `/admin/teams/${encodeURIComponent(t.id)}`, reload, false) }),
              confirmButton('Delete', async () => {
                await api(`/admin/teams/${encodeURIComponent(t.id)}`, { method: 'DELETE' });
                await reload();
              }),
            ]));
        return tr;
      });
      fill(table,
        el('table', { id: 'teams' },
          el('thead', {}, el('tr', {}, ['id', 'source', 'keys', 'rpm', 'tpm', 'budget', 'spent', ''].map((h) => el('th', { text: h })))),
          el('tbody', {}, rows)),
        teams.length ? null : el('p', { class: 'empty', text: 'No teams.' }));
      // The list holds the limits; each team's spend is its own answer (the
      // first 50 teams, fetched side by side).
      await Promise.all(teams.filter((t) => t.budget).slice(0, 50).map(async (t) => {
        const one = await api(`/admin/teams/${encodeURIComponent(t.id)}`).catch(() => null);
        const cell = table.querySelector(`tr[data-team="${CSS.escape(t.id)}"] td.spent`);
        if (one && cell) cell.textContent = spentText(one.budget);
      }));
    });
    const id = el('input', { id: 'new-team-id', required: true });
    const lim = limitInputs('new-team');
    const form = el('form', { class: 'form', id: 'new-team-form', onsubmit: guard(async (ev) => {
      ev.preventDefault();
      const body = { id: id.value.trim(), ...limitsFrom(lim.f) };
      for (const k of Object.keys(body)) if (body[k] === null) delete body[k];
      await api('/admin/teams', { method: 'POST', body });
      form.reset();
      await reload();
    }) }, el('label', {}, 'id', id), lim.labels, el('button', { type: 'submit', text: 'Create team' }));
    main.append(el('h1', { text: 'Teams' }), el('h2', { text: 'New team' }), form, table);
    await reload();
  }

  // ---- Usage -------------------------------------------------------------

  async function usagePage(main) {
    const today = new Date();
    const from = el('input', { id: 'usage-from', type: 'date', value: isoDay(new Date(today.getTime() - 6 * 86400000)) });
    const to = el('input', { id: 'usage-to', type: 'date', value: isoDay(today) });
    const key = el('input', { id: 'usage-key', placeholder: 'any key' });
    const model = el('input', { id: 'usage-model', placeholder: 'any model' });
    const team = el('input', { id: 'usage-team', placeholder: 'any team' });
    const groupBy = el('select', { id: 'usage-group' }, ['model', 'key', 'team', 'day'].map((g) => el('option', { value: g, text: g })));
    const out = el('div', { id: 'usage-table' });
    const params = () => ({ group_by: groupBy.value, from: from.value, to: to.value, key: key.value.trim(), team: team.value.trim(), model: model.value.trim() });
    const load = guard(async () => {
      const u = await api('/admin/usage' + query(params()));
      const by = u.group_by;
      const groups = [...(u.groups || [])];
      if (by !== 'day') groups.sort((a, b) => b.cost_usd - a.cost_usd || b.requests - a.requests);
      const cols = [['requests', int], ['errors', int], ['input_tokens', int], ['output_tokens', int], ['cached_tokens', int], ['reasoning_tokens', int], ['mean_latency_ms', ms], ['cost_usd', usd]];
      const row = (name, g, cls) => el('tr', { class: cls, 'data-group': name }, el('td', { class: by === 'day' ? '' : 'mono', text: name === '' ? (by === 'team' ? '(no team)' : '(unresolved)') : name }),
        cols.map(([c, f]) => el('td', { class: 'num', text: f(g[c]) })));
      fill(out, el('table', { id: 'usage' },
        el('thead', {}, el('tr', {}, el('th', { text: by }), cols.map(([c]) => el('th', { class: 'num', text: c.replace(/_/g, ' ') })))),
        el('tbody', {}, groups.map((g) => row(g[by], g))),
        el('tfoot', {}, row('total', u.total, 'total'))),
      groups.length ? null : el('p', { class: 'empty', text: 'No usage in this range.' }),
      el('p', { class: 'muted', text: `Read from the ${u.source === 'rollups' ? 'daily rollups' : 'request rows'}.` }));
    });
    const download = guard(async () => {
      const r = await api('/admin/usage' + query({ ...params(), format: 'csv' }), { raw: true });
      const blob = await r.blob();
      const name = ((r.headers.get('content-disposition') || '').match(/filename="([^"]+)"/) || [])[1] || 'switchboard-usage.csv';
      const url = URL.createObjectURL(blob);
      const a = el('a', { href: url, download: name });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    });
    for (const i of [from, to, groupBy]) i.addEventListener('change', load);
    main.append(el('h1', { text: 'Usage' }),
      el('form', { class: 'toolbar', onsubmit: (ev) => { ev.preventDefault(); load(); } },
        el('label', {}, 'From (UTC day)', from), el('label', {}, 'To', to), el('label', {}, 'Key', key), el('label', {}, 'Team', team), el('label', {}, 'Model', model),
        el('label', {}, 'Group by', groupBy),
        el('button', { type: 'submit', text: 'Apply' }),
        el('button', { type: 'button', class: 'secondary', id: 'usage-csv', text: 'Download CSV', onclick: download })),
      out);
    await load();
  }

  // ---- Upstreams ---------------------------------------------------------

  async function upstreamsPage(main, v) {
    const stamp = el('span', { class: 'muted', id: 'upstreams-updated' });
    const body = el('div', { id: 'upstreams' });
    const load = async () => {
      const r = await api('/admin/upstreams');
      if (v.id !== view.id) return;
      fill(body, ...r.providers.map(providerBlock));
      stamp.textContent = 'Live · updated ' + new Date().toLocaleTimeString();
    };
    main.append(el('h1', { text: 'Upstreams' }), el('p', {}, stamp), body);
    await load();
    v.timers.push(setInterval(() => load().catch(report), 2000));
  }

  function providerBlock(p) {
    const t = p.timeouts || {};
    const rows = p.upstreams.map((u) => {
      const health = u.healthy
        ? el('span', { class: u.failure_streak ? 'badge warn' : 'badge good', text: u.failure_streak ? 'half-open' : 'healthy' })
        : el('span', { class: 'badge bad', text: `cooling ${((u.cooldown_ms || 0) / 1000).toFixed(1)} s` });
      const recent = (u.recent_failures || []).slice(0, 5);
      return el('tr', { 'data-upstream': u.id },
        el('td', { class: 'mono', text: u.id }),
        el('td', { text: u.protocol }),
        el('td', { class: 'mono', text: u.base_url }),
        el('td', { class: 'num', text: u.weight }),
        el('td', {}, health),
        el('td', { class: 'num', text: u.failure_streak }),
        el('td', { class: 'num', text: u.in_flight }),
        el('td', { class: 'num', text: int(u.attempts) }),
        el('td', { class: 'num', text: int(u.failures) }),
        el('td', {}, recent.length
          ? el('ul', { class: 'failures' }, recent.map((f) => el('li', { text: `${f.reason}${f.status ? ' ' + f.status : ''} · ${ago(f.ago_ms)}` })))
          : el('span', { class: 'muted', text: 'none' })));
    });
    return el('section', { class: 'provider', 'data-provider': p.id },
      el('h2', { text: p.id }),
      el('p', { class: 'muted', text: `retries ${p.retries} · connect ${ms(t.connect_ms)} · first token ${ms(t.first_token_ms)} · idle ${ms(t.idle_ms)} · total ${ms(t.total_ms)}` }),
      el('table', {}, el('thead', {}, el('tr', {}, ['upstream', 'protocol', 'base URL', 'weight', 'health', 'streak', 'in flight', 'attempts', 'failures', 'recent failures'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows)));
  }

  // ---- Requests ----------------------------------------------------------

  async function requestsPage(main) {
    const key = el('input', { id: 'req-key', placeholder: 'any key' });
    const model = el('input', { id: 'req-model', placeholder: 'any model' });
    const status = el('select', { id: 'req-status' }, [['', 'any status'], ['ok', 'ok (< 400)'], ['error', 'errors (≥ 400)']].map(([v, t]) => el('option', { value: v, text: t })));
    const tbody = el('tbody');
    const older = el('button', { type: 'button', class: 'secondary', id: 'req-older', text: 'Older' });
    const info = el('span', { class: 'muted' });
    let next = null;
    let shown = 0;
    const load = guard(async (before) => {
      const r = await api('/admin/requests' + query({ key: key.value.trim(), model: model.value.trim(), status: status.value, limit: 50, before }));
      if (!before) {
        tbody.replaceChildren();
        shown = 0;
      }
      for (const q of r.data) tbody.append(...requestRows(q));
      shown += r.data.length;
      next = r.next;
      older.disabled = !next;
      info.textContent = shown ? `${shown} shown, newest first` : 'No requests match.';
    });
    older.addEventListener('click', () => next && load(next));
    status.addEventListener('change', () => load());
    main.append(el('h1', { text: 'Requests' }),
      el('form', { class: 'toolbar', onsubmit: (ev) => { ev.preventDefault(); load(); } },
        el('label', {}, 'Key', key), el('label', {}, 'Model', model), el('label', {}, 'Status', status),
        el('button', { type: 'submit', text: 'Apply' }),
        el('button', { type: 'button', class: 'secondary', text: 'Newest', onclick: () => load() })),
      el('table', { id: 'requests' },
        el('thead', {}, el('tr', {}, ['time', 'request id', 'key', 'model', 'status', 'latency', 'tokens in / out', 'cost', 'attempts', ''].map((h) => el('th', { text: h })))),
        tbody),
      el('div', { class: 'pager' }, older, info));
    await load();
  }

  function requestRows(q) {
    const tr = el('tr', { class: 'clickable', 'data-request': q.request_id },
      el('td', { text: time(q.time) }),
      el('td', { class: 'mono', text: q.request_id }),
      el('td', { class: 'mono', text: q.key_id }),
      el('td', { class: 'mono', text: q.provider ? `${q.provider}/${q.model || ''}` : q.model || '–' }),
      el('td', {}, statusBadge(q.status)),
      el('td', { class: 'num', text: ms(q.latency_ms) }),
      el('td', { class: 'num', text: `${int(q.input_tokens)} / ${int(q.output_tokens)}` }),
      el('td', { class: 'num', text: usd(q.cost_usd) }),
      el('td', { class: 'num', text: q.attempts }),
      el('td', {}, q.adjusted ? el('span', { class: 'badge warn', text: 'adjusted' }) : null));
    const tried = (q.tried || []).map((a, i) => el('tr', {},
      el('td', { class: 'num', text: i + 1 }), el('td', { class: 'mono', text: `${a.provider}/${a.model}` }), el('td', { class: 'mono', text: a.upstream }),
      el('td', { text: a.status ?? '–' }), el('td', { text: a.failure || 'answered' }), el('td', { class: 'num', text: a.cooled_ms ? ms(a.cooled_ms) : '–' }),
      el('td', { class: 'num', text: ms(a.ms) })));
    const detail = el('tr', { class: 'detail', hidden: true, 'data-detail': q.request_id }, el('td', { colspan: 10 },
      el('p', {}, `family ${q.family} · upstream ${q.upstream_protocol || '–'} ${q.upstream_host || ''} · first token ${ms(q.ttft_ms)} · cached ${int(q.cached_tokens)} · reasoning ${int(q.reasoning_tokens)}`),
      q.error ? el('p', { class: 'error' }, el('strong', { text: 'Error: ' }), q.error) : null,
      el('p', {}, el('strong', { text: 'Adjusted: ' }), q.adjusted || 'nothing'),
      tried.length
        ? el('table', { class: 'attempts' }, el('thead', {}, el('tr', {}, ['#', 'model', 'upstream', 'status', 'outcome', 'cool-down', 'time'].map((h) => el('th', { text: h })))), el('tbody', {}, tried))
        : el('p', { class: 'muted', text: 'No upstream was called.' })));
    tr.addEventListener('click', () => {
      detail.hidden = !detail.hidden;
    });
    return [tr, detail];
  }

  // ---- start ---------------------------------------------------------------

  document.addEventListener('DOMContentLoaded', () => {
    $('#signin-form').addEventListener('submit', signIn);
    $('#signout').addEventListener('click', () => signOut('Signed out.'));
    window.addEventListener('hashchange', () => token() && route());
    if (token()) {
      showApp();
      route();
    } else {
      signOut();
    }
  });
})();
