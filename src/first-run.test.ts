import { describe, expect, it } from 'vitest';
import { bannerLines, consoleLogLevel, explainStartFailure, localUrl, printBanner, REPEATED_SIGNAL_MS, stopSignals, type BannerFacts } from './first-run.js';

const facts = (over: Partial<BannerFacts> = {}): BannerFacts => ({
  config: { target: 'all', HOST: '0.0.0.0', PORT: 8080, dataDir: ':memory:', MONGODB_URI: undefined, LOG_LEVEL: 'info' },
  env: {},
  adminEmail: 'admin@example.com',
  demo: true,
  logLevel: 'warn',
  ...over,
});

describe('first run', () => {
  it('first run: the banner says where the service, its reference and MCP are, how to sign in and where data lives', () => {
    const text = bannerLines(facts()).join('\n');
    expect(text).toContain('http://localhost:8080');
    expect(text).toContain('http://localhost:8080/docs');
    expect(text).toContain('http://localhost:8080/api/mcp');
    expect(text).toContain('admin@example.com with the password printed when the account was created');
    expect(text).toContain('demo workspace');
    expect(text).toMatch(/Data\s+in memory/);
    expect(bannerLines(facts({ config: { ...facts().config, dataDir: '/var/lib/planning' }, env: { SERVICE_ADMIN_PASSWORD: 'x' } })).join('\n')).toMatch(
      /SERVICE_ADMIN_PASSWORD[\s\S]*Data\s+\/var\/lib\/planning/,
    );
    expect(bannerLines(facts({ config: { ...facts().config, target: 'issues' } }))).toEqual([]);
  });

  it('first run: the banner prints on a terminal only; logs stay at their level off a terminal', () => {
    const written: string[] = [];
    printBanner(facts(), { isTTY: false, write: (t) => written.push(t) });
    expect(written).toEqual([]);
    printBanner(facts(), { isTTY: true, write: (t) => written.push(t) });
    expect(written.join('')).toContain('Planning service is running (all-in-one)');
    expect(consoleLogLevel('info', {}, { isTTY: true, write: () => true })).toBe('warn');
    expect(consoleLogLevel('info', { LOG_LEVEL: 'info' }, { isTTY: true, write: () => true })).toBe('info');
    expect(consoleLogLevel('info', {}, { isTTY: false, write: () => true })).toBe('info');
  });

  it('first run: the same Ctrl-C twice (terminal and package manager) stops once; a later or another signal exits at once', () => {
    let now = 1_000;
    const decide = stopSignals(() => now);
    expect(decide('SIGINT')).toBe('stop');
    now += 5;
    expect(decide('SIGINT')).toBe('ignore');
    expect(decide('SIGTERM')).toBe('exit-now');
    now += REPEATED_SIGNAL_MS;
    expect(decide('SIGINT')).toBe('exit-now');
  });

  it('first run: a port in use names the variable that sets it', () => {
    const config = { PORT: 8080, GRPC_PORT: 50051 };
    const http = Object.assign(new Error('listen EADDRINUSE: address already in use 0.0.0.0:8080'), { code: 'EADDRINUSE', port: 8080 });
    expect(explainStartFailure(http, config)).toMatch(/HTTP .*port 8080 .*set PORT to a free port/);
    const grpc = new Error('No address added out of total 1 resolved errors: [listen EADDRINUSE: address already in use 0.0.0.0:50051]');
    expect(explainStartFailure(grpc, config)).toMatch(/gRPC port 50051 .*set GRPC_PORT/);
    expect(explainStartFailure(new Error('something else'), config)).toBeUndefined();
    expect(localUrl('::', 1)).toBe('http://localhost:1');
    expect(localUrl('10.0.0.1', 2)).toBe('http://10.0.0.1:2');
  });
});
