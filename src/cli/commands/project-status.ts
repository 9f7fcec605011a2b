// `event-assembler project status`: where each projection partition stands — its checkpoint, the
// head of `$all`, how many of its events lie between them, how many it parked. Read-only: it
// reads the state tables and `$all`, and creates nothing.
import { BACKWARDS, END, eventTypeFilter, FORWARDS, START, streamNameFilter, KurrentDBClient } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { partitionOf, storeTables, type AllPosition, type Projection, type ResolvedProjectionConfig, type StoreTables } from '../../consumer/index.js';

/** Lag is counted event by event up to this many; beyond it the status says "at least". */
export const LAG_CAP = 10_000;

export interface PartitionStatusRow {
  readonly projection: string;
  /** `index/count`. */
  readonly partition: string;
  /** The stored checkpoint; `null`: nothing applied yet (or never started). */
  readonly position: AllPosition | null;
  /** When the checkpoint last moved; `null`: never started. */
  readonly updatedAt: string | null;
  /** Events of this projection partition after the checkpoint (at most `LAG_CAP`). */
  readonly lag: number;
  /** Whether counting stopped at `LAG_CAP` (the lag is at least that). */
  readonly lagCapped: boolean;
  /** Events parked in `projection_failed_events`. */
  readonly parked: number;
}

export interface ProjectStatusReport {
  /** The last event of `$all`; `null` when it is empty. */
  readonly head: AllPosition | null;
  readonly partitions: readonly PartitionStatusRow[];
}

interface StoredPartition {
  readonly partition: string;
  readonly position: AllPosition | null;
  readonly updatedAt: string | null;
  readonly parked: number;
}

/** Checkpoint rows and parked counts of one projection, by partition; none when the state tables do not exist yet. */
async function storedPartitions(client: pg.ClientBase, tables: StoreTables, projection: string): Promise<StoredPartition[]> {
  const exists = await client.query<{ found: boolean }>('SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AS found', [tables.checkpoints, tables.failedEvents]);
  if (!exists.rows[0]?.found) return [];
  const result = await client.query<{ partition: string; commit_position: string | null; prepare_position: string | null; updated_at: Date | null; parked: string }>(
    `SELECT p.partition, c.commit_position::text, c.prepare_position::text, c.updated_at, coalesce(f.parked, 0)::text AS parked
       FROM (SELECT partition FROM ${tables.checkpoints} WHERE projection = $1 UNION SELECT partition FROM ${tables.failedEvents} WHERE projection = $1) p
       LEFT JOIN ${tables.checkpoints} c ON c.projection = $1 AND c.partition = p.partition
       LEFT JOIN (SELECT partition, count(*) AS parked FROM ${tables.failedEvents} WHERE projection = $1 GROUP BY partition) f ON f.partition = p.partition
      ORDER BY p.partition`,
    [projection],
  );
  return result.rows.map((r) => ({
    partition: r.partition,
    position: r.commit_position === null || r.prepare_position === null ? null : { commit: BigInt(r.commit_position), prepare: BigInt(r.prepare_position) },
    updatedAt: r.updated_at?.toISOString() ?? null,
    parked: Number(r.parked),
  }));
}

async function headOfAll(kurrent: KurrentDBClient): Promise<AllPosition | null> {
  for await (const resolved of kurrent.readAll({ fromPosition: END, direction: BACKWARDS, maxCount: 1 })) {
    if (resolved.event) return { commit: resolved.event.position.commit, prepare: resolved.event.position.prepare };
  }
  return null;
}

function after(a: AllPosition, b: AllPosition | null): boolean {
  return b === null || a.commit > b.commit || (a.commit === b.commit && a.prepare > b.prepare);
}

/**
 * The projection partition's events after `from`: `$all` read forwards with the server-side filter
 * the runner subscribes with (event-feed.ts: stream prefixes, else event types), then the exact
 * category, type and partition — counted up to `LAG_CAP`.
 */
async function lagOf(kurrent: KurrentDBClient, projection: Projection<any>, partition: string, from: AllPosition | null): Promise<{ lag: number; capped: boolean }> {
  const [index, count] = partition.split('/').map(Number) as [number, number];
  const filter = projection.categories.length > 0 ? streamNameFilter({ prefixes: projection.categories.map((c) => `${c}-`) }) : eventTypeFilter({ prefixes: [...projection.types] });
  let lag = 0;
  // A read from a position includes the event at it (the runner's subscription starts after it).
  for await (const resolved of kurrent.readAll({ fromPosition: from === null ? START : from, direction: FORWARDS, filter })) {
    const event = resolved.event;
    if (!event || !after(event.position, from)) continue;
    const dash = event.streamId.indexOf('-');
    if (projection.categories.length > 0 && (dash <= 0 || !projection.categories.includes(event.streamId.slice(0, dash)))) continue;
    if (projection.types.length > 0 && !projection.types.includes(event.type)) continue;
    if (partitionOf(event.streamId, count) !== index) continue;
    if (++lag >= LAG_CAP) return { lag, capped: true };
  }
  return { lag, capped: false };
}

/** Every configured projection's partitions: those with state rows, and the configured one even before its first start. */
export async function projectStatus(config: ResolvedProjectionConfig): Promise<ProjectStatusReport> {
  const tables = storeTables(config.stateSchema);
  const client = new pg.Client({ connectionString: config.postgres });
  const kurrent = KurrentDBClient.connectionString(config.kurrentdb);
  try {
    await client.connect();
    const head = await headOfAll(kurrent);
    const partitions: PartitionStatusRow[] = [];
    const byName = new Map<string, Projection<any>[]>();
    for (const p of config.projections) byName.set(p.name, [...(byName.get(p.name) ?? []), p]);
    for (const [name, projections] of byName) {
      const stored = await storedPartitions(client, tables, name);
      for (const p of projections) {
        const key = `${p.partition.index}/${p.partition.count}`;
        if (!stored.some((s) => s.partition === key)) stored.push({ partition: key, position: null, updatedAt: null, parked: 0 });
      }
      for (const s of stored) {
        const { lag, capped } = await lagOf(kurrent, projections[0]!, s.partition, s.position);
        partitions.push({ projection: name, partition: s.partition, position: s.position, updatedAt: s.updatedAt, lag, lagCapped: capped, parked: s.parked });
      }
    }
    return { head, partitions };
  } finally {
    await client.end().catch(() => undefined);
    await kurrent.dispose().catch(() => undefined);
  }
}

function positionText(position: AllPosition | null): string {
  return position === null ? '-' : `${position.commit}/${position.prepare}`;
}

/** For machines: positions as decimal strings (they exceed 2^53). */
export function statusJson(report: ProjectStatusReport): string {
  const position = (p: AllPosition | null) => (p === null ? null : { commit: p.commit.toString(), prepare: p.prepare.toString() });
  return JSON.stringify({ head: position(report.head), lagCap: LAG_CAP, partitions: report.partitions.map((r) => ({ ...r, position: position(r.position) })) }, null, 2);
}

/** For people: one line per projection partition, columns aligned. */
export function statusTable(report: ProjectStatusReport): string {
  const header = ['PROJECTION', 'PARTITION', 'POSITION', 'LAG', 'PARKED', 'UPDATED'];
  const rows = report.partitions.map((r) => [r.projection, r.partition, positionText(r.position), r.lagCapped ? `${r.lag}+` : String(r.lag), String(r.parked), r.updatedAt ?? 'never started']);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [`head of $all: ${positionText(report.head)}`, '', line(header), ...rows.map(line)].join('\n');
}
