// Loaded with `node --import` into a copy of the bundle started by a test: each thread (the main
// thread and the services' worker, which inherits the flag) lists the scripts its V8 isolate has
// compiled, as the debugger sees them (Debugger.enable reports every script already parsed),
// once LOADED_SCRIPTS_TRIGGER exists: to `<LOADED_SCRIPTS_OUT>.<main|worker>.<thread id>.json`.
import { existsSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { clearInterval, setInterval } from 'node:timers';
import { isMainThread, threadId } from 'node:worker_threads';

const trigger = process.env.LOADED_SCRIPTS_TRIGGER;
const out = process.env.LOADED_SCRIPTS_OUT;
if (trigger && out) {
  const timer = setInterval(() => {
    if (!existsSync(trigger)) return;
    clearInterval(timer);
    const session = new Session();
    session.connect();
    const urls = new Set();
    session.on('Debugger.scriptParsed', (message) => {
      if (message.params.url) urls.add(message.params.url);
    });
    session.post('Debugger.enable', (err) => {
      const result = err ? { error: String(err) } : { urls: [...urls] };
      writeFileSync(`${out}.${isMainThread ? 'main' : 'worker'}.${threadId}.json`, JSON.stringify(result));
      session.post('Debugger.disable', () => session.disconnect());
    });
  }, 100);
  timer.unref();
}
