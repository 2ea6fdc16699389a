/**
 * MongoDB wire-protocol framing: the message header, OP_MSG (every command since MongoDB 3.6),
 * OP_QUERY (only for the first `isMaster` of a connection: drivers send it before they know the
 * server speaks OP_MSG) and OP_REPLY (the answer to that OP_QUERY). Nothing here knows commands.
 */
import { deserialize, serialize, type DeserializeOptions, type Document, type SerializeOptions } from 'bson';

export const OP_REPLY = 1;
export const OP_QUERY = 2004;
export const OP_COMPRESSED = 2012;
export const OP_MSG = 2013;

/** What the server advertises in `hello`; larger messages are refused as malformed. */
export const MAX_BSON_OBJECT_SIZE = 16 * 1024 * 1024;
export const MAX_MESSAGE_SIZE_BYTES = 48_000_000;

const HEADER_BYTES = 16;
const MSG_CHECKSUM_PRESENT = 1 << 0;
const MSG_MORE_TO_COME = 1 << 1;
const MSG_EXHAUST_ALLOWED = 1 << 16;
/** Bits 0–15 are "required": a receiver must refuse a message with one it does not know. */
const MSG_REQUIRED_BITS = 0xffff;
const MSG_KNOWN_BITS = MSG_CHECKSUM_PRESENT | MSG_MORE_TO_COME | MSG_EXHAUST_ALLOWED;

/** The peer sent something that is not a valid message: the connection cannot continue. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

export type WireRequest =
  | { kind: 'msg'; requestId: number; body: Document; moreToCome: boolean }
  | { kind: 'query'; requestId: number; collection: string; query: Document };

// Values come back as plain JS where possible (int64 as number when it fits, regexes as RegExp),
// which is what the embedded store keeps; anything else stays a BSON class and is refused there.
const DESERIALIZE: DeserializeOptions = { promoteLongs: true, promoteValues: true, promoteBuffers: false, bsonRegExp: false };
const SERIALIZE: SerializeOptions = { ignoreUndefined: true, checkKeys: false };

/** Accumulates socket chunks and cuts complete messages off the front. */
export class MessageReader {
  private chunks: Buffer[] = [];
  private buffered = 0;

  /** Returns every complete message now available. Throws ProtocolError on an impossible length. */
  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const out: Buffer[] = [];
    for (;;) {
      if (this.buffered < 4) break;
      const head = this.peek(4);
      const length = head.readInt32LE(0);
      if (length < HEADER_BYTES || length > MAX_MESSAGE_SIZE_BYTES) {
        throw new ProtocolError(`message length ${length} outside ${HEADER_BYTES}..${MAX_MESSAGE_SIZE_BYTES}`);
      }
      if (this.buffered < length) break;
      out.push(this.take(length));
    }
    return out;
  }

  private peek(n: number): Buffer {
    const first = this.chunks[0] as Buffer;
    if (first.length >= n) return first.subarray(0, n);
    const all = Buffer.concat(this.chunks);
    this.chunks = [all];
    return all.subarray(0, n);
  }

  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
    const frame = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered = rest.length;
    return frame;
  }
}

function readDocument(frame: Buffer, offset: number, end: number, what: string): { doc: Document; next: number } {
  if (offset + 5 > end) throw new ProtocolError(`${what}: truncated document`);
  const size = frame.readInt32LE(offset);
  if (size < 5 || offset + size > end) throw new ProtocolError(`${what}: document size ${size} does not fit the message`);
  try {
    return { doc: deserialize(frame.subarray(offset, offset + size), DESERIALIZE), next: offset + size };
  } catch (err) {
    throw new ProtocolError(`${what}: invalid BSON (${(err as Error).message})`);
  }
}

function readCString(frame: Buffer, offset: number, end: number, what: string): { value: string; next: number } {
  const zero = frame.indexOf(0, offset);
  if (zero < 0 || zero >= end) throw new ProtocolError(`${what}: unterminated string`);
  return { value: frame.toString('utf8', offset, zero), next: zero + 1 };
}

/** Decodes one complete message. Throws ProtocolError for anything this server cannot read. */
export function decodeMessage(frame: Buffer): WireRequest {
  if (frame.length < HEADER_BYTES || frame.readInt32LE(0) !== frame.length) throw new ProtocolError('message length does not match the header');
  const requestId = frame.readInt32LE(4);
  const opCode = frame.readInt32LE(12);
  if (opCode === OP_MSG) return decodeOpMsg(frame, requestId);
  if (opCode === OP_QUERY) return decodeOpQuery(frame, requestId);
  if (opCode === OP_COMPRESSED) throw new ProtocolError('OP_COMPRESSED: this server advertises no compressors');
  throw new ProtocolError(`unsupported opCode ${opCode}`);
}

