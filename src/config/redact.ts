/**
 * Secrets never reach a log line or an error message: connection strings are shown with their
 * password replaced, and every known secret value is masked wherever it appears in a text.
 */

const MASK = '***';

/**
 * `postgres://capture:s3cret@db:5432/app` → `postgres://capture:***@db:5432/app`; key/value
 * forms (`password=s3cret`) and `?password=` query parameters are masked too.
 */
export function redactConnectionString(value: string): string {
  return value
    .replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@?#\s]*:)([^@\s]*)@/i, `$1${MASK}@`)
    .replace(/([?&;\s]|^)(password|pass|pwd)=([^&;\s]*)/gi, `$1$2=${MASK}`);
}

/** Masks given secret values (and passwords inside connection strings) in texts and log fields. */
export interface Redactor {
  /** The text with every secret masked. */
  text(value: string): string;
  /** A deep copy of log fields with every string masked; errors become `{ name, code, message }`. */
  fields(fields: Record<string, unknown> | undefined): Record<string, unknown> | undefined;
  /** The same error, its message (and stack) masked in place. */
  error<E>(error: E): E;
}

/** Passwords of connection strings (URL or key/value form). */
function passwordsOf(connection: string): string[] {
  const found: string[] = [];
  const url = /^[a-z][a-z0-9+.-]*:\/\/[^:/@?#\s]*:([^@\s]*)@/i.exec(connection);
  if (url?.[1]) {
    found.push(url[1]);
    try {
      found.push(decodeURIComponent(url[1]));
    } catch {
      // not percent-encoded
    }
  }
  for (const m of connection.matchAll(/(?:[?&;\s]|^)(?:password|pass|pwd)=([^&;\s]*)/gi)) if (m[1]) found.push(m[1]);
  return found;
}

export function createRedactor(secrets: readonly (string | undefined | null)[] = []): Redactor {
  const values = new Set<string>();
  for (const secret of secrets) {
    if (!secret) continue;
    for (const p of passwordsOf(secret)) if (p.length >= 3) values.add(p);
  }
  const ordered = [...values].sort((a, b) => b.length - a.length);
  const text = (value: string): string => {
    let out = redactConnectionString(value);
    for (const secret of ordered) out = out.split(secret).join(MASK);
    return out;
  };
  const deep = (value: unknown, depth: number): unknown => {
    if (typeof value === 'string') return text(value);
    if (typeof value === 'bigint') return value.toString();
    if (value instanceof Error) {
      const code = (value as { code?: unknown }).code;
      return { name: value.name, ...(code !== undefined ? { code: String(code) } : {}), message: text(value.message) };
    }
    if (depth > 6 || value === null || typeof value !== 'object') return value;
    if (Array.isArray(value)) return value.map((v) => deep(v, depth + 1));
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, deep(v, depth + 1)]));
  };
  return {
    text,
    fields: (fields) => (fields === undefined ? undefined : (deep(fields, 0) as Record<string, unknown>)),
    error(error) {
      if (error instanceof Error) {
        try {
          error.message = text(error.message);
          if (error.stack) error.stack = text(error.stack);
        } catch {
          // frozen error: leave it
        }
      }
      return error;
    },
  };
}
