// Partitions: a stable hash of the stream name picks each stream's partition, so one stream's
// events always go to one runner, in order, whatever the number of processes restarted.

/** FNV-1a, 32-bit, over the UTF-8 bytes of `text`. Stable across processes and versions: never change it. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** The partition (0 … count − 1) that owns `stream`. */
export function partitionOf(stream: string, count: number): number {
  return count <= 1 ? 0 : fnv1a32(stream) % count;
}

/** The checkpoint row's partition key: `index/count`. A different count is a different set of checkpoints. */
export function partitionKey(partition: { readonly count: number; readonly index: number }): string {
  return `${partition.index}/${partition.count}`;
}
