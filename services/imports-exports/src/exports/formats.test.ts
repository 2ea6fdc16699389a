import { describe, expect, it } from 'vitest';
import {
  CSV_COLUMNS,
  EXPORT_SCHEMA_ID,
  EXPORT_SCHEMA_VERSION,
  escapeMarkdown,
  groupByStatus,
  neutraliseCell,
  parseListCell,
  renderBackup,
  renderCsv,
  renderJson,
  renderMarkdown,
  type ExportIssue,
} from './formats.js';
import { parseCsv as parseText } from '../testing/csv.js';

function issue(over: Partial<ExportIssue> = {}): ExportIssue {
  return {
    id: 'iss_1',
    workspaceId: 'ws_1',
    projectId: 'prj_1',
    title: 'A task',
    description: '',
    status: 'ready',
    priority: 'medium',
    labels: [],
    dependencies: [],
    acceptanceChecks: [],
    agent: {},
    createdAt: '2026-11-01T00:00:00.000Z',
    updatedAt: '2026-11-02T00:00:00.000Z',
    version: 1,
    ...over,
  };
}

const parseCsv = (bytes: Buffer): string[][] => parseText(bytes.toString('utf8'));

describe('exports: CSV', () => {
  it('exports: csv neutralises cells a spreadsheet would run as formulas', () => {
    expect(neutraliseCell('=HYPERLINK("http://x","y")')).toBe(`'=HYPERLINK("http://x","y")`);
    expect(neutraliseCell('+1')).toBe("'+1");
    expect(neutraliseCell('-2+3')).toBe("'-2+3");
    expect(neutraliseCell('@SUM(A1)')).toBe("'@SUM(A1)");
    expect(neutraliseCell('\t=1')).toBe("'\t=1");
    expect(neutraliseCell('\r=1')).toBe("'\r=1");
    expect(neutraliseCell('plain = text')).toBe('plain = text');
    expect(neutraliseCell('')).toBe('');
  });

  it('exports: csv neutralises formulas behind leading white space or control characters, and full-width signs', () => {
    for (const cell of ['\n=1+1', ' =1+1', '\u3000=1+1', '\u00a0@SUM(A1)', '\u200b=1', '\uFF1DHYPERLINK("http://evil")', '\uFF0B1', '\uFF0D1', '\uFF20x', '\r\n-1']) {
      expect(neutraliseCell(cell)).toBe(`'${cell}`);
    }
    // A cell that starts with a quote gets one more, so removing one leading quote is always exact.
    expect(neutraliseCell("'quoted")).toBe("''quoted");
    expect(neutraliseCell('a =1')).toBe('a =1');
  });

  it('exports: csv list cells are quoted, each element neutralised, and ";" in a label round-trips', () => {
    const labels = ['ok', "=cmd|' /C calc'!A0", 'a;=HYPERLINK("x")', '50%;off', ' +1', "'x"];
    const { bytes } = renderCsv([issue({ labels, dependencies: ['iss_a', 'iss_b'] })]);
    const text = bytes.toString('utf8');
    const rows = parseCsv(bytes);
    const cell = rows[1]![CSV_COLUMNS.indexOf('labels')]!;
    // Split as a spreadsheet with ";" as its list separator would: no piece starts a formula.
    for (const piece of cell.split(';')) expect(piece).not.toMatch(/^[\p{White_Space}\p{Cc}]*[=+\-@\uFF1D\uFF0B\uFF0D\uFF20]/u);
    expect(cell.split(';')).toHaveLength(labels.length);
    expect(parseListCell(cell)).toEqual(labels);
    expect(text).toContain(`"${cell.replace(/"/g, '""')}"`);
    expect(text).toContain('"iss_a;iss_b"');
    expect(parseListCell(rows[1]![CSV_COLUMNS.indexOf('dependencies')]!)).toEqual(['iss_a', 'iss_b']);
    expect(parseListCell('')).toEqual([]);
  });

  it('exports: csv has a header row, CRLF line ends, and round-trips quotes, commas and line breaks', () => {
    const tricky = [
      issue({ id: 'iss_a', title: 'Comma, "quoted" and\nnew line', description: 'Line 1\r\nLine 2, "x"', labels: ['a', 'b'], estimate: 3 }),
      issue({ id: 'iss_b', title: '=HYPERLINK("http://evil.example","click")', description: '-1', labels: ['@x'], dueDate: '2026-12-01' }),
      issue({ id: 'iss_c', title: ' leading space', agent: { assignedAgentId: 'bot-1' }, dependencies: ['iss_a', 'iss_b'] }),
    ];
    const { bytes, contentType } = renderCsv(tricky);
    expect(contentType).toMatch(/^text\/csv/);
    const text = bytes.toString('utf8');
    expect(text.startsWith(`${CSV_COLUMNS.join(',')}\r\n`)).toBe(true);
    const rows = parseCsv(bytes);
    expect(rows[0]).toEqual([...CSV_COLUMNS]);
    expect(rows).toHaveLength(4);
    const col = (name: (typeof CSV_COLUMNS)[number]) => CSV_COLUMNS.indexOf(name);
    expect(rows[1]![col('title')]).toBe('Comma, "quoted" and\nnew line');
    expect(rows[1]![col('description')]).toBe('Line 1\r\nLine 2, "x"');
    expect(rows[1]![col('labels')]).toBe('a;b');
    expect(rows[1]![col('estimate')]).toBe('3');
    expect(rows[2]![col('title')]).toBe(`'=HYPERLINK("http://evil.example","click")`);
    expect(rows[2]![col('description')]).toBe("'-1");
    expect(rows[2]![col('labels')]).toBe("'@x");
    expect(rows[2]![col('dueDate')]).toBe('2026-12-01');
    expect(rows[3]![col('title')]).toBe(' leading space');
    expect(rows[3]![col('assignedAgentId')]).toBe('bot-1');
    expect(rows[3]![col('dependencies')]).toBe('iss_a;iss_b');
    // No cell of the parsed file starts a formula.
    for (const row of rows.slice(1)) for (const cell of row) expect(cell).not.toMatch(/^[=+\-@\t\r]/);
  });

  it('exports: csv of no issues is the header row alone', () => {
    expect(parseCsv(renderCsv([]).bytes)).toEqual([[...CSV_COLUMNS]]);
  });
});

