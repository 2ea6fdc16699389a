import { ROOT_CONTEXT, context, trace } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';
import { startTelemetry, type Telemetry } from './telemetry.js';

function capture(): { lines: () => Record<string, unknown>[]; raw: () => string; destination: { write(chunk: string): void } } {
  const chunks: string[] = [];
  return {
    destination: { write: (chunk: string) => void chunks.push(chunk) },
    raw: () => chunks.join(''),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

describe('createLogger', () => {
  let telemetry: Telemetry;
  const savedLevel = process.env.LOG_LEVEL;

  beforeAll(() => {
    // The context manager makes context.with() effective, as in a running service.
    telemetry = startTelemetry({ serviceName: 'logger-test', env: {} });
  });
  afterAll(async () => {
    await telemetry.shutdown();
  });
  afterEach(() => {
    if (savedLevel === undefined) delete process.env.LOG_LEVEL;
    else process.env.LOG_LEVEL = savedLevel;
  });

  it('logger: writes JSON lines with the service name and a level label', () => {
    const out = capture();
    createLogger({ name: 'issues', destination: out.destination }).info({ count: 2 }, 'hello');
    const [line] = out.lines();
    expect(line).toMatchObject({ service: 'issues', level: 'info', msg: 'hello', count: 2 });
    expect(typeof line?.time).toBe('string');
  });

  it('logger: mixes the active span ids into every line', () => {
    const out = capture();
    const logger = createLogger({ name: 'issues', destination: out.destination });
    const spanContext = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 };
    context.with(trace.setSpanContext(ROOT_CONTEXT, spanContext), () => {
      logger.info('inside');
      logger.child({ component: 'child' }).warn('child inside');
    });
    logger.info('outside');
    const [inside, child, outside] = out.lines();
    expect(inside).toMatchObject({ trace_id: spanContext.traceId, span_id: spanContext.spanId });
    expect(child).toMatchObject({ trace_id: spanContext.traceId, span_id: spanContext.spanId, component: 'child' });
    expect(outside).not.toHaveProperty('trace_id');
    expect(outside).not.toHaveProperty('span_id');
  });

  it('logger: redacts credentials', () => {
    const out = capture();
    createLogger({ name: 'gateway', destination: out.destination }).info(
      {
        req: { headers: { authorization: 'Bearer sk-live-1', cookie: 'sid=cookie-2', 'x-api-key': 'key-3', accept: 'json' } },
        user: { name: 'ada', password: 'pw-4' },
        apiKey: { token: 'tok-5', secret: 'sec-6' },
        token: 'tok-7',
      },
      'request',
    );
    const raw = out.raw();
    for (const secret of ['sk-live-1', 'cookie-2', 'key-3', 'pw-4', 'tok-5', 'sec-6', 'tok-7']) {
      expect(raw).not.toContain(secret);
    }
    const [line] = out.lines();
    expect(line).toMatchObject({
      req: { headers: { authorization: '[redacted]', cookie: '[redacted]', 'x-api-key': '[redacted]', accept: 'json' } },
      user: { name: 'ada', password: '[redacted]' },
      apiKey: { token: '[redacted]', secret: '[redacted]' },
      token: '[redacted]',
    });
  });

  it('logger: takes its level from LOG_LEVEL, and an explicit level wins', () => {
    process.env.LOG_LEVEL = 'warn';
    const out = capture();
    const fromEnv = createLogger({ name: 'svc', destination: out.destination });
    fromEnv.info('dropped');
    fromEnv.warn('kept');
    createLogger({ name: 'svc', level: 'debug', destination: out.destination }).debug('explicit');
    expect(out.lines().map((line) => line.msg)).toEqual(['kept', 'explicit']);
  });

  it('logger: defaults to info', () => {
    delete process.env.LOG_LEVEL;
    expect(createLogger({ name: 'svc', destination: capture().destination }).level).toBe('info');
  });

  it('logger: an unknown level is refused', () => {
    expect(() => createLogger({ name: 'svc', level: 'loud', destination: capture().destination })).toThrow(/unknown log level/);
  });
});
