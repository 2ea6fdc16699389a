import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { describe, expect, it } from 'vitest';
import { LazyExporter, type Exporter } from './lazy-exporter.js';

/** An exporter that records what reached it. */
function recording(): Exporter<string[]> & { exported: string[][]; flushed: number; shut: number } {
  const self = {
    exported: [] as string[][],
    flushed: 0,
    shut: 0,
    export(items: string[], done: (result: ExportResult) => void) {
      self.exported.push(items);
      done({ code: ExportResultCode.SUCCESS });
    },
    async forceFlush() {
      self.flushed++;
    },
    async shutdown() {
      self.shut++;
    },
  };
  return self;
}

const exportVia = (exporter: Exporter<string[]>, items: string[]) => new Promise<ExportResult>((resolve) => exporter.export(items, resolve));

describe('LazyExporter (the OTLP exporters load only when configured)', () => {
  it('starts loading at once; exports made while it loads go out, in order, once it has loaded', async () => {
    const real = recording();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let loads = 0;
    const lazy = new LazyExporter<string[]>(async () => {
      loads++;
      await gate;
      return real;
    });
    expect(loads).toBe(1);
    const first = exportVia(lazy, ['a']);
    const second = exportVia(lazy, ['b']);
    await new Promise((r) => setTimeout(r, 10));
    expect(real.exported).toEqual([]);
    release();
    expect(await first).toEqual({ code: ExportResultCode.SUCCESS });
    expect(await second).toEqual({ code: ExportResultCode.SUCCESS });
    expect(real.exported).toEqual([['a'], ['b']]);
    await lazy.forceFlush();
    await lazy.shutdown();
    expect([real.flushed, real.shut, loads]).toEqual([1, 1, 1]);
  });

  it('an exporter that cannot be loaded fails each export with the cause, and shuts down quietly', async () => {
    const lazy = new LazyExporter<string[]>(async () => {
      throw new Error('no such module');
    });
    const result = await exportVia(lazy, ['a']);
    expect(result.code).toBe(ExportResultCode.FAILED);
    expect(result.error?.message).toBe('no such module');
    await expect(lazy.forceFlush()).rejects.toThrow('no such module');
    await expect(lazy.shutdown()).resolves.toBeUndefined();
  });
});
