/**
 * Logical sessions (`lsid`) and what hangs off them: the one multi-document transaction a
 * session may have open (`txnNumber` + `autocommit: false`), mapped onto an embedded-store
 * transaction, and the last retryable write's reply, so a write the driver retries after a lost
 * connection is answered again instead of applied twice (as MongoDB does).
 */
import { Binary, type Document } from 'bson';
import { TransactionConflictError, type EmbeddedDocumentStore, type EmbeddedTransaction } from '@planning/store';
import { CommandError, TRANSIENT_TRANSACTION_ERROR, writeConflict } from './errors.js';

/** MongoDB's `transactionLifetimeLimitSeconds` default: older transactions are aborted. */
export const TRANSACTION_LIFETIME_MS = 60_000;
/** MongoDB's `logicalSessionTimeoutMinutes` default (also announced in `hello`). */
export const SESSION_TIMEOUT_MINUTES = 30;

interface Transaction {
  readonly txnNumber: number;
  readonly tx: EmbeddedTransaction;
  readonly startedAt: number;
  /** Why the server ended it, for the error a later operation gets. */
  abortReason?: string;
}

interface Session {
  lastUse: number;
  /** The highest txnNumber seen, by a transaction or a retryable write. */
  highest: number;
  txn?: Transaction;
  retryable?: { txnNumber: number; reply: Promise<Document> };
}

function noSuchTransaction(txnNumber: number, why = ''): CommandError {
  return new CommandError('NoSuchTransaction', `Transaction with txnNumber ${txnNumber} has been aborted or does not exist${why ? `: ${why}` : ''}`, {}, [
    TRANSIENT_TRANSACTION_ERROR,
  ]);
}

function tooOld(txnNumber: number, highest: number): CommandError {
  return new CommandError('TransactionTooOld', `txnNumber ${txnNumber} is less than last txnNumber ${highest} seen in this session`);
}

export class Sessions {
  private readonly sessions = new Map<string, Session>();

  constructor(
    private readonly store: EmbeddedDocumentStore,
    private readonly now: () => number = Date.now,
  ) {}

  /** A stable key for an `lsid` document (`{ id: UUID }`). */
  static keyOf(lsid: unknown): string {
    const id = (lsid as { id?: unknown } | null)?.id;
    if (!(id instanceof Binary)) throw new CommandError('BadValue', 'lsid must be a document with a UUID id');
    return id.toString('hex');
  }

  private session(key: string): Session {
    let s = this.sessions.get(key);
    if (!s) {
      s = { lastUse: this.now(), highest: -1 };
      this.sessions.set(key, s);
    }
    s.lastUse = this.now();
    return s;
  }

  /** The embedded transaction an operation with `autocommit: false` runs in (started by `startTransaction`). */
  transactionFor(key: string, txnNumber: number, start: boolean): EmbeddedTransaction {
    const s = this.session(key);
    if (start) {
      if (txnNumber < s.highest) throw tooOld(txnNumber, s.highest);
      if (txnNumber === s.highest) {
        throw new CommandError('ConflictingOperationInProgress', `txnNumber ${txnNumber} was already used in this session`);
      }
      if (s.txn?.tx.state === 'active') s.txn.tx.abort();
      s.highest = txnNumber;
      s.retryable = undefined;
      s.txn = { txnNumber, tx: this.store.beginTransaction(), startedAt: this.now() };
      return s.txn.tx;
    }
    const txn = s.txn;
    if (!txn || txn.txnNumber !== txnNumber) {
      if (txnNumber < s.highest) throw tooOld(txnNumber, s.highest);
      throw noSuchTransaction(txnNumber);
    }
    if (txn.tx.state === 'committed') {
      throw new CommandError('TransactionCommitted', `Transaction ${txnNumber} has been committed`);
    }
    if (txn.tx.state === 'aborted') throw noSuchTransaction(txnNumber, txn.abortReason);
    return txn.tx;
  }

  /** An operation of the transaction failed: like MongoDB, the server aborts the transaction. */
  failed(key: string, txnNumber: number, reason: string): void {
    const txn = this.sessions.get(key)?.txn;
    if (txn?.txnNumber === txnNumber && txn.tx.state === 'active') {
      txn.tx.abort();
      txn.abortReason = `an earlier operation failed (${reason})`;
    }
  }

  async commit(key: string, txnNumber: number): Promise<void> {
    const s = this.session(key);
    const txn = s.txn;
    if (!txn || txn.txnNumber !== txnNumber) {
      if (txnNumber < s.highest) throw tooOld(txnNumber, s.highest);
      throw noSuchTransaction(txnNumber);
    }
    // A commit the driver retries (its first answer was lost) succeeds again, as in MongoDB.
    if (txn.tx.state === 'committed') return;
    if (txn.tx.state === 'aborted') throw noSuchTransaction(txnNumber, txn.abortReason);
    try {
      await txn.tx.commit();
    } catch (err) {
      txn.abortReason = 'its commit failed';
      // A duplicate key at commit (only possible against an index created meanwhile) passes as is.
      if (err instanceof TransactionConflictError) throw writeConflict(err.message);
      throw err;
    }
  }

  abort(key: string, txnNumber: number): void {
    const txn = this.session(key).txn;
    if (!txn || txn.txnNumber !== txnNumber) throw new CommandError('NoSuchTransaction', `Transaction with txnNumber ${txnNumber} does not exist`);
    if (txn.tx.state === 'committed') throw new CommandError('TransactionCommitted', `Transaction ${txnNumber} has been committed`);
    if (txn.tx.state === 'aborted') throw new CommandError('NoSuchTransaction', `Transaction with txnNumber ${txnNumber} has been aborted`);
    txn.tx.abort();
    txn.abortReason = 'aborted by the client';
  }

  /**
   * Runs a retryable write (a write with `txnNumber` outside a transaction) once per
   * (session, txnNumber): a retry of the same number gets the first reply.
   */
  retryableWrite(key: string, txnNumber: number, run: () => Promise<Document>): Promise<Document> {
    const s = this.session(key);
    if (s.retryable?.txnNumber === txnNumber) return s.retryable.reply;
    if (txnNumber <= s.highest) throw tooOld(txnNumber, s.highest);
    s.highest = txnNumber;
    const reply = run();
    s.retryable = { txnNumber, reply };
    return reply;
  }

  /** `endSessions`: forgets the sessions and aborts their open transactions. */
  end(keys: readonly string[]): void {
    for (const key of keys) {
      const txn = this.sessions.get(key)?.txn;
      if (txn?.tx.state === 'active') txn.tx.abort();
      this.sessions.delete(key);
    }
  }

  /** Aborts transactions past their lifetime and forgets idle sessions. */
  sweep(): void {
    const now = this.now();
    for (const [key, s] of this.sessions) {
      const txn = s.txn;
      if (txn?.tx.state === 'active' && now - txn.startedAt > TRANSACTION_LIFETIME_MS) {
        txn.tx.abort();
        txn.abortReason = `it ran longer than ${TRANSACTION_LIFETIME_MS / 1000} s (transactionLifetimeLimitSeconds)`;
      }
      if (now - s.lastUse > SESSION_TIMEOUT_MINUTES * 60_000 && txn?.tx.state !== 'active') this.sessions.delete(key);
    }
  }

  abortAll(): void {
    this.end([...this.sessions.keys()]);
  }

  /** Open transactions (for tests and diagnostics). */
  get activeTransactions(): number {
    let n = 0;
    for (const s of this.sessions.values()) if (s.txn?.tx.state === 'active') n++;
    return n;
  }
}
