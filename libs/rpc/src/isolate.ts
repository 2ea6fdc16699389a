/**
 * Copies that keep the two ends of a direct (in-process) call apart: the callee gets its own
 * request, the caller its own response, so neither can change what the other holds. Strings,
 * numbers and bigints are immutable and shared; objects, arrays and byte arrays are copied.
 */
import { ScalarType, type DescField, type DescMessage, type Message } from '@bufbuild/protobuf';

const INT32_MIN = -0x80000000;
const INT32_MAX = 0x7fffffff;
const UINT32_MAX = 0xffffffff;
const FLOAT32_MAX = 3.4028234663852886e38;

/** A request field holds a value its type cannot (what the binary writer would refuse). */
export class FieldValueError extends Error {
  constructor(readonly field: string) {
    super(`field ${field} holds a value its type cannot hold`);
    this.name = 'FieldValueError';
  }
}

function checkScalar(type: ScalarType, value: unknown, name: string): unknown {
  switch (type) {
    case ScalarType.STRING:
      if (typeof value !== 'string') throw new FieldValueError(name);
      return value;
    case ScalarType.BOOL:
      if (typeof value !== 'boolean') throw new FieldValueError(name);
      return value;
    case ScalarType.DOUBLE:
      if (typeof value !== 'number') throw new FieldValueError(name);
      return value;
    case ScalarType.FLOAT:
      if (typeof value !== 'number' || (Number.isFinite(value) && Math.abs(value) > FLOAT32_MAX)) throw new FieldValueError(name);
      return value;
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      if (typeof value !== 'number' || !Number.isInteger(value) || value < INT32_MIN || value > INT32_MAX) throw new FieldValueError(name);
      return value;
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > UINT32_MAX) throw new FieldValueError(name);
      return value;
    case ScalarType.BYTES:
      if (!(value instanceof Uint8Array)) throw new FieldValueError(name);
      return value.slice();
    default: {
      // 64-bit integers: bigint, or a number or string that is one.
      if (typeof value === 'bigint') return value;
      if ((typeof value === 'number' && Number.isInteger(value)) || (typeof value === 'string' && /^-?\d+$/.test(value))) return value;
      throw new FieldValueError(name);
    }
  }
}

function checkValue(field: DescField, kind: 'scalar' | 'enum' | 'message', value: unknown): unknown {
  if (kind === 'message') return checkedCopy((field as { message: DescMessage }).message, value as Message);
  if (kind === 'enum') return checkScalar(ScalarType.INT32, value, field.name);
  return checkScalar((field as { scalar: ScalarType }).scalar, value, field.name);
}

/**
 * A copy of a message made with `create`, checked field by field the way the binary writer
 * checks it (a 32-bit field holds a 32-bit integer, a string field a string), so a value a gRPC
 * call would refuse is refused in process too. Meant for requests, which are small.
 */
export function checkedCopy<T extends Message>(desc: DescMessage, message: T): T {
  const source = message as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = { $typeName: desc.typeName };
  for (const member of desc.members) {
    const value = source[member.localName];
    if (member.kind === 'oneof') {
      const oneof = value as { case?: string; value?: unknown };
      const selected = member.fields.find((f) => f.localName === oneof.case);
      out[member.localName] = selected
        ? { case: oneof.case, value: checkValue(selected, selected.fieldKind as 'scalar' | 'enum' | 'message', oneof.value) }
        : { case: undefined };
      continue;
    }
    if (value === undefined) continue;
    switch (member.fieldKind) {
      case 'scalar':
        out[member.localName] = checkScalar(member.scalar, value, member.name);
        break;
      case 'enum':
        out[member.localName] = checkScalar(ScalarType.INT32, value, member.name);
        break;
      case 'message':
        out[member.localName] = checkedCopy(member.message, value as Message);
        break;
      case 'list': {
        if (!Array.isArray(value)) throw new FieldValueError(member.name);
        const kind = member.listKind;
        out[member.localName] = value.map((item) => checkValue(member, kind, item));
        break;
      }
      case 'map': {
        const copy: Record<string, unknown> = {};
        for (const [key, item] of Object.entries(value as Record<string, unknown>)) copy[key] = checkValue(member, member.mapKind, item);
        out[member.localName] = copy;
        break;
      }
    }
  }
  return out as T;
}

/**
 * A deep copy of a message (plain objects, arrays, byte arrays), without looking at its
 * descriptor: cheap enough for a page of 200 tasks. A symbol or a function, which no message
 * field can hold, is refused.
 */
export function copyMessage<T>(value: T): T {
  return copy(value) as T;
}

function copy(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) {
    if (typeof value === 'symbol' || typeof value === 'function') throw new TypeError(`a message cannot hold a ${typeof value}`);
    return value;
  }
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = copy(value[i]);
    return out;
  }
  if (value instanceof Uint8Array) return value.slice();
  const out: Record<string, unknown> = {};
  for (const key in value) out[key] = copy((value as Record<string, unknown>)[key]);
  return out;
}
