// The alert rules (ops/alerts.yml) are valid Prometheus rules and do what their unit tests
// (ops/alerts.test.yml) say: both run through the real promtool. promtool comes from the Debian
// package `prometheus` (`.ci/run` installs it where missing); without it this test FAILS — it
// never passes silently. The structure is checked too: every alert has a severity, a summary, a
// description and a runbook_url whose section exists in docs/runbook.md, and the promtool tests
// make every alert fire and also keep it silent. PROMTOOL=<path> runs another promtool binary.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const rulesFile = 'ops/alerts.yml';
const testsFile = 'ops/alerts.test.yml';
const read = (file: string) => readFileSync(join(root, file), 'utf8');

const PROMTOOL = process.env['PROMTOOL'] ?? 'promtool';

function promtool(args: string[]): { code: number | null; output: string } {
  const result = spawnSync(PROMTOOL, args, { cwd: root, encoding: 'utf8', timeout: 60_000 });
  if (result.error && (result.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error(
      `promtool is missing${process.env['CI'] ? ' in CI' : ''} (${PROMTOOL} not found): install the Debian package "prometheus" (apt-get install -y prometheus), ` +
        'as .ci/run does — the alert rules cannot be checked without it',
    );
  }
  if (result.error) throw result.error;
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

/** Each rule of alerts.yml: its name and the text of its block (up to the next rule). */
function alertBlocks(text: string): { name: string; block: string }[] {
  const parts = text.split(/^\s*- alert: /m).slice(1);
  return parts.map((part) => ({ name: part.split('\n')[0]!.trim(), block: part }));
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces → '-'. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** Per alert name: whether the promtool tests expect it firing (non-empty exp_alerts) and silent (`exp_alerts: []`). */
function coverage(text: string): Map<string, { fires: boolean; silent: boolean }> {
  const out = new Map<string, { fires: boolean; silent: boolean }>();
  const cases = text.split(/^\s*- eval_time: /m).slice(1);
  for (const c of cases) {
    const name = /alertname: (\S+)/.exec(c)?.[1];
    if (!name) continue;
    const entry = out.get(name) ?? { fires: false, silent: false };
    if (/exp_alerts: \[\]/.test(c)) entry.silent = true;
    else if (/exp_alerts:\s*\n\s*- exp_labels:/.test(c)) entry.fires = true;
    out.set(name, entry);
  }
  return out;
}

describe('ops/alerts.yml', () => {
  const alerts = alertBlocks(read(rulesFile));

  it('passes promtool check rules', () => {
    const { code, output } = promtool(['check', 'rules', rulesFile]);
    expect(output).toContain(`SUCCESS: ${alerts.length} rules found`);
    expect(code, output).toBe(0);
  });

  it('passes its unit tests (promtool test rules ops/alerts.test.yml)', () => {
    const { code, output } = promtool(['test', 'rules', testsFile]);
    expect(code, output).toBe(0);
    expect(output).toContain('SUCCESS');
  });

  it('covers what the runbook promises: retention, wal_status, freshness, failed records, checkpoint age, no leader', () => {
    const text = read(rulesFile);
    for (const metric of [
      'event_assembler_slot_retained_wal_bytes',
      'event_assembler_slot_wal_status{status="unreserved"}',
      'event_assembler_slot_wal_status{status="lost"}',
      'event_assembler_freshness_seconds',
      'event_assembler_failed_records_total',
      'event_assembler_checkpoint_age_seconds',
      'event_assembler_leader',
      'absent(event_assembler_leader)',
    ]) {
      expect(text).toContain(metric);
    }
    expect(alerts.map((a) => a.name)).toHaveLength(7);
  });

  it('gives every alert a severity, a summary, a description and a runbook section that exists', () => {
    const anchors = new Set(read('docs/runbook.md').split('\n').filter((l) => /^#{2,3} /.test(l)).map((l) => slug(l.replace(/^#+ /, ''))));
    for (const { name, block } of alerts) {
      expect(block, name).toMatch(/severity: (warning|critical)\n/);
      expect(block, name).toMatch(/summary: '.+'/);
      expect(block, name).toMatch(/description: '.+'/);
      const url = /runbook_url: 'docs\/runbook\.md#([^']+)'/.exec(block)?.[1];
      expect(url, `${name}: runbook_url`).toBe(slug(name));
      expect(anchors.has(url!), `docs/runbook.md has no section "${name}" (#${url})`).toBe(true);
    }
  });

  it('has promtool tests that make every alert fire and keep it silent', () => {
    const covered = coverage(read(testsFile));
    for (const { name } of alerts) expect(covered.get(name), name).toEqual({ fires: true, silent: true });
  });
});
