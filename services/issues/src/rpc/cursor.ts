import { ServiceError } from '@planning/errors';

/** Page size rules of DECISIONS §11: `limit` 1–200; without it at most 500 items. */
export function pageLimit(limit: number | undefined, field = 'limit'): number {
  if (limit === undefined) return 500;
  if (!Number.isInteger(limit) || limit < 1 || limit > 200) {
    throw new ServiceError('invalid-input', `'${field}' must be an integer from 1 to 200`, { field });
  }
  return limit;
}

/** Cursors are opaque to clients: base64url of the last item's sort key. */
export function encodeCursor(value: string): string {
  return Buffer.from(value, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string | undefined, field = 'cursor'): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[A-Za-z0-9_:.-]{1,200}$/.test(decoded)) {
    throw new ServiceError('invalid-input', `'${field}' is not a valid cursor`, { field });
  }
  return decoded;
}
