import { decodeCursor, encodeCursor, pageLimit } from './cursor.js';

/** Page request of a list ordered by id: `limit` (DECISIONS §11) and the id to continue after. */
export function pageRequest(request: { limit?: number; cursor?: string }): { limit: number; after?: string } {
  const limit = pageLimit(request.limit);
  const after = decodeCursor(request.cursor);
  return after === undefined ? { limit } : { limit, after };
}

/** Cuts the extra row a list fetched (`limit + 1`) into the page and the next cursor. */
export function pageOf<T extends { _id: string }>(rows: readonly T[], limit: number): { items: T[]; nextCursor?: string } {
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return rows.length > limit && last ? { items, nextCursor: encodeCursor(last._id) } : { items };
}
