import { ServiceError } from '@planning/errors';
import type { FastifyReply } from 'fastify';

/** Page size rules of DECISIONS §11 for lists the gateway answers itself: `limit` 1–200, else at most 500. */
export function pageLimit(limit: number | undefined): number {
  return limit ?? 500;
}

/** Cursors are opaque to clients: base64url of the last item's id. */
export function encodeCursor(id: string): string {
  return Buffer.from(id, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[A-Za-z0-9_:.-]{1,200}$/.test(decoded)) throw new ServiceError('invalid-input', "'cursor' is not a valid cursor", { field: 'cursor' });
  return decoded;
}

/**
 * Answers with JSON already rendered (a response view's text, or its UTF-8 bytes): the route's
 * response schema documents it, fastify's serializer is skipped (a string or a Buffer under a JSON
 * content type is sent as it is). The content type is the one fastify gives JSON.
 */
export function sendJsonBody(reply: FastifyReply, body: string | Uint8Array): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength));
}
