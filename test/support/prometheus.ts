// Reading the observability endpoints in tests: a scrape of /metrics parsed into samples, and
// JSON endpoints with their status codes.

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Scrape {
  readonly text: string;
  readonly samples: readonly Sample[];
  /** The value of `name` with exactly these labels (a subset match), or `undefined` when absent. */
  value(name: string, labels?: Record<string, string>): number | undefined;
}

/** Parses Prometheus text exposition (what prom-client writes: no timestamps, escaped label values). */
export function parseMetrics(text: string): Scrape {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const m of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!.replace(/\\(.)/g, (_s, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return {
    text,
    samples,
    value(name, labels = {}) {
      return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
    },
  };
}

export async function scrape(baseUrl: string): Promise<Scrape> {
  const res = await fetch(`${baseUrl}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parseMetrics(await res.text());
}

export async function getJson<T = Record<string, unknown>>(url: string): Promise<{ status: number; body: T }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as T };
}