describe('exports: Markdown', () => {
  it('exports: markdown groups issues by status in workflow order', () => {
    const issues = [
      issue({ id: 'iss_1', status: 'done', title: 'Shipped' }),
      issue({ id: 'iss_2', status: 'ready', title: 'Next' }),
      issue({ id: 'iss_3', status: 'backlog', title: 'Later' }),
      issue({ id: 'iss_4', status: 'ready', title: 'Also next' }),
    ];
    expect(groupByStatus(issues).map((g) => [g.status, g.issues.map((i) => i.id)])).toEqual([
      ['backlog', ['iss_3']],
      ['ready', ['iss_2', 'iss_4']],
      ['done', ['iss_1']],
    ]);
    const text = renderMarkdown({ exportedAt: '2026-11-22T00:00:00.000Z', slug: 'acme' }, issues).bytes.toString('utf8');
    const headings = text.split('\n').filter((l) => l.startsWith('## '));
    expect(headings).toEqual(['## Backlog (1)', '## Ready (2)', '## Done (1)']);
    const ready = text.slice(text.indexOf('## Ready'), text.indexOf('## Done'));
    expect(ready).toContain('Next');
    expect(ready).toContain('Also next');
    expect(ready).not.toContain('Shipped');
  });

  it('exports: markdown escapes task text so it cannot add headings, links or tags', () => {
    expect(escapeMarkdown('# [x](http://e) <img src=x>\n## y')).toBe('\\# \\[x\\]\\(`http://e)` \\<img src=x\\> \\#\\# y');
    const text = renderMarkdown({ exportedAt: 'now', slug: 's' }, [issue({ title: '# Owned\n## [link](javascript:x)' })]).bytes.toString('utf8');
    expect(text.split('\n').filter((l) => l.startsWith('#'))).toEqual(['# Issues of s', '## Ready (1)']);
    expect(text).not.toContain('[link]');
  });
});

describe('exports: Markdown autolinks', () => {
  it('exports: markdown puts what GFM would autolink (URLs, www., e-mail) in code spans', () => {
    const title = 'See https://evil.example/x?a=1 or www.evil.example and mail boss@evil.example now, `tick` http://a.b/`c`';
    const line = renderMarkdown({ exportedAt: 'now', slug: 's' }, [issue({ title, labels: ['http://l.example'] })])
      .bytes.toString('utf8')
      .split('\n')
      .find((l) => l.startsWith('- '))!;
    expect(line).toContain('`https://evil.example/x?a=1`');
    expect(line).toContain('`www.evil.example`');
    expect(line).toContain('`boss@evil.example`');
    // A URL holding backticks gets a longer fence; backticks of the text itself are escaped.
    expect(line).toContain('`` http://a.b/`c` ``');
    expect(line).toContain('\\`tick\\`');
    // Outside code spans nothing autolinkable is left.
    const outside = line.replace(/`` .*? ``/g, ' ').replace(/(?<!\\)`[^`]*(?<!\\)`/g, ' ');
    expect(outside).not.toMatch(/:\/\/|www\.|@[\w-]+\./);
  });
});

describe('exports: JSON and backup', () => {
  it('exports: json is the service.issue-export envelope with the issues', () => {
    const body = JSON.parse(renderJson({ exportedAt: '2026-11-22T00:00:00.000Z', slug: 'acme' }, [issue()]).bytes.toString('utf8'));
    expect(body).toMatchObject({
      schemaId: EXPORT_SCHEMA_ID,
      schemaVersion: EXPORT_SCHEMA_VERSION,
      exportedAt: '2026-11-22T00:00:00.000Z',
      workspace: { slug: 'acme' },
      issueCount: 1,
      issues: [{ id: 'iss_1', title: 'A task', status: 'ready', projectId: 'prj_1', workspaceId: 'ws_1' }],
    });
    expect(EXPORT_SCHEMA_VERSION).toMatch(/^\d{4}-\d{2}-\d{2}\.issue-export\.v1$/);
  });

  it('exports: backup carries every record kind with counts', () => {
    const withRecords = {
      ...issue(),
      agent: { instructions: { objective: 'g', constraints: [], expectedOutput: '', verification: [], permissions: [], escalation: '' } },
      comments: [{ id: 'c1' }],
      timeEntries: [{ id: 't1' }, { id: 't2' }],
      evidence: [],
    };
    const body = JSON.parse(
      renderBackup(
        { exportedAt: 'now' },
        { workspace: { slug: 's', name: 'S', planId: 'enterprise' }, projects: [{ id: 'p' }], milestones: [], programs: [{ id: 'g' }], initiatives: [], issues: [withRecords] },
      ).bytes.toString('utf8'),
    );
    expect(body).toMatchObject({ schemaId: EXPORT_SCHEMA_ID, kind: 'backup', workspace: { slug: 's' } });
    expect(body.counts).toEqual({ projects: 1, milestones: 0, programs: 1, initiatives: 0, issues: 1, comments: 1, timeEntries: 2, evidence: 0 });
  });
});
