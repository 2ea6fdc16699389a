import { describe, expect, it } from 'vitest';
import { MODEL_VISIBLE_BUDGET, toolListTokens } from '../../bench/mcp-tokens.bench.js';

/**
 * The MCP tool list's token budget (issue #13): what a model sees of each tool — name, description
 * and input schema — stays within the budget in o200k_base tokens. Token counts are deterministic
 * (unlike timings), so the budget is held here; `pnpm bench mcp-tokens` reports the figures.
 */
describe('mcp token budget', () => {
  it.each(['core', 'full'] as const)('mcp: the model-visible %s tool list stays within its o200k budget, in either name style', (toolset) => {
    for (const names of ['dotted', 'portable'] as const) {
      const { o200k } = toolListTokens(toolset, 'model', names);
      expect(o200k, `${toolset} ${names}: ${o200k} tokens`).toBeLessThanOrEqual(MODEL_VISIBLE_BUDGET[toolset]);
    }
  });
});
