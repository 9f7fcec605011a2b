// Shared by the schema evolution test: a `shipment` table of the test's own beside the invoicing
// schema (so the invoicing workload keeps writing, unaffected, while shipment's shape changes),
// its mapper in the versions an operator would deploy after each change, its two contracts in a
// copy of the invoicing contracts, and the line: the assembler in-process, started, halted and
// restarted with other mappers.
import { cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { EventAssemblerError } from '../../src/errors.js';
import { defineMapper, type AnyMapper } from '../../src/mapping/index.js';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import type { Row } from '../../src/source/types.js';
import { mappers as invoicingMappers } from '../../examples/invoicing/index.js';
import type { LogLine, PipelineRig } from './pipeline-rig.js';
import { contractDocument } from '../support/contract-document.js';

export const SHIPMENT = 'public.shipment';

/** The shipment table, captured by the rig's role and publication like the invoicing tables. */
export async function addShipmentTable(rig: PipelineRig): Promise<void> {
  const role = decodeURIComponent(new URL(rig.captureUrl).username);
  await rig.sql(`CREATE TABLE ${SHIPMENT} (id text PRIMARY KEY, carrier text NOT NULL, weight numeric(8,2), note text)`);
  await rig.sql(`GRANT SELECT ON ${SHIPMENT} TO ${role}`);
  await rig.sql(`ALTER PUBLICATION ${rig.publication} ADD TABLE ${SHIPMENT}`);
}

const weightSchema = { type: ['string', 'null'], pattern: '^-?[0-9]+(\\.[0-9]+)?$', description: 'shipment.weight, a decimal string' };

function shipmentContract(type: string, description: string): object {
  return contractDocument({
    domain: 'shipping', type, description,
    required: ['shipmentId', 'carrier', 'weight'],
    properties: { shipmentId: { type: 'string', minLength: 1 }, carrier: { type: 'string', minLength: 1 }, weight: weightSchema },
  });
}

/** The invoicing contracts and ShipmentRecorded v1 / ShipmentChanged v1, in `dir`/contracts. */
export function shipmentContracts(dir: string): string {
  const copy = join(dir, 'contracts');
  cpSync('contracts/invoicing', copy, { recursive: true });
  writeFileSync(join(copy, 'ShipmentRecorded.v1.schema.json'), JSON.stringify(shipmentContract('ShipmentRecorded', 'A shipment was recorded (insert into shipment).'), null, 2));
  writeFileSync(join(copy, 'ShipmentChanged.v1.schema.json'), JSON.stringify(shipmentContract('ShipmentChanged', 'A shipment changed (update of shipment).'), null, 2));
  return copy;
}

export interface ShipmentsMapperOptions {
  /** The column holding the carrier. Default: `carrier`. */
  readonly carrier?: string;
  /**
   * How `weight` is read: `as-is` (allowlisted, passed on as decoded: a numeric decodes as a
   * string, a float8 as a number), `as-text` (allowlisted, passed on as a decimal string),
   * `none` (not allowlisted; the events say null). Default: `as-is`.
   */
  readonly weight?: 'as-is' | 'as-text' | 'none';
  /** The table it reads. Default: {@link SHIPMENT}. */
  readonly table?: string;
}

/** The `shipments` mapper: ShipmentRecorded on insert, ShipmentChanged on update; allowlists id, the carrier and (but for `none`) weight. */
export function shipmentsMapper(options: ShipmentsMapperOptions = {}): AnyMapper {
  const carrier = options.carrier ?? 'carrier';
  const table = options.table ?? SHIPMENT;
  const weightMode = options.weight ?? 'as-is';
  const columns = weightMode === 'none' ? ['id', carrier] : ['id', carrier, 'weight'];
  const weight = (row: Row): unknown => {
    if (weightMode === 'none' || row['weight'] === null) return null;
    return weightMode === 'as-text' ? String(row['weight']) : row['weight'];
  };
  const data = (row: Row) => ({ shipmentId: String(row['id']), carrier: row[carrier], weight: weight(row) });
  return defineMapper({
    name: 'shipments',
    tables: { [table]: { columns } },
    map: (tx) =>
      tx.changes(table).flatMap((change) => {
        if (change.op !== 'insert' && change.op !== 'update') return [];
        const type = change.op === 'insert' ? 'ShipmentRecorded' : 'ShipmentChanged';
        return [{ stream: `shipment-${String(change.after['id'])}`, type, version: 1, data: data(change.after) }];
      }),
  });
}

export interface SchemaLine {
  /** Starts an assembler with the invoicing mappers and `shipments`; resolves once it streams. */
  start(shipments: AnyMapper): Promise<void>;
  /** Waits (with a deadline) for the running assembler to stop with a fatal error, and returns it. */
  halted(timeoutMs?: number): Promise<EventAssemblerError>;
  /** Stops the running assembler gracefully. */
  stop(): Promise<void>;
  assembler(): Assembler;
  /** The running (or last) assembler's log lines. */
  lines(): readonly LogLine[];
}

export function createSchemaLine(rig: PipelineRig, contracts: string): SchemaLine {
  let current: { assembler: Assembler; run: Promise<unknown>; logger: ReturnType<PipelineRig['logger']> } | null = null;
  return {
    async start(shipments) {
      const logger = rig.logger();
      // A restart right after a halt may find the slot still held a moment by the old walsender: ask again soon.
      const assembler = createAssembler(rig.config({ mappers: [...invoicingMappers, shipments], contracts: { dir: contracts }, standby: { pollIntervalMs: 100 } }), { logger });
      const run = assembler.run();
      run.catch(() => undefined); // awaited by halted() or stop()
      current = { assembler, run, logger };
      await rig.until(() => expect(['running', 'failed']).toContain(assembler.status().state), 30_000);
    },
    async halted(timeoutMs = 20_000) {
      const { run } = current!;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<'deadline'>((resolve) => (timer = setTimeout(() => resolve('deadline'), timeoutMs)));
      const outcome = await Promise.race([run.then(() => 'resolved' as const, (error: unknown) => ({ error })), deadline]);
      clearTimeout(timer);
      if (outcome === 'deadline' || outcome === 'resolved') throw new Error(`expected the assembler to halt with a fatal error; it ${outcome === 'deadline' ? `still runs after ${timeoutMs} ms` : 'stopped without one'}`);
      expect(outcome.error).toBeInstanceOf(EventAssemblerError);
      return outcome.error as EventAssemblerError;
    },
    async stop() {
      if (!current) return;
      await current.assembler.stop();
      await current.run.catch(() => undefined);
    },
    assembler: () => current!.assembler,
    lines: () => current?.logger.lines ?? [],
  };
}
