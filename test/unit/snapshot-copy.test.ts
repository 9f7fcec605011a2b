// COPY text format parsing: escapes, NULL, empty strings; and that a parsed field decodes like pgoutput text.
import { describe, expect, it } from 'vitest';
import { escapeCopyText, parseCopyTextLine } from '../../src/source/snapshot/copy.js';

describe('COPY text format', () => {
  it('splits on tabs, maps \\N to null and keeps empty strings', () => {
    expect(parseCopyTextLine('1\tabc\t\\N\t\n')).toEqual(['1', 'abc', null, '']);
    expect(parseCopyTextLine('only\n')).toEqual(['only']);
    expect(parseCopyTextLine('\n')).toEqual(['']);
  });

  it('unescapes what COPY escapes, and octal/hex forms', () => {
    expect(parseCopyTextLine('a\\tb\\nc\\\\d\\re\\bf\\fg\\vh\n')).toEqual(['a\tb\nc\\d\re\bf\fg\vh']);
    expect(parseCopyTextLine('\\101\\x42\\\\N\n')).toEqual(['AB\\N']);
    // A literal backslash-x of a bytea value arrives doubled.
    expect(parseCopyTextLine('\\\\x00ff\n')).toEqual(['\\x00ff']);
  });

  it('round-trips arbitrary text through escape and parse', () => {
    const values = ['plain', '', 'tab\tnew\nline\r', 'back\\slash', '\\N', 'ünïcödé ✓', '\u0001ctl', null];
    const line = `${values.map(escapeCopyText).join('\t')}\n`;
    expect(parseCopyTextLine(line)).toEqual(values);
  });
});
