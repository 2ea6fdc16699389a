export {
  IDEMPOTENCY_TTL_MS,
  IdempotencyKeys,
  idempotencyInFlight,
  idempotencyMismatch,
  idempotencyRecordId,
  validateIdempotencyKey,
  type Begin,
  type IdempotencyRecord,
  type StoredAnswer,
} from './idempotency-keys.js';
