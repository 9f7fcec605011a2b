/**
 * Structured logs: one line per notable event. `json` writes one JSON object per line
 * (`{"time","level","msg",...fields}`), `pretty` a human line. Fields pass through the
 * configuration's redactor first, so no secret reaches a log.
 */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export type LogFormat = 'json' | 'pretty';

export interface CreateLoggerOptions {
  /** Default: `json`. */
  readonly format?: LogFormat;
  /** Where lines go. Default: `process.stderr`. */
  readonly write?: (line: string) => void;
}

function safe(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v instanceof Error ? { name: v.name, message: v.message } : v));
}

export function createLogger(options: CreateLoggerOptions = {}): Logger {
  const format = options.format ?? 'json';
  const write = options.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  const emit = (level: string, message: string, fields?: Record<string, unknown>): void => {
    if (format === 'json') {
      write(safe({ time: new Date().toISOString(), level, msg: message, ...fields }));
      return;
    }
    const rest = fields && Object.keys(fields).length > 0 ? ` ${Object.entries(fields).map(([k, v]) => `${k}=${typeof v === 'string' ? v : safe(v)}`).join(' ')}` : '';
    write(`${new Date().toISOString()} ${level.toUpperCase().padEnd(5)} ${message}${rest}`);
  };
  return {
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
  };
}

/** Drops everything (tests, benchmarks). */
export const silentLogger: Logger = { info() {}, warn() {}, error() {} };
