/**
 * `/healthz` and `/readyz` decisions, pure. Health: the process answers (which proves its event
 * loop turns) and its pipeline has neither failed nor stopped — a supervisor restarts it when
 * not. Readiness: it does its job right now — streams the slot, the source connected, the
 * destination up, freshness within the limit; every failing condition is named, so a 503 says
 * why.
 */
import type { StatusDocument } from './types.js';

type ReadinessInput = Pick<StatusDocument, 'state' | 'role' | 'source' | 'destination' | 'freshness' | 'slot'>;

export function health(state: StatusDocument['state']): StatusDocument['health'] {
  if (state === 'failed') return { ok: false, reason: 'the pipeline stopped after a fatal error (see the log and lastError in /status.json)' };
  if (state === 'stopped') return { ok: false, reason: 'the pipeline has stopped' };
  return { ok: true, reason: null };
}

export function readiness(s: ReadinessInput): StatusDocument['ready'] {
  const reasons: string[] = [];
  if (s.state !== 'running') reasons.push(`state is ${s.state}, not running`);
  else if (s.role !== 'leader') reasons.push('not streaming the slot (standby)');
  if (s.state === 'running' && !s.source.connected) reasons.push(`source ${s.source.state ?? 'not started'}${s.source.lastError ? `: ${s.source.lastError}` : ''}`);
  if (!s.destination.up) reasons.push(`destination ${s.destination.state ?? 'not connected'}${s.destination.lastError ? `: ${s.destination.lastError}` : ''}`);
  if (s.freshness.seconds === null) reasons.push('freshness unknown: no heartbeat or transaction durable yet');
  else if (s.freshness.seconds > s.freshness.maxSeconds) reasons.push(`freshness ${s.freshness.seconds.toFixed(1)} s is above ${s.freshness.maxSeconds} s`);
  if (s.slot?.walStatus === 'lost') reasons.push("the slot's wal_status is lost: a rebuild is needed");
  return { ok: reasons.length === 0, reasons };
}
