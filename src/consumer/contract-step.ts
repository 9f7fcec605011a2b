// Contracts on the receiving side: each event validated against the contract it was written
// with, then upcast to the newest version of its type, so handlers see one shape per type.
import { loadContractRegistry } from '../contracts/load.js';
import type { ContractRegistry } from '../contracts/registry.js';
import { upcast, type Upcaster } from '../contracts/upcasters.js';
import { ContractError } from '../contracts/errors.js';
import type { ProjectionEvent } from './types.js';

/** Turns a recorded event into the one its handler receives; throws (a `ContractError`) when it breaks its contract. */
export type ContractStep = (event: ProjectionEvent) => ProjectionEvent;

/** No contracts configured: events pass as recorded. */
export const passThrough: ContractStep = (event) => event;

export function contractStepFor(registry: ContractRegistry, upcasters: readonly Upcaster[]): ContractStep {
  return (event) => {
    if (event.version === null) {
      throw new ContractError('CONTRACT_UNKNOWN', `event ${event.type} ${event.id} (stream ${event.stream}) names no contract version in its metadata ("contract": "type@version")`, {
        type: event.type,
        eventId: event.id,
      });
    }
    registry.assertValid(event.type, event.version, event.data);
    const latest = upcast(registry, upcasters, { type: event.type, version: event.version, data: event.data });
    return latest.version === event.version ? event : { ...event, version: latest.version, data: latest.data };
  };
}

/** Loads the registry once, at start-up. */
export async function loadContractStep(options: { readonly dir: string; readonly upcasters?: readonly Upcaster[] } | undefined): Promise<ContractStep> {
  if (!options) return passThrough;
  return contractStepFor(await loadContractRegistry(options.dir), options.upcasters ?? []);
}
