import { describe, expect, it } from 'vitest';
import { describeEnv, env, loadEnv, secret, z } from './index.js';

const shape = {
  PORT: env.port().default(8080),
  NATS_URL: env.urlList(['nats']).optional(),
  ADMIN_PASSWORD: secret(env.string().optional()),
  TOKEN: secret(env.string()),
  DEMO: env.bool().default(true),
  LEVEL: env.oneOf(['debug', 'info']).default('info'),
  RETRIES: env.int(0, 10).default(3),
};

describe('config: loadEnv', () => {
  it('config: applies defaults and coerces values', () => {
    const result = loadEnv(shape, { TOKEN: 'x', DEMO: '0', NATS_URL: 'nats://a:4222, nats://b:4222' });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value).toMatchObject({ PORT: 8080, DEMO: false, LEVEL: 'info', RETRIES: 3 });
    expect(result.value.NATS_URL).toEqual(['nats://a:4222', 'nats://b:4222']);
  });

  it('config: reports every problem at once, naming each variable', () => {
    const result = loadEnv(shape, { PORT: 'eighty', NATS_URL: 'http://x', DEMO: 'maybe', LEVEL: 'loud', RETRIES: '11' });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const variables = result.problems.map((p) => p.variable).sort();
    expect(variables).toEqual(['DEMO', 'LEVEL', 'NATS_URL', 'PORT', 'RETRIES', 'TOKEN']);
    expect(result.problems.find((p) => p.variable === 'TOKEN')?.message).toBe('is required');
  });

  it('config: treats empty variables as unset', () => {
    const result = loadEnv({ A: env.string().default('d') }, { A: '  ' });
    expect(result.ok && result.value.A).toBe('d');
  });

  it('config: describeEnv hides set secrets and keeps the rest', () => {
    const result = loadEnv(shape, { TOKEN: 'super-secret', ADMIN_PASSWORD: 'pw' });
    if (!result.ok) throw new Error('expected ok');
    const shown = describeEnv(shape, result.value);
    expect(shown.TOKEN).toBe('[hidden]');
    expect(shown.ADMIN_PASSWORD).toBe('[hidden]');
    expect(shown.PORT).toBe(8080);
    expect(JSON.stringify(shown)).not.toContain('super-secret');
  });

  it('config: an unset optional secret stays visibly unset', () => {
    const result = loadEnv({ S: secret(z.string().optional()) }, {});
    if (!result.ok) throw new Error('expected ok');
    expect(describeEnv({ S: secret(z.string().optional()) }, result.value).S).toBeUndefined();
  });
});
