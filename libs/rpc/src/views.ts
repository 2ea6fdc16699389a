/**
 * Response views: a caller that only turns a response into text (the gateway answering a large
 * page as JSON) can ask the transport for that text instead of the message. A view is a pure
 * function of the response message, known by name to both ends of a transport that can run it
 * where the response is made (the services' thread: the page then crosses as one string, copied
 * flat, or as UTF-8 bytes transferred without a copy, not as a cloned object graph the caller
 * maps and serialises again). A transport that cannot (gRPC) answers with the message, and the caller
 * renders it with the same view, so the text is the same either way.
 */
import type { Message } from '@bufbuild/protobuf';

export interface ResponseView<M = Message> {
  /** Unique among the views a process registers with its transports. */
  readonly name: string;
  /** The response as text (JSON, for the views the gateway defines). Pure: no I/O, no clock. */
  render(response: M): string;
  /**
   * Optional: the UTF-8 bytes of `render(response)`, in an ArrayBuffer of their own (the
   * services' thread transfers it to the caller's thread without a copy, and the socket writes it
   * without encoding). For a view that can join bytes it keeps from earlier renders.
   */
  renderBytes?(response: M, alloc?: ByteAllocator): Uint8Array;
}

/**
 * Where a view writes its bytes: an array of exactly `size` bytes, its own or a view onto a buffer
 * the transport reuses once the answer has been sent (see `RenderedResponse.recycleWhenSent`).
 */
export type ByteAllocator = (size: number) => Uint8Array;

/** What a call made with a view resolves to when the transport ran the view. */
export class RenderedResponse {
  private recycle: (() => void) | undefined;

  constructor(
    /**
     * `view.render(response)`, or its UTF-8 bytes (`renderBytes`), the caller's own (strings are
     * immutable, and bytes are transferred or made for this answer alone).
     */
    readonly body: string | Uint8Array,
    /** Gives the bytes' buffer back to the transport for another answer (it takes the buffer away from this thread). */
    recycle?: () => void,
  ) {
    this.recycle = recycle;
  }

  /**
   * Gives the bytes' buffer back once `response` has written them all (its `finish`: the last
   * write handed to the operating system), never before; a response cut short keeps it, for the
   * garbage collector. Without a transport that reuses buffers, nothing happens.
   */
  recycleWhenSent(response: { once(event: 'finish', listener: () => void): unknown }): void {
    const recycle = this.recycle;
    if (!recycle) return;
    this.recycle = undefined;
    response.once('finish', recycle);
  }
}

/**
 * A rendered answer whose bytes, when they fill a buffer the pool handed out (64 KiB or more), go
 * to `giveBack` once the caller's response has finished with them (at most once; not when the
 * buffer is already gone from this thread). Text and small bytes are the caller's for good.
 */
export function pooledAnswer(body: string | Uint8Array, giveBack: (buffer: ArrayBuffer) => void): RenderedResponse {
  if (typeof body === 'string' || body.buffer.byteLength < POOLED_MIN_BYTES) return new RenderedResponse(body);
  const buffer = body.buffer as ArrayBuffer;
  return new RenderedResponse(body, () => {
    if (buffer.byteLength > 0) giveBack(buffer);
  });
}

/** Runs `view` where the response is made: its bytes when it renders bytes, else its text. */
export function renderView(view: ResponseView, response: Message, alloc?: ByteAllocator): string | Uint8Array {
  return view.renderBytes ? view.renderBytes(response, alloc) : view.render(response);
}

/**
 * The answer of a call made with `view`: the text (or UTF-8 bytes) the transport rendered, or the
 * view run here on the message a transport without views returned.
 */
export function renderedBody<M>(view: ResponseView<M>, answer: M | RenderedResponse): string | Uint8Array {
  return answer instanceof RenderedResponse ? answer.body : view.render(answer);
}

/** Views by name, for the serving end of a transport. */
export function viewRegistry(views: readonly ResponseView<never>[]): ReadonlyMap<string, ResponseView> {
  const byName = new Map<string, ResponseView>();
  for (const view of views) {
    if (byName.has(view.name)) throw new Error(`response view ${view.name} registered twice`);
    byName.set(view.name, view as unknown as ResponseView);
  }
  return byName;
}

/** A rendered answer smaller than this is made fresh and never given back (pooling it costs more than it saves). */
export const POOLED_MIN_BYTES = 64 * 1024;
/** Buffers a thread keeps for rendering, in bytes at most (the largest page of 200 issues is a few MB). */
export const POOLED_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Buffers for rendered answers, given back once sent (by the gateway's thread over the thread
 * port, or by a response in this thread: `renderWith` in direct.ts), by capacity (powers of two
 * from 64 KiB), up to `POOLED_MAX_BYTES` in all. `take` hands out a view of exactly the size asked
 * for onto a kept buffer (or a new one of the size's class); its bytes beyond the size are an
 * earlier answer's, in this process, and never sent (the socket writes the view).
 */
export class BytePool {
  private readonly free = new Map<number, ArrayBuffer[]>();
  private kept = 0;

  constructor(private readonly maxBytes = POOLED_MAX_BYTES) {}

  /** Bytes held for reuse now. */
  get size(): number {
    return this.kept;
  }

  take(size: number): Uint8Array {
    if (size < POOLED_MIN_BYTES) return new Uint8Array(size);
    const capacity = 2 ** Math.ceil(Math.log2(size));
    const buffer = this.free.get(capacity)?.pop();
    if (!buffer) return new Uint8Array(new ArrayBuffer(capacity), 0, size);
    this.kept -= capacity;
    return new Uint8Array(buffer, 0, size);
  }

  give(buffer: ArrayBuffer): void {
    const capacity = buffer.byteLength;
    // Only what `take` makes: a power of two of at least the smallest class.
    if (capacity < POOLED_MIN_BYTES || (capacity & (capacity - 1)) !== 0 || this.kept + capacity > this.maxBytes) return;
    let list = this.free.get(capacity);
    if (!list) this.free.set(capacity, (list = []));
    list.push(buffer);
    this.kept += capacity;
  }
}
