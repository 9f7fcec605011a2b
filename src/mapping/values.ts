/** Structural equality for row values: primitives, bigint, Buffer, Date, arrays and JSON objects. */
export function valuesEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return Number.isNaN(a) && Number.isNaN(b);
  if (Buffer.isBuffer(a) || Buffer.isBuffer(b)) return Buffer.isBuffer(a) && Buffer.isBuffer(b) && a.equals(b);
  if (a instanceof Date || b instanceof Date) return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => valuesEqual(v, b[i]));
  }
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  const ka = Object.keys(ra);
  return ka.length === Object.keys(rb).length && ka.every((k) => Object.prototype.hasOwnProperty.call(rb, k) && valuesEqual(ra[k], rb[k]));
}

/**
 * The first path at which `a` and `b` differ (`[0].data.issuedAt`), or `null` when equal.
 * Used by the purity check to point at the offending field.
 */
export function firstDifference(a: unknown, b: unknown, path = ''): string | null {
  if (valuesEqual(a, b)) return null;
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && !Buffer.isBuffer(a) && !(a instanceof Date)) {
    if (Array.isArray(a) && Array.isArray(b)) {
      if (a.length !== b.length) return path ? `${path}.length` : 'length';
      for (let i = 0; i < a.length; i++) {
        const d = firstDifference(a[i], b[i], `${path}[${i}]`);
        if (d !== null) return d;
      }
    } else if (!Array.isArray(a) && !Array.isArray(b)) {
      const ra = a as Record<string, unknown>;
      const rb = b as Record<string, unknown>;
      for (const k of [...new Set([...Object.keys(ra), ...Object.keys(rb)])]) {
        const d = firstDifference(ra[k], rb[k], path ? `${path}.${k}` : k);
        if (d !== null) return d;
      }
    }
  }
  return path || '(root)';
}

export function valueAt(root: unknown, path: string): unknown {
  if (path === '(root)') return root;
  let value: unknown = root;
  for (const part of path.match(/[^.[\]]+/g) ?? []) value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[part] : undefined;
  return value;
}
