/** For tests (unit and end-to-end): parse a CSV artifact with a well-kept RFC 4180 parser. */
import { parse } from 'csv-parse/sync';

export function parseCsv(text: string): string[][] {
  return parse(text, { relax_column_count: false }) as string[][];
}
