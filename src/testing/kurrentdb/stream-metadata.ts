// Stream metadata as the store reads it: the `$$<stream>` metastream naming, and the settings of a
// `$metadata` document that change what a read sees or whether the stream counts as deleted
// (`$tb`, `$maxCount`, `$maxAge`). Pure; the store looks up the document, this file reads it.

export interface StreamMetadataView {
  readonly truncateBefore: bigint | undefined;
  readonly maxCount: bigint | undefined;
  /** Seconds. */
  readonly maxAge: bigint | undefined;
}

export const NO_METADATA: StreamMetadataView = { truncateBefore: undefined, maxCount: undefined, maxAge: undefined };

export function metastreamOf(streamName: string): string {
  return `$$${streamName}`;
}

export function isMetastream(streamName: string): boolean {
  return streamName.startsWith('$$');
}

export function originalStreamOf(metastreamName: string): string {
  return metastreamName.slice(2);
}

/** `$tb` and `$maxCount` of a `$metadata` JSON document. Numbers are read as text: `$tb` can be 2^63-1. */
export function parseStreamMetadata(data: Uint8Array): StreamMetadataView {
  const text = Buffer.from(data).toString('utf8');
  const integer = (key: string): bigint | undefined => {
    const match = new RegExp(`"\\${key}"\\s*:\\s*(-?\\d+)`).exec(text);
    return match?.[1] === undefined ? undefined : BigInt(match[1]);
  };
  return { truncateBefore: integer('$tb'), maxCount: integer('$maxCount'), maxAge: integer('$maxAge') };
}