function decodeOpMsg(frame: Buffer, requestId: number): WireRequest {
  if (frame.length < HEADER_BYTES + 5) throw new ProtocolError('OP_MSG: too short');
  const flags = frame.readUInt32LE(HEADER_BYTES);
  const unknownRequired = flags & MSG_REQUIRED_BITS & ~MSG_KNOWN_BITS;
  if (unknownRequired !== 0) throw new ProtocolError(`OP_MSG: unknown required flag bits 0x${unknownRequired.toString(16)}`);
  // The CRC-32C checksum is not verified: TCP already protects these local connections.
  const end = flags & MSG_CHECKSUM_PRESENT ? frame.length - 4 : frame.length;
  let offset = HEADER_BYTES + 4;
  let body: Document | undefined;
  const sequences: [string, Document[]][] = [];
  while (offset < end) {
    const kind = frame[offset];
    offset += 1;
    if (kind === 0) {
      if (body) throw new ProtocolError('OP_MSG: more than one body section');
      const read = readDocument(frame, offset, end, 'OP_MSG body');
      body = read.doc;
      offset = read.next;
    } else if (kind === 1) {
      if (offset + 4 > end) throw new ProtocolError('OP_MSG: truncated document sequence');
      const size = frame.readInt32LE(offset);
      const seqEnd = offset + size;
      if (size < 5 || seqEnd > end) throw new ProtocolError('OP_MSG: document sequence size does not fit the message');
      const id = readCString(frame, offset + 4, seqEnd, 'OP_MSG document sequence');
      const docs: Document[] = [];
      let at = id.next;
      while (at < seqEnd) {
        const read = readDocument(frame, at, seqEnd, `OP_MSG document sequence '${id.value}'`);
        docs.push(read.doc);
        at = read.next;
      }
      sequences.push([id.value, docs]);
      offset = seqEnd;
    } else {
      throw new ProtocolError(`OP_MSG: unknown section kind ${String(kind)}`);
    }
  }
  if (!body) throw new ProtocolError('OP_MSG: no body section');
  for (const [id, docs] of sequences) {
    if (id in body) throw new ProtocolError(`OP_MSG: document sequence '${id}' duplicates a body field`);
    body[id] = docs;
  }
  return { kind: 'msg', requestId, body, moreToCome: (flags & MSG_MORE_TO_COME) !== 0 };
}

function decodeOpQuery(frame: Buffer, requestId: number): WireRequest {
  let offset = HEADER_BYTES + 4; // flags: nothing this server acts on
  const name = readCString(frame, offset, frame.length, 'OP_QUERY collection');
  offset = name.next + 8; // numberToSkip, numberToReturn: irrelevant for commands
  const { doc } = readDocument(frame, offset, frame.length, 'OP_QUERY query');
  return { kind: 'query', requestId, collection: name.value, query: doc };
}

let nextRequestId = 1;

function header(length: number, responseTo: number, opCode: number): Buffer {
  const buf = Buffer.alloc(HEADER_BYTES);
  buf.writeInt32LE(length, 0);
  buf.writeInt32LE(nextRequestId, 4);
  nextRequestId = nextRequestId >= 0x7fffffff ? 1 : nextRequestId + 1;
  buf.writeInt32LE(responseTo, 8);
  buf.writeInt32LE(opCode, 12);
  return buf;
}

export function serializeDocument(doc: Document): Buffer {
  return Buffer.from(serialize(doc, SERIALIZE));
}

/** An OP_MSG reply with one body section. */
export function encodeOpMsg(responseTo: number, body: Document): Buffer {
  const payload = serializeDocument(body);
  const flagsAndKind = Buffer.alloc(5); // flags 0, section kind 0
  return Buffer.concat([header(HEADER_BYTES + 5 + payload.length, responseTo, OP_MSG), flagsAndKind, payload]);
}

/** An OP_REPLY carrying one document (the answer to a legacy OP_QUERY command). */
export function encodeOpReply(responseTo: number, doc: Document): Buffer {
  const payload = serializeDocument(doc);
  const fields = Buffer.alloc(20); // responseFlags 0, cursorID 0 (int64), startingFrom 0
  fields.writeInt32LE(1, 16); // numberReturned
  return Buffer.concat([header(HEADER_BYTES + 20 + payload.length, responseTo, OP_REPLY), fields, payload]);
}

/** An OP_MSG request, as a driver would send it (for tests of this server). */
export function encodeOpMsgRequest(requestId: number, body: Document, options: { moreToCome?: boolean } = {}): Buffer {
  const payload = serializeDocument(body);
  const flagsAndKind = Buffer.alloc(5);
  if (options.moreToCome) flagsAndKind.writeUInt32LE(MSG_MORE_TO_COME, 0);
  const buf = Buffer.concat([header(HEADER_BYTES + 5 + payload.length, 0, OP_MSG), flagsAndKind, payload]);
  buf.writeInt32LE(requestId, 4);
  return buf;
}

/** Reads the body of an OP_MSG or the first document of an OP_REPLY (for tests of this server). */
export function decodeReply(frame: Buffer): { responseTo: number; doc: Document } {
  const responseTo = frame.readInt32LE(8);
  const opCode = frame.readInt32LE(12);
  if (opCode === OP_MSG) return { responseTo, doc: readDocument(frame, HEADER_BYTES + 5, frame.length, 'reply').doc };
  if (opCode === OP_REPLY) return { responseTo, doc: readDocument(frame, HEADER_BYTES + 20, frame.length, 'reply').doc };
  throw new ProtocolError(`not a reply opCode ${opCode}`);
}
