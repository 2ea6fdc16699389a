import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Every file under `dir`, recursively, as text. */
export async function readTree(dir: string): Promise<Array<{ path: string; text: string }>> {
  const out: Array<{ path: string; text: string }> = [];
  const walk = async (current: string): Promise<void> => {
    for (const entry of await readdir(current, { withFileTypes: true })) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) out.push({ path, text: await readFile(path, 'utf8') });
    }
  };
  await walk(dir);
  return out;
}

/** The places (file paths or labels) where any of `secrets` occurs verbatim. */
export function findSecrets(haystacks: Array<{ path: string; text: string }>, secrets: readonly string[]): string[] {
  const hits: string[] = [];
  for (const { path, text } of haystacks) {
    for (const secret of secrets) {
      if (secret.length >= 8 && text.includes(secret)) hits.push(`${path}: …${secret.slice(0, 6)}…`);
    }
  }
  return hits;
}
