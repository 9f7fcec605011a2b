// The names of everything the demo creates. On your own servers (--source, --kurrentdb) each
// carries a run tag, so runs never collide with each other or with what is already there;
// on the demo's own servers the plain names read better.
import { randomBytes } from 'node:crypto';

export interface DemoNames {
  /** True on a server the demo did not start: everything it creates there is dropped afterwards. */
  readonly shared: boolean;
  /** The assembler's name (part of event ids and of its checkpoint stream). */
  readonly assembler: string;
  /** The schema holding the example's tables: the demo reads and writes nothing outside it. */
  readonly schema: string;
  readonly slot: string;
  readonly referenceSlot: string;
  readonly publication: string;
  readonly role: string;
  /** Prefix of the workload's ids, hence of its streams (none on the demo's own servers). */
  readonly idPrefix: string | undefined;
}

export function demoNames(options: { readonly source?: string; readonly kurrentdb?: string }): DemoNames {
  const shared = options.source !== undefined || options.kurrentdb !== undefined;
  if (!shared) {
    return { shared, assembler: 'invoicing', schema: 'invoicing', slot: 'invoicing_assembler', referenceSlot: 'invoicing_assembler_ref', publication: 'invoicing', role: 'invoicing_capture', idPrefix: undefined };
  }
  const tag = randomBytes(3).toString('hex');
  return {
    shared,
    assembler: `invoicing-demo-${tag}`,
    schema: `demo_${tag}`,
    slot: `demo_${tag}`,
    referenceSlot: `demo_${tag}_ref`,
    publication: `demo_${tag}`,
    role: `demo_capture_${tag}`,
    idPrefix: `r${tag}`,
  };
}
