// What `event-assembler project parked` and `project parked replay` print: an aligned table for
// people, one JSON document for machines (positions and revisions as decimal strings: they exceed 2^53).
import type { AllPosition, ParkedEvent, ParkedReplayKind, ParkedReplayOutcome, ParkedReplayResult } from '../../consumer/index.js';

function positionText(position: AllPosition): string {
  return `${position.commit}/${position.prepare}`;
}

function positionJson(position: AllPosition): { commit: string; prepare: string } {
  return { commit: position.commit.toString(), prepare: position.prepare.toString() };
}

/** Columns aligned, the last one left as long as it is. */
function table(header: readonly string[], rows: readonly string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)];
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ');
}

/** The parked events, a line each, after a count. */
export function parkedTable(parked: readonly ParkedEvent[]): string {
  if (parked.length === 0) return 'no parked events';
  const header = ['PROJECTION', 'PARTITION', 'EVENT', 'TYPE', 'STREAM@REVISION', 'POSITION', 'ATTEMPTS', 'PARKED AT', 'ERROR'];
  const rows = parked.map((p) => [
    p.projection,
    p.partition,
    p.eventId,
    p.type,
    `${p.stream}@${p.revision}`,
    positionText(p.position),
    String(p.attempts),
    p.parkedAt.toISOString(),
    oneLine(`${p.error.name}: ${p.error.message}`),
  ]);
  return [`${parked.length} parked event${parked.length === 1 ? '' : 's'}`, '', ...table(header, rows)].join('\n');
}

export function parkedJson(parked: readonly ParkedEvent[]): string {
  return JSON.stringify(
    {
      parked: parked.map((p) => ({
        projection: p.projection,
        partition: p.partition,
        eventId: p.eventId,
        type: p.type,
        stream: p.stream,
        revision: p.revision.toString(),
        position: positionJson(p.position),
        attempts: p.attempts,
        // The stack stays in the table (error_stack): under tsx it can run to kilobytes.
        error: { name: p.error.name, message: p.error.message },
        parkedAt: p.parkedAt.toISOString(),
        data: p.data,
        metadata: p.metadata,
      })),
    },
    null,
    2,
  );
}

/** How each outcome reads in the table and the summary. */
const WORDS: Record<ParkedReplayKind, string> = {
  applied: 'applied',
  alreadyApplied: 'already applied',
  notParked: 'no longer parked',
  superseded: 'superseded (kept parked)',
  entityDeleted: 'entity deleted (kept parked)',
  unhandled: 'no handler (kept parked)',
  failed: 'failed again (kept parked)',
};

function detailOf(o: ParkedReplayOutcome): string {
  if (o.outcome === 'failed') return `attempt ${o.attempts}: ${oneLine(`${o.cause?.name ?? 'Error'}: ${o.cause?.message ?? ''}`)}`;
  if (o.outcome === 'applied' && o.olderThanEntity) return 'older than its entity (--include-superseded)';
  if (o.outcome === 'superseded') return 'its entity has a newer version; --include-superseded applies it';
  if (o.outcome === 'entityDeleted') return 'its entity was deleted after it';
  return '';
}

/** One sentence: how many, and what became of them. */
function replaySummary(result: ParkedReplayResult): string {
  const { totals } = result;
  if (totals.selected === 0) return `no parked events of ${result.key} to replay`;
  const parts = (Object.keys(WORDS) as ParkedReplayKind[]).filter((k) => totals[k] > 0).map((k) => `${totals[k]} ${WORDS[k]}`);
  return `replayed ${totals.selected} parked event${totals.selected === 1 ? '' : 's'} of ${result.key}: ${parts.join(', ')}`;
}

export function replayTable(result: ParkedReplayResult): string {
  if (result.outcomes.length === 0) return replaySummary(result);
  const header = ['EVENT', 'TYPE', 'STREAM@REVISION', 'OUTCOME', 'DETAIL'];
  const rows = result.outcomes.map((o) => [o.eventId, o.type, `${o.stream}@${o.revision}`, o.outcome, detailOf(o)]);
  return [...table(header, rows), '', replaySummary(result)].join('\n');
}

export function replayJson(result: ParkedReplayResult): string {
  return JSON.stringify(
    {
      projection: result.projection,
      key: result.key,
      resolved: result.resolved,
      totals: result.totals,
      outcomes: result.outcomes.map((o) => ({ ...o, revision: o.revision.toString(), position: positionJson(o.position) })),
    },
    null,
    2,
  );
}
