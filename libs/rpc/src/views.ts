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
  renderBytes?(response: M): Uint8Array;
}

/** What a call made with a view resolves to when the transport ran the view. */
export class RenderedResponse {
  constructor(
    /**
     * `view.render(response)`, or its UTF-8 bytes (`renderBytes`), the caller's own (strings are
     * immutable, and bytes are transferred or made for this answer alone).
     */
    readonly body: string | Uint8Array,
  ) {}
}

/** Runs `view` where the response is made: its bytes when it renders bytes, else its text. */
export function renderView(view: ResponseView, response: Message): string | Uint8Array {
  return view.renderBytes ? view.renderBytes(response) : view.render(response);
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
