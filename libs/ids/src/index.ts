import { randomBytes } from 'node:crypto';

/**
 * Time-ordered identifiers: 48 bits of milliseconds then 80 random bits, in Crockford base32
 * (26 characters, like ULID), behind a short type prefix (`ws_`, `iss_`, `evt_`). Sorting ids
 * sorts by creation time, which keeps outbox relays and cursors in order; ids created in the
 * same millisecond by one process still increase.
 */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

let lastTime = -1;
let lastRandom: Uint8Array = new Uint8Array(10);

function encode(time: number, random: Uint8Array): string {
  let out = '';
  let t = time;
  const timeChars: string[] = [];
  for (let i = 0; i < 10; i++) {
    timeChars.unshift(ALPHABET[t % 32]!);
    t = Math.floor(t / 32);
  }
  out += timeChars.join('');
  // 80 random bits → 16 base32 characters.
  let bits = 0;
  let value = 0;
  for (const byte of random) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31]!;
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return out;
}

function increment(bytes: Uint8Array): Uint8Array {
  const next = new Uint8Array(bytes);
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i]! < 255) {
      next[i]! += 1;
      return next;
    }
    next[i] = 0;
  }
  return next;
}

/** A new time-ordered id, e.g. `newId('iss')` → `iss_01JD...`. */
export function newId(prefix: string, now: number = Date.now()): string {
  if (now <= lastTime) {
    lastRandom = increment(lastRandom);
  } else {
    lastTime = now;
    lastRandom = new Uint8Array(randomBytes(10));
  }
  return `${prefix}_${encode(lastTime, lastRandom)}`;
}

/** The creation time encoded in an id from `newId`, or undefined if it is not one. */
export function timeOfId(id: string): number | undefined {
  const body = id.slice(id.indexOf('_') + 1);
  if (body.length !== 26) return undefined;
  let time = 0;
  for (const char of body.slice(0, 10)) {
    const index = ALPHABET.indexOf(char);
    if (index < 0) return undefined;
    time = time * 32 + index;
  }
  return time;
}
