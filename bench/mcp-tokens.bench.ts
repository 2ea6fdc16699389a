/**
 * What the MCP tool list costs an agent: the token count of the `tools/list` result (every tool's
 * name, title, description, input and output schema and annotations, as the endpoint serializes
 * it) for the full list and `?toolset=core`, with two real BPE tokenizers (js-tiktoken's bundled
 * o200k_base and cl100k_base ranks; nothing is downloaded). The e2e suite checks that the
 * endpoint's `tools/list` is exactly `listedTools(toolset)`, so this measures what the wire carries.
 */
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { listedTools, type Toolset } from '../services/gateway/src/mcp/catalog.js';
import { machine, type Bench } from './support.js';

const CORE_BUDGET = 4_000;

export function toolListTokens(toolset: Toolset): { tools: number; bytes: number; o200k: number; cl100k: number; perTool: { name: string; o200k: number }[] } {
  const tools = listedTools(toolset);
  const text = JSON.stringify({ tools });
  const o = new Tiktoken(o200k);
  const c = new Tiktoken(cl100k);
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
    const full = toolListTokens('full');
    const core = toolListTokens('core');
    log(`full: ${full.tools} tools, ${full.o200k} tokens (o200k); core: ${core.tools} tools, ${core.o200k} tokens`);
    const row = (label: string, r: ReturnType<typeof toolListTokens>) =>
      `| ${label} | ${r.tools} | ${r.bytes.toLocaleString('en-US')} | ${r.o200k.toLocaleString('en-US')} | ${r.cl100k.toLocaleString('en-US')} |`;
    const largest = full.perTool
      .slice(0, 5)
      .map((t) => `\`${t.name}\` ${t.o200k}`)
      .join(', ');
    return [
      '## MCP tool list size',
      '',
      `${machine()}. The \`tools/list\` result of \`POST /api/mcp\` (every tool's name, title, description, input and output schema and annotations, serialized as the endpoint sends it), counted with js-tiktoken's bundled ranks: o200k_base (GPT-4o family) and cl100k_base (GPT-4). Other model families tokenize differently; these are indicative. Budget for the core list: under ${CORE_BUDGET.toLocaleString('en-US')} tokens.`,
      '',
      '| list | tools | bytes | tokens (o200k_base) | tokens (cl100k_base) |',
      '|---|---:|---:|---:|---:|',
      row('full (`POST /api/mcp`)', full),
      row('core (`POST /api/mcp?toolset=core`)', core),
      '',
      `Core list within budget: **${core.o200k < CORE_BUDGET && core.cl100k < CORE_BUDGET ? 'yes' : 'NO'}**. Largest tools (o200k_base): ${largest}.`,
    ].join('\n');
  },
};

export default bench;
