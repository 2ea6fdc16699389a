import { createInProcessLimiter } from '@planning/rate-limit';
import { describe, expect, it } from 'vitest';
import { createLoginThrottle } from './login-throttle.js';

async function outcome(fn: () => Promise<void>): Promise<string> {
  try {
    await fn();
    return 'ok';
  } catch (err) {
    return (err as { code: string }).code;
  }
}

describe('login throttle', () => {
  const make = (clock: { now: number }) =>
    createLoginThrottle({
      limiter: createInProcessLimiter({ clock: () => clock.now }),
      maxFailuresPerEmail: 3,
      maxFailuresPerAddress: 5,
      windowSeconds: 300,
    });

  it('login throttle: exactly max failures per email, then 429 until the window refills', async () => {
    const clock = { now: 0 };
    const throttle = make(clock);
    for (let i = 0; i < 3; i++) {
      expect(await outcome(() => throttle.check('a@example.com', '10.0.0.1'))).toBe('ok');
      await throttle.failed('A@example.com ', '10.0.0.1');
    }
    const err = await throttle.check('a@example.com', '10.0.0.1').catch((e: unknown) => e as { code: string; details: { retryAfterSeconds: number } });
    expect(err).toMatchObject({ code: 'rate-limited' });
    expect(err!.details.retryAfterSeconds).toBeGreaterThan(0);
    // Another email from another address is not affected.
    expect(await outcome(() => throttle.check('b@example.com', '10.0.0.2'))).toBe('ok');
    clock.now += 300_000;
    expect(await outcome(() => throttle.check('a@example.com', '10.0.0.1'))).toBe('ok');
  });

  it('login throttle: failures across emails from one address are limited per address', async () => {
    const clock = { now: 0 };
    const throttle = make(clock);
    for (let i = 0; i < 5; i++) {
      expect(await outcome(() => throttle.check(`u${i}@example.com`, '10.0.0.9'))).toBe('ok');
      await throttle.failed(`u${i}@example.com`, '10.0.0.9');
    }
    expect(await outcome(() => throttle.check('fresh@example.com', '10.0.0.9'))).toBe('rate-limited');
    expect(await outcome(() => throttle.check('fresh@example.com', '10.0.0.10'))).toBe('ok');
  });

  it('login throttle: successful sign-ins (checks without failures) never lock anyone out', async () => {
    const clock = { now: 0 };
    const throttle = make(clock);
    for (let i = 0; i < 1000; i++) await throttle.check('busy@example.com', '10.0.0.3');
    await throttle.failed('busy@example.com', '10.0.0.3');
    await throttle.failed('busy@example.com', '10.0.0.3');
    expect(await outcome(() => throttle.check('busy@example.com', '10.0.0.3'))).toBe('ok');
  });
});
