import { ExportResultCode, type ExportResult } from '@opentelemetry/core';

/** What the SDK asks of a span exporter and of a push metric exporter alike. */
export interface Exporter<T> {
  export(items: T, resultCallback: (result: ExportResult) => void): void;
  shutdown(): Promise<void>;
  forceFlush?(): Promise<void>;
}

/**
 * An exporter whose implementation is still loading (`import()`): it starts loading at once, and
 * every call waits for it. An export made meanwhile goes out once it has loaded; if it cannot be
 * loaded, each export fails (the SDK logs the error through its diagnostics) and shutdown
 * resolves. A metric exporter's aggregation and temporality selectors are not forwarded: the
 * readers that push metrics here read them from a producer that has aggregated them already
 * (telemetry.ts: the export provider has no instruments of its own).
 */
export class LazyExporter<T> implements Exporter<T> {
  private readonly loading: Promise<Exporter<T>>;

  constructor(load: () => Promise<Exporter<T>>) {
    this.loading = load();
    // Failures reach each call's caller; none is left unhandled meanwhile.
    this.loading.catch(() => undefined);
  }

  export(items: T, resultCallback: (result: ExportResult) => void): void {
    this.loading.then(
      (exporter) => exporter.export(items, resultCallback),
      (error: unknown) => resultCallback({ code: ExportResultCode.FAILED, error: error instanceof Error ? error : new Error(String(error)) }),
    );
  }

  async forceFlush(): Promise<void> {
    const exporter = await this.loading;
    await exporter.forceFlush?.();
  }

  async shutdown(): Promise<void> {
    const exporter = await this.loading.catch(() => undefined);
    await exporter?.shutdown();
  }
}
