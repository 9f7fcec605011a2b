/**
 * Per-second rates of cumulative values (snapshot rows per table) from the readings taken so far:
 * the change over the last `windowMs` of samples. Readings happen at each scrape or status
 * request, so the rate is as fine as they are frequent; with one sample it is `null`.
 */
export interface RateTracker {
  /** Records `value` for `key` at `now` and gives the rate over the window (`null`: not enough samples). */
  sample(key: string, value: number, now: number): number | null;
}

export function createRateTracker(windowMs: number): RateTracker {
  const series = new Map<string, { at: number; value: number }[]>();
  return {
    sample(key, value, now) {
      let samples = series.get(key);
      if (!samples) series.set(key, (samples = []));
      const last = samples[samples.length - 1];
      if (last && value < last.value) samples.length = 0; // a new generation started over
      if (!last || now > last.at) samples.push({ at: now, value });
      while (samples.length > 2 && now - samples[1]!.at >= windowMs) samples.shift();
      const first = samples[0]!;
      const newest = samples[samples.length - 1]!;
      if (newest.at === first.at) return null;
      return ((newest.value - first.value) * 1000) / (newest.at - first.at);
    },
  };
}
