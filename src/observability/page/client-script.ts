// The status page's script (plain browser JavaScript, served as /status-page.js): polls /metrics
// every 2 s (and /status.json, /readyz), fills the cards, keeps the plots' history (seeded from
// /history.json: the last hour) and the snapshot bars. Numbers shown carry `data-metric` and
// `data-value` (the raw value) so the browser test compares them with /metrics.
export const CLIENT_SCRIPT = String.raw`(() => {
  'use strict';
  const POLL_MS = 2000;
  const KEEP_MS = 3600000;
  const state = { metrics: new Map(), previous: null, bytes: [[], [], []], rate: [[], [], []], history: 0, polls: 0 };
  window.__statusPage = state;

  function parseLabels(text) {
    const labels = {};
    const re = /(\w+)="((?:[^"\\]|\\.)*)"/g;
    let m;
    while ((m = re.exec(text))) labels[m[1]] = m[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    return labels;
  }

  function parseMetrics(text) {
    const out = new Map();
    for (const line of text.split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      const m = /^([a-zA-Z_:][\w:]*)(\{.*\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const value = Number(m[3]);
      if (!out.has(m[1])) out.set(m[1], []);
      out.get(m[1]).push({ labels: m[2] ? parseLabels(m[2]) : {}, value });
    }
    return out;
  }

  function sum(metrics, name) {
    const samples = metrics.get(name);
    if (!samples || samples.length === 0) return null;
    return samples.reduce((a, s) => a + s.value, 0);
  }

  function bytes(n) {
    if (n === null || !Number.isFinite(n)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = n;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? String(Math.round(v)) : v.toFixed(v < 10 ? 2 : 1)) + ' ' + units[i];
  }

  function seconds(n) {
    if (n === null || !Number.isFinite(n)) return '–';
    if (n < 1) return n.toFixed(2) + ' s';
    if (n < 120) return n.toFixed(1) + ' s';
    if (n < 7200) return (n / 60).toFixed(1) + ' min';
    return (n / 3600).toFixed(1) + ' h';
  }

  function show(el, value, unit) {
    el.dataset.value = value === null ? '' : String(value);
    el.textContent = unit === 'bytes' ? bytes(value) : unit === 'seconds' ? seconds(value) : value === null ? '–' : String(value);
  }

  function labelled(metrics, name) {
    const samples = metrics.get(name) || [];
    const current = samples.find((s) => s.value === 1);
    return current ? current.labels : null;
  }

  function setBadge(el, text, kind) {
    el.textContent = text;
    el.className = 'badge ' + kind;
    el.dataset.value = text;
  }

  function fillCards(metrics) {
    for (const el of document.querySelectorAll('[data-metric]')) show(el, sum(metrics, el.dataset.metric), el.dataset.unit);
    const role = labelled(metrics, 'event_assembler_role');
    const leader = sum(metrics, 'event_assembler_leader');
    const roleText = role ? role.role : leader === 1 ? 'leader' : leader === 0 ? 'standby' : 'unknown';
    setBadge(document.getElementById('role'), roleText, roleText === 'leader' ? 'ok' : roleText === 'standby' ? 'warn' : '');
    const wal = labelled(metrics, 'event_assembler_slot_wal_status');
    const walEl = document.querySelector('[data-field="walStatus"]');
    walEl.textContent = wal ? wal.status : '–';
    document.getElementById('card-retention').className = 'card' + (wal && wal.status === 'lost' ? ' bad' : wal && wal.status === 'unreserved' ? ' warn' : '');
    const fresh = sum(metrics, 'event_assembler_freshness_seconds');
    document.getElementById('card-freshness').className = 'card' + (fresh === null ? '' : fresh > 300 ? ' bad' : fresh > 60 ? ' warn' : '');
    const failed = sum(metrics, 'event_assembler_failed_records_total');
    document.getElementById('card-failed').className = 'card' + (failed ? ' bad' : '');
    const last = sum(metrics, 'event_assembler_failed_record_last_timestamp_seconds');
    document.querySelector('[data-field="failedLatest"]').textContent = last ? 'latest ' + new Date(last * 1000).toLocaleString() : 'none';
  }

  function fillRates(metrics, now) {
    const totals = { tx: sum(metrics, 'event_assembler_transactions_appended_total'), ev: sum(metrics, 'event_assembler_events_appended_total') };
    let rates = { tx: null, ev: null };
    if (state.previous && now > state.previous.time) {
      const dt = (now - state.previous.time) / 1000;
      const r = (a, b) => (a === null || b === null ? null : Math.max(0, (a - b) / dt));
      rates = { tx: r(totals.tx, state.previous.tx), ev: r(totals.ev, state.previous.ev) };
    }
    state.previous = { time: now, ...totals };
    const put = (name, v) => {
      const el = document.querySelector('[data-rate="' + name + '"]');
      el.dataset.value = v === null ? '' : String(v);
      el.textContent = v === null ? '–' : v.toFixed(v < 10 ? 1 : 0);
    };
    put('event_assembler_transactions_appended_total', rates.tx);
    put('event_assembler_events_appended_total', rates.ev);
    return rates;
  }

  function fillSnapshots(metrics) {
    const rows = metrics.get('event_assembler_snapshot_rows') || [];
    const totals = metrics.get('event_assembler_snapshot_rows_estimated') || [];
    const body = document.querySelector('#snapshots tbody');
    if (rows.length === 0) { body.innerHTML = '<tr><td class="muted">no snapshot running</td></tr>'; return; }
    body.innerHTML = '';
    for (const r of rows) {
      const total = totals.find((t) => t.labels.table === r.labels.table);
      const pct = total && total.value > 0 ? Math.min(100, (100 * r.value) / total.value) : null;
      const tr = document.createElement('tr');
      tr.dataset.table = r.labels.table;
      tr.innerHTML = '<td></td><td><div class="bar"><div></div></div></td><td></td>';
      tr.children[0].textContent = r.labels.table;
      tr.children[1].firstChild.firstChild.style.width = (pct === null ? 0 : pct) + '%';
      tr.children[2].textContent = r.value + (total ? ' / ~' + total.value + ' rows' : ' rows') + (pct === null ? '' : ' (' + pct.toFixed(0) + ' %)');
      body.appendChild(tr);
    }
  }

  function fillStatus(status) {
    const el = document.getElementById('failed-diagnosis');
    const latest = status && status.failed && status.failed.latest;
    if (!latest) { el.textContent = 'none'; el.className = 'muted'; return; }
    el.className = '';
    el.dataset.id = latest.id;
    el.textContent = latest.kind + ' from mapper ' + latest.mapper + (latest.commitLsn ? ' (transaction ' + latest.commitLsn + '/' + latest.xid + ')' : '') + '\n' +
      latest.diagnosis + '\n' + 'record ' + latest.id + ' in ' + latest.stream + (status.failed.lastAt ? ', parked ' + new Date(status.failed.lastAt).toLocaleString() : '');
  }

  const plots = {};
  function plot(id, series, data, format) {
    const el = document.getElementById(id);
    el.dataset.points = String(data[0].length);
    const width = Math.max(300, el.clientWidth || 420);
    if (!plots[id]) {
      plots[id] = new uPlot({ width, height: 220, series: [{}, ...series], axes: [{}, { size: 80, values: (u, vals) => vals.map(format) }] }, data, el);
    } else {
      plots[id].setData(data);
    }
  }

  function trim(arrays, now) {
    while (arrays[0].length > 0 && arrays[0][0] < (now - KEEP_MS) / 1000) for (const a of arrays) a.shift();
  }

  function drawPlots() {
    plot('plot-bytes', [{ label: 'retained WAL', stroke: '#1a73e8', value: (u, v) => bytes(v) }, { label: 'lag', stroke: '#d93025', value: (u, v) => bytes(v) }], state.bytes, bytes);
    plot('plot-rate', [{ label: 'transactions/s', stroke: '#188038' }, { label: 'events/s', stroke: '#9334e6' }], state.rate, (v) => (v === null ? '' : String(+v.toFixed(2))));
  }

  async function seed() {
    try {
      const res = await fetch('history.json');
      if (!res.ok) return;
      const h = await res.json();
      const s = h.series;
      for (let i = 0; i < h.times.length; i++) {
        const t = h.times[i] / 1000;
        state.bytes[0].push(t); state.bytes[1].push(s.event_assembler_slot_retained_wal_bytes[i]); state.bytes[2].push(s.event_assembler_source_lag_bytes[i]);
        if (i > 0) {
          const dt = (h.times[i] - h.times[i - 1]) / 1000;
          const r = (a) => (a[i] === null || a[i - 1] === null || dt <= 0 ? null : Math.max(0, (a[i] - a[i - 1]) / dt));
          state.rate[0].push(t); state.rate[1].push(r(s.event_assembler_transactions_appended_total)); state.rate[2].push(r(s.event_assembler_events_appended_total));
        }
      }
      state.history = h.times.length;
    } catch (e) {
      console.warn('no history', e);
    }
  }

  async function poll() {
    try {
      const [metricsRes, readyRes, statusRes] = await Promise.all([fetch('metrics'), fetch('readyz').catch(() => null), fetch('status.json').catch(() => null)]);
      const metrics = parseMetrics(await metricsRes.text());
      const now = Date.now();
      state.metrics = metrics;
      state.polls++;
      fillCards(metrics);
      const rates = fillRates(metrics, now);
      fillSnapshots(metrics);
      if (statusRes && statusRes.ok) fillStatus(await statusRes.json());
      setBadge(document.getElementById('ready'), readyRes && readyRes.ok ? 'ready' : 'not ready', readyRes && readyRes.ok ? 'ok' : 'bad');
      const t = now / 1000;
      state.bytes[0].push(t); state.bytes[1].push(sum(metrics, 'event_assembler_slot_retained_wal_bytes')); state.bytes[2].push(sum(metrics, 'event_assembler_source_lag_bytes'));
      if (rates.tx !== null || rates.ev !== null) { state.rate[0].push(t); state.rate[1].push(rates.tx); state.rate[2].push(rates.ev); }
      trim(state.bytes, now); trim(state.rate, now);
      drawPlots();
      document.getElementById('updated').textContent = new Date(now).toLocaleTimeString();
    } catch (e) {
      setBadge(document.getElementById('ready'), 'unreachable', 'bad');
      console.warn('poll failed', e);
    }
  }

  seed().then(poll).then(() => setInterval(poll, POLL_MS));
})();
`;
