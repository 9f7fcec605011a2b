// The receipt's free-text fields (assembler, source, generation, table, key) are percent-encoded
// as encodeURIComponent encodes `%`, `|`, `"`, `\` and anything outside printable ASCII — the
// receipts already written depend on these exact bytes; printable ASCII takes a faster path.
import { describe, expect, it } from 'vitest';
import { parseReceipt, receiptUnitPrefix, receiptValue, type ReceiptUnit } from '../../src/sink/receipt.js';

const unit = (key: string, table = 'public.invoice'): ReceiptUnit => ({ kind: 'snapshot', assembler: 'billing', lsn: '0/16B3748', generation: '3', sequence: 41, table, key });

describe('receipt text escapes', () => {
  const cases: [string, string][] = [
    ['[["id","inv_0000123"]]', '[[%22id%22,%22inv_0000123%22]]'],
    ['100%|a\\b"', '100%25%7Ca%5Cb%22'],
    ['%22', '%2522'],
    ['plain key ~!', 'plain key ~!'],
    ['tab\there', 'tab%09here'],
    ['del\u007f', 'del%7F'],
    ['"ü"|%', '%22%C3%BC%22%7C%25'],
    ['lone \ud800', 'lone %EF%BF%BD'],
  ];
  it.each(cases)('key %j is written as %s and read back', (key, escaped) => {
    const prefix = receiptUnitPrefix(unit(key));
    expect(prefix).toBe(`r1|s|billing||0/16B3748|3|41|public.invoice|${escaped}|`);
    const parsed = parseReceipt(receiptValue(prefix, 0, 1));
    if (!key.includes('\ud800')) expect(parsed).toMatchObject({ key });
  });

  it('escapes names the same way (they are escaped once and reused)', () => {
    for (let i = 0; i < 2; i++) expect(receiptUnitPrefix(unit('k', 'public."odd|name"'))).toBe('r1|s|billing||0/16B3748|3|41|public.%22odd%7Cname%22|k|');
  });
});
