/**
 * What the MCP tool list costs an agent, counted with two real BPE tokenizers (js-tiktoken's
 * bundled o200k_base and cl100k_base ranks; nothing is downloaded): the whole `tools/list` result
 * as the endpoint serializes it (names, titles, descriptions, input and output schemas,
 * annotations), and the part a model sees — name, description and input schema; hosts keep
 * titles, annotations and output schemas out of the prompt. The e2e suite checks that the
 * endpoint's `tools/list` is exactly `listedTools(toolset, names)`, so this measures what the wire
 * carries. Budgets (o200k_base, model-visible): core ≤ 2,500 tokens, full ≤ 5,000; a test holds
 * them (test/budgets/mcp-tokens.test.ts).
 */
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { listedTools, type NameStyle, type Toolset } from '../services/gateway/src/mcp/catalog.js';
import { machine, type Bench } from './support.js';

export const MODEL_VISIBLE_BUDGET: Readonly<Record<Toolset, number>> = { core: 2_500, full: 5_000 };

export type ListPart = 'wire' | 'model';

/** What a model is shown of each tool: its name, description and input schema. */
function visible(tools: ReturnType<typeof listedTools>, part: ListPart): object[] {
  return part === 'wire' ? tools : tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
}

let encoders: { o: Tiktoken; c: Tiktoken } | undefined;
const tokenizers = () => (encoders ??= { o: new Tiktoken(o200k), c: new Tiktoken(cl100k) });

export function toolListTokens(
  toolset: Toolset,
  part: ListPart = 'wire',
  names: NameStyle = 'dotted',
): { tools: number; bytes: number; o200k: number; cl100k: number; perTool: { name: string; o200k: number }[] } {
  const tools = visible(listedTools(toolset, names), part) as { name: string }[];
  const text = JSON.stringify({ tools });
  const { o, c } = tokenizers();
  return {
    tools: tools.length,
    bytes: Buffer.byteLength(text),
    o200k: o.encode(text).length,
    cl100k: c.encode(text).length,
    perTool: tools.map((t) => ({ name: t.name, o200k: o.encode(JSON.stringify(t)).length })).sort((a, b) => b.o200k - a.o200k),
  };
}

const bench: Bench = {
  name: 'mcp-tokens',
  async run(log) {
    const rows: [string, ReturnType<typeof toolListTokens>][] = [];
    for (const toolset of ['full', 'core'] as const) {
      const query = toolset === 'core' ? '?toolset=core' : '';
      rows.push([`${toolset}, model-visible (name, description, input schema)`, toolListTokens(toolset, 'model')]);
      rows.push([`${toolset}, model-visible, \`names=portable\``, toolListTokens(toolset, 'model', 'portable')]);
      rows.push([`${toolset}, whole \`tools/list\` (\`POST /api/mcp${query}\`)`, toolListTokens(toolset, 'wire')]);
    }
    const model = (toolset: Toolset) => toolListTokens(toolset, 'model');
    for (const [label, r] of rows) log(`${label}: ${r.tools} tools, ${r.o200k} tokens (o200k)`);
    const row = (label: string, r: ReturnType<typeof toolListTokens>) =>
      `| ${label} | ${r.tools} | ${r.bytes.toLocaleString('en-US')} | ${r.o200k.toLocaleString('en-US')} | ${r.cl100k.toLocaleString('en-US')} |`;
    const largest = model('full')
      .perTool.slice(0, 5)
      .map((t) => `\`${t.name}\` ${t.o200k}`)
      .join(', ');
    const within = (toolset: Toolset) => {
      const r = model(toolset);
      return `${toolset} ${r.o200k.toLocaleString('en-US')} of ${MODEL_VISIBLE_BUDGET[toolset].toLocaleString('en-US')}: **${r.o200k <= MODEL_VISIBLE_BUDGET[toolset] ? 'yes' : 'NO'}**`;
    };
    return [
      '## MCP tool list size',
      '',
      `${machine()}. The tool list of \`POST /api/mcp\` counted with js-tiktoken's bundled ranks: o200k_base (GPT-4o family) and cl100k_base (GPT-4). "Model-visible" is what a host puts in the prompt — each tool's name, description and input schema; "whole" is the \`tools/list\` result as sent, with titles, annotations and the exact output schemas hosts use to validate results. Other model families tokenize differently; these are indicative. Budgets (o200k_base, model-visible): core ≤ ${MODEL_VISIBLE_BUDGET.core.toLocaleString('en-US')}, full ≤ ${MODEL_VISIBLE_BUDGET.full.toLocaleString('en-US')}.`,
      '',
      '| list | tools | bytes | tokens (o200k_base) | tokens (cl100k_base) |',
      '|---|---:|---:|---:|---:|',
      ...rows.map(([label, r]) => row(label, r)),
      '',
      `Within budget: ${within('core')}; ${within('full')}. Largest tools, model-visible (o200k_base): ${largest}.`,
    ].join('\n');
  },
};

export default bench;
