// The status page's document: the layout an operator reads at a glance — state and role first,
// then the four separate signals (retention, lag, freshness, failed records), the plots of the
// last hour, throughput, snapshot progress. Filled in by status-page.js from /metrics,
// /history.json and /status.json; no CDN, no build step (uPlot is served from the package).
export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>event-assembler</title>
<link rel="stylesheet" href="uplot.min.css">
<style>
  :root { --ok: #1b7f3b; --warn: #b26b00; --bad: #b3261e; --muted: #5f6368; --line: #dadce0; }
  body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #202124; background: #f8f9fa; }
  header { display: flex; gap: 16px; align-items: baseline; padding: 14px 24px; background: #fff; border-bottom: 1px solid var(--line); }
  header h1 { font-size: 18px; margin: 0; }
  .badge { padding: 2px 10px; border-radius: 12px; font-weight: 600; background: #e8eaed; }
  .badge.ok { background: #e6f4ea; color: var(--ok); } .badge.warn { background: #fef7e0; color: var(--warn); } .badge.bad { background: #fce8e6; color: var(--bad); }
  main { padding: 16px 24px; display: grid; gap: 16px; }
  .cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 12px; }
  .card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
  .card h2 { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 0 0 6px; font-weight: 600; }
  .card .value { font-size: 24px; font-weight: 600; }
  .card .sub { color: var(--muted); font-size: 12px; margin-top: 2px; }
  .card.bad .value { color: var(--bad); } .card.warn .value { color: var(--warn); }
  .plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; }
  .panel { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
  .panel h2 { font-size: 14px; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  td, th { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); font-size: 13px; }
  .bar { background: #e8eaed; border-radius: 4px; height: 10px; min-width: 160px; }
  .bar > div { background: #1a73e8; height: 100%; border-radius: 4px; }
  pre { white-space: pre-wrap; font-size: 12px; margin: 0; }
  .muted { color: var(--muted); }
</style>
</head>
<body>
<header>
  <h1>event-assembler</h1>
  <span id="role" class="badge" data-field="role">…</span>
  <span id="ready" class="badge" data-field="ready">…</span>
  <span class="muted">updated <span id="updated">never</span></span>
</header>
<main>
  <section class="cards">
    <div class="card" id="card-retention"><h2>WAL retained by the slot</h2><div class="value" data-metric="event_assembler_slot_retained_wal_bytes" data-unit="bytes">–</div><div class="sub">wal_status <span data-field="walStatus">–</span></div></div>
    <div class="card" id="card-lag"><h2>Lag behind the source</h2><div class="value" data-metric="event_assembler_source_lag_bytes" data-unit="bytes">–</div><div class="sub"><span data-metric="event_assembler_source_lag_seconds" data-unit="seconds">–</span> behind</div></div>
    <div class="card" id="card-freshness"><h2>Destination freshness</h2><div class="value" data-metric="event_assembler_freshness_seconds" data-unit="seconds">–</div><div class="sub">since the newest durable commit (heartbeat)</div></div>
    <div class="card" id="card-checkpoint"><h2>Last durable checkpoint</h2><div class="value" data-metric="event_assembler_checkpoint_age_seconds" data-unit="seconds">–</div><div class="sub">ago</div></div>
    <div class="card" id="card-failed"><h2>Failed records</h2><div class="value" data-metric="event_assembler_failed_records_total" data-unit="count">–</div><div class="sub" data-field="failedLatest">none</div></div>
    <div class="card" id="card-throughput"><h2>Throughput</h2><div class="value"><span data-rate="event_assembler_transactions_appended_total">–</span> tx/s</div><div class="sub"><span data-rate="event_assembler_events_appended_total">–</span> events/s</div></div>
  </section>
  <section class="plots">
    <div class="panel"><h2>Retained WAL and lag, last hour</h2><div id="plot-bytes" data-plot="bytes"></div></div>
    <div class="panel"><h2>Throughput, last hour</h2><div id="plot-rate" data-plot="rate"></div></div>
  </section>
  <section class="panel"><h2>Snapshots</h2><table id="snapshots"><tbody><tr><td class="muted">no snapshot running</td></tr></tbody></table></section>
  <section class="panel"><h2>Latest failed record</h2><pre id="failed-diagnosis" class="muted">none</pre></section>
</main>
<script src="uplot.min.js"></script>
<script src="status-page.js"></script>
</body>
</html>
`;
