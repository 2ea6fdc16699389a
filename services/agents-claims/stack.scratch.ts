import { createClaimsHarness } from '@planning/agents-claims/testing/claims-harness';
const h = await createClaimsHarness({});
const ws = await h.planning.workspace({ ownerId: 'usr_owner', planId: 'enterprise' });
const project = await h.project(ws);
const a = h.agent(ws, 'bench-0');
const t = await h.task(project);
for (let i = 0; i < 3; i++) { await h.rpc.claimWork({ issueId: t }, { principal: a }); await h.rpc.releaseClaim({ issueId: t }, { principal: a }); }
await new Promise((r) => setTimeout(r, 100));
(globalThis as any).__stackOn = true;
for (let i = 0; i < 10; i++) { await h.rpc.claimWork({ issueId: t }, { principal: a }); await h.rpc.releaseClaim({ issueId: t }, { principal: a }); }
await new Promise((r) => setTimeout(r, 100));
(globalThis as any).__stackOn = false;
for (const [k, v] of [...(globalThis as any).__stacks].sort((x: any, y: any) => y[1] - x[1])) console.log(v / 10, k);
await h.close();
