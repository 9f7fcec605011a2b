// The text form of `event-assembler status`: one block per source of truth (the slot, the
// checkpoint stream, the failed-records stream), values with their units.
import type { OfflineStatus } from '../../observability/offline-status.js';

export function formatBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = Math.abs(bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const sign = bytes < 0 ? '-' : '';
  return unit === 0 ? `${sign}${value} bytes` : `${sign}${value.toFixed(1)} ${units[unit]} (${bytes} bytes)`;
}

function seconds(s: number): string {
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

const row = (label: string, value: string): string => `  ${label.padEnd(20)}${value}`;

function slotLines(s: OfflineStatus['slot']): string[] {
  if (!s.exists) return [`slot ${s.slot}`, row('exists', 'no — create it with `event-assembler setup` (or the assembler with snapshot.mode initial)')];
  const d = s.decoding;
  return [
    `slot ${s.slot}`,
    row('active', s.active ? `yes (pid ${s.activePid ?? '?'}): an assembler streams it` : 'no: nothing streams it (the slot keeps retaining WAL)'),
    row('wal_status', `${s.walStatus ?? 'unknown'}${s.walStatus === 'lost' ? ' — history gone: rebuild (docs/running.md)' : s.walStatus === 'unreserved' ? ' — at risk of being lost' : ''}`),
    row('retained WAL', s.retainedWalBytes === null ? 'unknown' : formatBytes(s.retainedWalBytes)),
    row('safe WAL size', s.safeWalSizeBytes === null ? 'unlimited (max_slot_wal_keep_size = -1)' : formatBytes(s.safeWalSizeBytes)),
    row('lag', `${s.lagBytes === null ? 'unknown' : formatBytes(s.lagBytes)} (current ${s.currentWalLsn}, confirmed ${s.confirmedFlushLsn ?? '-'})`),
    row('restart_lsn', s.restartLsn ?? '-'),
    ...(d
      ? [row('decoded', `${d.totalTxns} transactions, ${formatBytes(d.totalBytes)}; spilled ${d.spillTxns} (${formatBytes(d.spillBytes)}); streamed ${d.streamTxns} (${formatBytes(d.streamBytes)})`)]
      : []),
  ];
}

export function formatStatus(status: OfflineStatus): string {
  const c = status.checkpoint;
  const ahead = c.slotAheadBytes;
  const lines = [
    `event-assembler status: ${status.name} (read ${status.at})`,
    '',
    ...slotLines(status.slot),
    row('server', status.server),
    row('failover', status.failover ? status.failover.summary : 'unknown (could not be read)'),
    '',
    `checkpoint ${c.stream}`,
    row('position', c.endLsn === null ? 'none recorded yet' : `${c.endLsn}${c.timeline !== null ? ` on timeline ${c.timeline}` : ''}${c.idle ? ' (idle: keepalive position)' : ''}`),
    row('recorded', c.recordedAt === null ? '-' : `${c.recordedAt} (${seconds(c.ageSeconds ?? 0)} ago)`),
    row('slot vs record', ahead === null ? '-' : ahead > 0 ? `slot ahead by ${formatBytes(ahead)}: REBUILD_NEEDED at the next start` : 'in step (the slot is not ahead of the record)'),
    '',
    `failed records ${status.failed.stream}`,
    row('records', `${status.failed.records}${status.failed.lastAt ? ` (latest ${status.failed.lastAt})` : ''}`),
  ];
  return `${lines.join('\n')}\n`;
}
