/**
 * PostgreSQL `TimestampTz` → ISO 8601 text, as a transaction's commit time is given to everything
 * downstream (`source.commitTime` in each event's metadata, lag, status).
 *
 * Written byte by byte into one buffer and read as one string: built by concatenation (nine
 * parts) it was a tree of cons strings, and every transaction in flight held its tree until
 * durable — the assembler's young collections copied them all (2026-12-07, bench/results).
 */

/** Milliseconds between 1970-01-01 and 2000-01-01 (PostgreSQL's epoch). */
const PG_EPOCH_MS = 946_684_800_000;
const DAY_MS = 86_400_000;

/** `YYYY-MM-DDTHH:MM:SS.ffffffZ`: the text is laid out here (ASCII, one byte per character). */
const text = Buffer.alloc(27);
/** The UTC day last formatted: its first millisecond (its `YYYY-MM-DDT` is in `text`); commit times come in order, mostly the same day. */
let cachedDayStart = Number.NaN;

function digits2(at: number, n: number): void {
  text[at] = 48 + Math.floor(n / 10);
  text[at + 1] = 48 + (n % 10);
}

function digits3(at: number, n: number): void {
  text[at] = 48 + Math.floor(n / 100);
  text[at + 1] = 48 + (Math.floor(n / 10) % 10);
  text[at + 2] = 48 + (n % 10);
}

/**
 * PostgreSQL `TimestampTz` (int64 microseconds since 2000-01-01 UTC, given as signed high and
 * unsigned low 32-bit halves) → `YYYY-MM-DDTHH:MM:SS.ffffffZ`. Exact for any timestamp
 * PostgreSQL accepts (|µs| < 2^53 covers ±285 years around 2000 exactly; beyond that the
 * millisecond part stays exact because the value is split before conversion).
 */
export function pgTimestampToIso(hi: number, lo: number): string {
  if (hi === 0x7fffffff && lo === 0xffffffff) return 'infinity';
  if (hi === -0x80000000 && lo === 0) return '-infinity';
  // Split into whole milliseconds and the microsecond remainder without losing precision:
  // hi*2^32 = hi*4294967*1000 + hi*296.
  const hiMs = hi * 4_294_967;
  const rest = hi * 296 + lo; // |rest| < 2^41, exact
  let ms = hiMs + Math.floor(rest / 1000);
  let micros = rest - Math.floor(rest / 1000) * 1000;
  if (micros < 0) { micros += 1000; ms -= 1; }
  const unixMs = ms + PG_EPOCH_MS;
  let offset = unixMs - cachedDayStart;
  if (!(offset >= 0 && offset < DAY_MS)) {
    const iso = new Date(unixMs).toISOString();
    // Four-digit years only (the ±YYYYYY forms are not cached).
    if (iso.length !== 24) return `${iso.slice(0, -1)}${String(micros).padStart(3, '0')}Z`;
    cachedDayStart = unixMs - (((unixMs % DAY_MS) + DAY_MS) % DAY_MS);
    text.write(iso.slice(0, 11), 0, 'latin1');
    text[13] = text[16] = 0x3a; // ':'
    text[19] = 0x2e; // '.'
    text[26] = 0x5a; // 'Z'
    offset = unixMs - cachedDayStart;
  }
  digits2(11, Math.floor(offset / 3_600_000));
  digits2(14, Math.floor(offset / 60_000) % 60);
  digits2(17, Math.floor(offset / 1000) % 60);
  digits3(20, offset % 1000);
  digits3(23, micros);
  return text.toString('latin1', 0, 27);
}
