/** The two builds an A/B bench compares: EA_BENCH_PAIR=label=dir,label=dir (dirs of `tsc -p tsconfig.build.json` output, from the repository root). */
export interface PairBuild {
  readonly label: string;
  readonly dir: string;
}

export function pairBuilds(): [PairBuild, PairBuild] {
  const builds = (process.env.EA_BENCH_PAIR ?? '').split(',').filter(Boolean).map((entry) => {
    const [label, dir] = entry.includes('=') ? entry.split('=') : [entry, entry];
    return { label: label!, dir: dir! };
  });
  if (builds.length !== 2) throw new Error('EA_BENCH_PAIR: two builds, label=dir,label=dir (tsc -p tsconfig.build.json outputs from the repository root, e.g. base=.tmp/bench-base,new=.tmp/bench-build)');
  return [builds[0]!, builds[1]!];
}
