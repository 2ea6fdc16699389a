/**
 * Response views: a caller that only turns a response into text (the gateway answering a large
 * page as JSON) can ask the transport for that text instead of the message. A view is a pure
 * function of the response message, known by name to both ends of a transport that can run it
 * where the response is made (the services' thread: the page then crosses as one string, copied
 * flat, not as a cloned object graph the caller maps and serialises again; the caller's socket
 * write encodes it). A transport that cannot (gRPC) answers with the message, and the caller
 * renders it with the same view, so the text is the same either way.
 */
import type { Message } from '@bufbuild/protobuf';

export interface ResponseView<M = Message> {
  /** Unique among the views a process registers with its transports. */
  readonly name: string;
  /** The response as text (JSON, for the views the gateway defines). Pure: no I/O, no clock. */
  render(response: M): string;
}

/** What a call made with a view resolves to when the transport ran the view. */
export class RenderedResponse {
  constructor(
    /** `view.render(response)` (strings are immutable: nothing the callee keeps can change it). */
    readonly body: string,
  ) {}
}

/**
 * The answer of a call made with `view`: the text the transport rendered, or the view run here on
 * the message a transport without views returned.
 */
export function renderedBody<M>(view: ResponseView<M>, answer: M | RenderedResponse): string {
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
