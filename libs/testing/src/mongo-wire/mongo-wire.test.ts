/**
 * mongo-wire below the driver: framing, robustness against malformed input, the legacy
 * handshake, retryable writes, transaction bookkeeping and the CLI. The driver end to end (and
 * the store contract through our MongoDB adapter) is in libs/store/src/mongo/mongo-wire.test.ts.
 */
import { spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Long, serialize, UUID, type Document } from 'bson';
import { createEmbeddedStore } from '@planning/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMongoWireServer, type MongoWireServer } from './server.js';
import { Sessions, TRANSACTION_LIFETIME_MS } from './sessions.js';
import { decodeMessage, decodeReply, encodeOpMsgRequest, MessageReader, OP_MSG, OP_QUERY, ProtocolError } from './wire-protocol.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..', '..', '..');

/** A bare wire-protocol client: sends frames, collects replies by responseTo. */
class RawClient {
  private readonly reader = new MessageReader();
  private readonly replies: { responseTo: number; doc: Document }[] = [];
  private waiters: (() => void)[] = [];
  private nextId = 1;
  readonly closed: Promise<void>;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      for (const frame of this.reader.push(chunk)) this.replies.push(decodeReply(frame));
      for (const w of this.waiters.splice(0)) w();
    });
    this.closed = new Promise((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => undefined);
  }

  static connect(port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port }, () => resolve(new RawClient(socket)));
      socket.once('error', reject);
    });
  }

  write(buf: Buffer): void {
    this.socket.write(buf);
  }

  id(): number {
    return this.nextId++;
  }

  async reply(responseTo: number): Promise<Document> {
    for (;;) {
      const i = this.replies.findIndex((r) => r.responseTo === responseTo);
      if (i >= 0) return (this.replies.splice(i, 1)[0] as { doc: Document }).doc;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  async command(body: Document): Promise<Document> {
    const id = this.id();
    this.write(encodeOpMsgRequest(id, body));
    return this.reply(id);
  }

  get received(): number {
    return this.replies.length;
  }

  close(): void {
    this.socket.destroy();
  }
}

function opQuery(requestId: number, collection: string, query: Document): Buffer {
  const doc = Buffer.from(serialize(query));
  const name = Buffer.from(`${collection}\0`, 'utf8');
  const buf = Buffer.alloc(16 + 4 + name.length + 8 + doc.length);
  buf.writeInt32LE(buf.length, 0);
  buf.writeInt32LE(requestId, 4);
  buf.writeInt32LE(0, 8);
  buf.writeInt32LE(OP_QUERY, 12);
  name.copy(buf, 20);
  buf.writeInt32LE(-1, 20 + name.length + 4);
  doc.copy(buf, 20 + name.length + 8);
  return buf;
}

describe('mongo-wire: wire protocol framing', () => {
  it('framing: messages split across chunks and several in one chunk are all cut out', () => {
    const a = encodeOpMsgRequest(1, { ping: 1, $db: 'admin' });
    const b = encodeOpMsgRequest(2, { hello: 1, $db: 'admin' });
    const reader = new MessageReader();
    const joined = Buffer.concat([a, b]);
    const frames: Buffer[] = [];
    for (let i = 0; i < joined.length; i += 7) frames.push(...reader.push(joined.subarray(i, i + 7)));
    expect(frames.map((f) => decodeMessage(f))).toMatchObject([
      { kind: 'msg', requestId: 1, body: { ping: 1 } },
      { kind: 'msg', requestId: 2, body: { hello: 1 } },
    ]);
  });

  it('framing: a document sequence section becomes a body field; unknown required flag bits are refused', () => {
    const body = Buffer.from(serialize({ insert: 'c', $db: 'd' }));
    const docs = [Buffer.from(serialize({ _id: 'a' })), Buffer.from(serialize({ _id: 'b' }))];
    const id = Buffer.from('documents\0');
    const seqSize = 4 + id.length + docs[0]!.length + docs[1]!.length;
    const seqHead = Buffer.alloc(5);
    seqHead.writeUInt8(1, 0);
    seqHead.writeInt32LE(seqSize, 1);
    const payload = Buffer.concat([Buffer.alloc(4), Buffer.from([0]), body, seqHead, id, ...docs]);
    const header = Buffer.alloc(16);
    header.writeInt32LE(16 + payload.length, 0);
    header.writeInt32LE(9, 4);
    header.writeInt32LE(OP_MSG, 12);
    const decoded = decodeMessage(Buffer.concat([header, payload]));
    expect(decoded).toMatchObject({ kind: 'msg', body: { insert: 'c', documents: [{ _id: 'a' }, { _id: 'b' }] } });

    const flagged = encodeOpMsgRequest(3, { ping: 1, $db: 'admin' });
    flagged.writeUInt32LE(1 << 4, 16);
    expect(() => decodeMessage(flagged)).toThrow(ProtocolError);
  });
});

describe('mongo-wire: server', () => {
  let server: MongoWireServer;
  const logs: string[] = [];

  beforeAll(async () => {
    server = await startMongoWireServer({ log: (line) => logs.push(line) });
  });

  afterAll(async () => {
    await server.stop();
  });

  it('handshake: the legacy OP_QUERY isMaster gets an OP_REPLY; other OP_QUERY commands are refused', async () => {
    const c = await RawClient.connect(server.port);
    try {
      c.write(opQuery(1, 'admin.$cmd', { isMaster: 1, helloOk: true, client: { driver: { name: 'raw' } } }));
      const hello = await c.reply(1);
      expect(hello).toMatchObject({ ismaster: true, helloOk: true, setName: 'rs0', maxWireVersion: 21, ok: 1 });
      expect(hello.hosts).toEqual([`127.0.0.1:${server.port}`]);
      expect(hello.topologyVersion).toBeUndefined();
      c.write(opQuery(2, 'admin.$cmd', { ping: 1 }));
      expect(await c.reply(2)).toMatchObject({ ok: 0, code: 352 });
      // The connection stays usable, now over OP_MSG.
      expect(await c.command({ ping: 1, $db: 'admin' })).toEqual({ ok: 1 });
    } finally {
      c.close();
    }
  });

  it('robustness: garbage, an impossible length and invalid BSON close only that connection, with a log line', async () => {
    const badBson = encodeOpMsgRequest(1, { ping: 1, $db: 'admin' });
    badBson.writeInt32LE(1_000, 21); // the body's own length now runs past the message
    const badType = encodeOpMsgRequest(1, { ping: 1, $db: 'admin' });
    badType.writeUInt8(0x77, 25); // the first element's type byte: no such BSON type
    const inputs: [string, Buffer][] = [
      ['garbage', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')],
      ['length', Buffer.from([0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0])],
      ['bson size', badBson],
      ['bson type', badType],
      ['opcode', Buffer.from([16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xd4, 0x07, 0, 0].map((b, i) => (i === 12 ? 0x99 : b)))],
    ];
    const survivor = await RawClient.connect(server.port);
    try {
      for (const [what, bytes] of inputs) {
        const before = logs.length;
        const c = await RawClient.connect(server.port);
        c.write(bytes);
        await c.closed;
        expect(logs.length, what).toBeGreaterThan(before);
        expect(logs.at(-1), what).toMatch(/malformed message/);
        if (what === 'bson type') expect(logs.at(-1)).toMatch(/invalid BSON/);
      }
      expect(await survivor.command({ ping: 1, $db: 'admin' })).toEqual({ ok: 1 });
    } finally {
      survivor.close();
    }
  });

  it('protocol: moreToCome runs the command without a reply; replies keep request order', async () => {
    const c = await RawClient.connect(server.port);
    try {
      c.write(encodeOpMsgRequest(c.id(), { insert: 'quiet', documents: [{ _id: 'a' }], $db: 'mw' }, { moreToCome: true }));
      const find = await c.command({ find: 'quiet', filter: {}, $db: 'mw' });
      expect(find.cursor.firstBatch).toEqual([{ _id: 'a' }]);
      expect(c.received).toBe(0);
    } finally {
      c.close();
    }
  });

  it('errors: unknown commands, unknown fields and bad namespaces come back as MongoDB errors', async () => {
    const c = await RawClient.connect(server.port);
    try {
      expect(await c.command({ nope: 1, $db: 'mw' })).toMatchObject({ ok: 0, code: 59, codeName: 'CommandNotFound', errmsg: "no such command: 'nope'" });
      expect(await c.command({ find: 'c', bogus: 1, $db: 'mw' })).toMatchObject({ ok: 0, code: 40415 });
      expect(await c.command({ find: 'a$b', $db: 'mw' })).toMatchObject({ ok: 0, code: 73 });
      expect(await c.command({ ping: 1, $db: 'bad.db' })).toMatchObject({ ok: 0, code: 73 });
      expect(await c.command({ ping: 1 })).toMatchObject({ ok: 0, code: 9 });
      expect(await c.command({ find: 'c', filter: { n: { $where: 'x' } }, $db: 'mw' })).toMatchObject({ ok: 0, code: 2 });
    } finally {
      c.close();
    }
  });

  it('retryable writes: a retried insert (same lsid and txnNumber) gets the first reply and is applied once', async () => {
    const c = await RawClient.connect(server.port);
    const lsid = { id: new UUID() };
    try {
      const first = await c.command({ insert: 'retry', documents: [{ _id: 'a', n: 1 }], lsid, txnNumber: Long.fromNumber(1), $db: 'mw' });
      expect(first).toEqual({ n: 1, ok: 1 });
      const again = await c.command({ insert: 'retry', documents: [{ _id: 'a', n: 1 }], lsid, txnNumber: Long.fromNumber(1), $db: 'mw' });
      expect(again).toEqual({ n: 1, ok: 1 });
      const stale = await c.command({ insert: 'retry', documents: [{ _id: 'b' }], lsid, txnNumber: Long.fromNumber(0), $db: 'mw' });
      expect(stale).toMatchObject({ ok: 0, code: 225 });
      const count = await c.command({ count: 'retry', $db: 'mw' });
      expect(count.n).toBe(1);
      // Without the session the same insert is a plain duplicate.
      const dup = await c.command({ insert: 'retry', documents: [{ _id: 'a' }], $db: 'mw' });
      expect(dup.writeErrors).toMatchObject([{ index: 0, code: 11000, keyPattern: { _id: 1 }, keyValue: { _id: 'a' } }]);
    } finally {
      c.close();
    }
  });

  it('transactions: a failed operation aborts the transaction; later use is NoSuchTransaction with TransientTransactionError', async () => {
    const c = await RawClient.connect(server.port);
    const lsid = { id: new UUID() };
    const txn = (n: number, extra: Document = {}): Document => ({ lsid, txnNumber: Long.fromNumber(n), autocommit: false, ...extra });
    try {
      await c.command({ insert: 'tx', documents: [{ _id: 'taken' }], $db: 'mw' });
      expect(await c.command({ insert: 'tx', documents: [{ _id: 'x' }], ...txn(1, { startTransaction: true }), $db: 'mw' })).toEqual({ n: 1, ok: 1 });
      const dup = await c.command({ insert: 'tx', documents: [{ _id: 'taken' }], ...txn(1), $db: 'mw' });
      expect(dup.writeErrors).toMatchObject([{ code: 11000 }]);
      const after = await c.command({ find: 'tx', ...txn(1), $db: 'mw' });
      expect(after).toMatchObject({ ok: 0, code: 251, errorLabels: ['TransientTransactionError'] });
      expect(await c.command({ commitTransaction: 1, ...txn(1), $db: 'admin' })).toMatchObject({ ok: 0, code: 251 });
      // A new transaction commits; a repeated commit (the driver retrying) succeeds again.
      expect(await c.command({ insert: 'tx', documents: [{ _id: 'y' }], ...txn(2, { startTransaction: true }), $db: 'mw' })).toEqual({ n: 1, ok: 1 });
      expect(await c.command({ commitTransaction: 1, ...txn(2), $db: 'admin' })).toEqual({ ok: 1 });
      expect(await c.command({ commitTransaction: 1, ...txn(2), $db: 'admin' })).toEqual({ ok: 1 });
      expect(await c.command({ commitTransaction: 1, ...txn(2), $db: 'mw' })).toMatchObject({ ok: 0, code: 13 });
      expect(await c.command({ createIndexes: 'tx', indexes: [], ...txn(3, { startTransaction: true }), $db: 'mw' })).toMatchObject({ ok: 0, code: 263 });
      const ids = await c.command({ find: 'tx', sort: { _id: 1 }, $db: 'mw' });
      expect(ids.cursor.firstBatch).toEqual([{ _id: 'taken' }, { _id: 'y' }]);
    } finally {
      c.close();
    }
  });

  it('stop: closes every open connection', async () => {
    const own = await startMongoWireServer({ log: () => undefined });
    const a = await RawClient.connect(own.port);
    const b = await RawClient.connect(own.port);
    expect(await a.command({ ping: 1, $db: 'admin' })).toEqual({ ok: 1 });
    await own.stop();
    await Promise.all([a.closed, b.closed]);
    await own.stop();
  });
});

describe('mongo-wire: sessions', () => {
  it('transactions: one open longer than the lifetime limit is aborted by the sweep', async () => {
    const store = createEmbeddedStore();
    let now = 0;
    const sessions = new Sessions(store, () => now);
    try {
      const key = Sessions.keyOf({ id: new UUID() });
      const tx = sessions.transactionFor(key, 1, true);
      await store.collection('c').insertOne({ _id: 'a' }, { session: tx.session });
      now = TRANSACTION_LIFETIME_MS + 1;
      sessions.sweep();
      expect(tx.state).toBe('aborted');
      expect(() => sessions.transactionFor(key, 1, false)).toThrow(/aborted or does not exist: it ran longer/);
      expect(await store.collection('c').countDocuments({})).toBe(0);
    } finally {
      await store.close();
    }
  });
});

describe('mongo-wire: cli', () => {
  it('cli: runs a command after -- with MONGODB_URI set and exits with its status', async () => {
    const probe = "process.exit(/^mongodb:\\/\\/127\\.0\\.0\\.1:\\d+\\/\\?replicaSet=rs0$/.test(process.env.MONGODB_URI ?? '') ? 7 : 1)";
    const child = spawn(process.execPath, ['--import', 'tsx', join(HERE, 'cli.ts'), '--', process.execPath, '-e', probe], { cwd: ROOT, stdio: 'ignore' });
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    expect(code).toBe(7);
  });

  it('cli: prints the URI on the first line, serves it, and exits cleanly on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(HERE, 'cli.ts'), '--port', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const uri = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString('utf8');
          const line = out.split('\n')[0];
          if (out.includes('\n') && line) resolve(line);
        });
        child.once('exit', (code) => reject(new Error(`cli exited with ${code}`)));
      });
      const match = /^mongodb:\/\/127\.0\.0\.1:(\d+)\/\?replicaSet=rs0$/.exec(uri);
      expect(match, uri).not.toBeNull();
      const c = await RawClient.connect(Number(match?.[1]));
      expect(await c.command({ ping: 1, $db: 'admin' })).toEqual({ ok: 1 });
      c.close();
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
