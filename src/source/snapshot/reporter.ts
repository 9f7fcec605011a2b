/**
 * Snapshot progress for people: on a TTY one bar per table redrawn in place (rows done /
 * estimated, rate, ETA); elsewhere one JSON line per table at an interval (for log collectors).
 * The formatting functions are pure; the reporter is a thin shell around them.
 */
import type { SnapshotProgress, TableProgress } from './progress.js';

export interface TableRate {
  /** Rows per second over the reporter's measuring window; `null` before two samples. */
  readonly rowsPerSecond: number | null;
}

/** `1234567` → `1.2M`, `12345` → `12.3k`, `999` → `999`. */
export function formatCount(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}G`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(1)}k`;
  return String(Math.round(n));
}

/** Seconds → `45s`, `12m05s`, `3h07m`; `null`/non-finite → `--`. */
export function formatDuration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) return '--';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** Seconds left at `rate`, from the estimate; `null` when unknown (no estimate, no rate, or past the estimate). */
export function etaSeconds(t: TableProgress, rowsPerSecond: number | null): number | null {
  if (t.status === 'done') return 0;
  if (t.estimatedRows === null || rowsPerSecond === null || rowsPerSecond <= 0) return null;
  const left = t.estimatedRows - t.rowsDone;
  return left > 0 ? left / rowsPerSecond : null;
}

/** Fraction done in [0, 1]; `null` when there is no estimate (done tables are 1). */
export function fractionDone(t: TableProgress): number | null {
  if (t.status === 'done') return 1;
  if (t.estimatedRows === null || t.estimatedRows <= 0) return null;
  return Math.min(1, t.rowsDone / t.estimatedRows);
}

/**
 * One table as a bar line, e.g.
 * `public.invoice  [##########----------]  50%  100.0k/200.0k  25.0k rows/s  ETA 4s`.
 */
export function formatProgressLine(t: TableProgress, rate: TableRate, options: { barWidth?: number; nameWidth?: number } = {}): string {
  const width = options.barWidth ?? 20;
  const name = t.table.padEnd(options.nameWidth ?? t.table.length);
  const f = fractionDone(t);
  const filled = f === null ? 0 : Math.round(f * width);
  const bar = f === null ? '?'.repeat(width) : `${'#'.repeat(filled)}${'-'.repeat(width - filled)}`;
  const pct = f === null ? '  ?%' : `${String(Math.floor(f * 100)).padStart(3)}%`;
  const total = t.estimatedRows === null ? '?' : formatCount(Math.max(t.estimatedRows, t.rowsDone));
  const rateText = rate.rowsPerSecond === null ? '-- rows/s' : `${formatCount(rate.rowsPerSecond)} rows/s`;
  const tail = t.status === 'done' ? 'done' : t.status === 'pending' ? 'pending' : `ETA ${formatDuration(etaSeconds(t, rate.rowsPerSecond))}`;
  return `${name}  [${bar}] ${pct}  ${formatCount(t.rowsDone)}/${total}  ${rateText}  ${tail}`;
}

/** One table as a structured log record (one JSON line). */
export function formatProgressRecord(progress: SnapshotProgress, t: TableProgress, rate: TableRate, now: Date): string {
  const eta = etaSeconds(t, rate.rowsPerSecond);
  return JSON.stringify({
    time: now.toISOString(),
    msg: 'snapshot progress',
    generation: progress.generation,
    kind: progress.kind,
    table: t.table,
    status: t.status,
    rowsDone: t.rowsDone,
    estimatedRows: t.estimatedRows,
    rowsPerSecond: rate.rowsPerSecond === null ? null : Math.round(rate.rowsPerSecond),
    etaSeconds: eta === null ? null : Math.round(eta),
  });
}

export interface ProgressReporterOptions {
  /** Default: `process.stderr`. */
  readonly output?: { write(text: string): unknown; isTTY?: boolean };
  /** Seconds between JSON lines (non-TTY) or redraws (TTY). Default: 10 s non-TTY, 0.25 s TTY. */
  readonly intervalMs?: number;
  /** Clock (tests). Default: `Date.now`. */
  readonly now?: () => number;
}

export interface ProgressReporter {
  /** Latest progress; output happens at most once per interval. */
  update(progress: SnapshotProgress): void;
  /** Writes the final state. */
  close(): void;
}

export function createProgressReporter(options: ProgressReporterOptions = {}): ProgressReporter {
  const out = options.output ?? process.stderr;
  const tty = out.isTTY === true;
  const interval = options.intervalMs ?? (tty ? 250 : 10_000);
  const now = options.now ?? Date.now;
  const samples = new Map<string, { at: number; rows: number; rate: number | null }>();
  let last: SnapshotProgress | null = null;
  let lastWrite = -Infinity;
  let drawnLines = 0;

  const rateOf = (t: TableProgress, at: number): TableRate => {
    const s = samples.get(t.table);
    if (!s) {
      samples.set(t.table, { at, rows: t.rowsDone, rate: null });
      return { rowsPerSecond: null };
    }
    if (at - s.at >= 1000 && t.rowsDone >= s.rows) {
      const rate = ((t.rowsDone - s.rows) * 1000) / (at - s.at);
      samples.set(t.table, { at, rows: t.rowsDone, rate });
      return { rowsPerSecond: rate };
    }
    return { rowsPerSecond: s.rate };
  };

  const write = (p: SnapshotProgress, at: number) => {
    const rates = p.tables.map((t) => rateOf(t, at));
    if (tty) {
      const nameWidth = Math.max(...p.tables.map((t) => t.table.length));
      const lines = p.tables.map((t, i) => formatProgressLine(t, rates[i]!, { nameWidth }));
      // Move up over the previous drawing and clear each line (ANSI CSI sequences).
      const up = drawnLines > 0 ? `\x1b[${drawnLines}F` : '';
      out.write(`${up}${lines.map((l) => `\x1b[2K${l}`).join('\n')}\n`);
      drawnLines = lines.length;
    } else {
      const date = new Date(at);
      for (let i = 0; i < p.tables.length; i++) {
        const t = p.tables[i]!;
        if (t.status === 'pending') continue;
        out.write(`${formatProgressRecord(p, t, rates[i]!, date)}\n`);
      }
    }
    lastWrite = at;
  };

  return {
    update(p) {
      last = p;
      const at = now();
      if (at - lastWrite >= interval) write(p, at);
    },
    close() {
      if (last) write(last, now());
    },
  };
}
