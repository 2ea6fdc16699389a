import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/service-process.js';

/**
 * The docs stand alone in a clone: every relative link of the README and docs/ names a file of
 * the repository (never one beside it), and every `#anchor` a heading of the file it points to.
 */

const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const match of markdown.matchAll(/^#{1,6} (.+)$/gm)) {
    anchors.add(
      match[1]!
        .trim()
        .toLowerCase()
        .replace(/[`*_]/g, '')
        .replace(/[^\p{L}\p{N} -]/gu, '')
        .replace(/ /g, '-'),
    );
  }
  return anchors;
}

function linksOf(markdown: string): string[] {
  const withoutCode = markdown.replace(/```[\s\S]*?```/g, '');
  return [...withoutCode.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((href) => !/^[a-z]+:/i.test(href));
}

describe('docs', () => {
  it.each(files)('docs: every relative link of %s resolves inside the repository', (file) => {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const broken: string[] = [];
    for (const href of linksOf(text)) {
      const [path, anchor] = href.split('#', 2) as [string, string | undefined];
      const target = path === '' ? join(ROOT, file) : resolve(dirname(join(ROOT, file)), path);
      if (relative(ROOT, target).startsWith('..')) {
        broken.push(`${href}: outside the repository`);
        continue;
      }
      if (!existsSync(target)) {
        broken.push(`${href}: no such file`);
        continue;
      }
      if (anchor && target.endsWith('.md') && !anchorsOf(readFileSync(target, 'utf8')).has(anchor)) {
        broken.push(`${href}: no such heading`);
      }
    }
    expect(broken).toEqual([]);
  });
});
