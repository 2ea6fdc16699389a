import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.js';
import { described, errors, ok } from '../openapi.js';
import { doneStatusJson, doneStatusSchema, issueStatusSchema, taskContractJson, taskContractSchema } from './planning-json.js';
import { fencingTokenSchema, idParams, instructionsPatch, instructionsSchema, type RestInstructions } from './planning-input.js';

const issueRef = issueStatusSchema;

const patchBody = {
  type: 'object',
  required: ['agent'],
  additionalProperties: false,
  properties: {
    agent: { type: 'object', required: ['instructions'], additionalProperties: false, properties: { instructions: instructionsSchema } },
    version: { type: 'integer', minimum: 1, maximum: 2147483647, description: 'Apply only if the issue is still at this version.' },
    fencingToken: fencingTokenSchema,
  },
} as const;

export const taskContractResponse = ok({
  type: 'object',
  required: ['issue', 'taskContract', 'done'],
  properties: { issue: issueRef, taskContract: taskContractSchema, done: described(doneStatusSchema, 'What moving the task to done still needs under the done policy.') },
});
export const taskContractChangeResponse = ok({
  type: 'object',
  required: ['issue', 'taskContract', 'changedSections'],
  properties: { issue: issueRef, taskContract: taskContractSchema, changedSections: { type: 'array', items: { type: 'string' } } },
});

/**
 * The task contract (the brief an agent works from): read it, and merge sections into it.
 * Humans change the same sections through `PATCH /api/issues/{id}` `agent.instructions`.
 */
export async function taskContractRoutes(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  app.get<{ Params: { id: string } }>(
    '/api/issues/:id/task-contract',
    {
      schema: {
        operationId: 'getTaskContract',
        summary: "An issue's task contract",
        params: idParams,
        response: { 200: taskContractResponse },
      },
      config: { access: { auth: 'session-or-token', scope: 'issues:read' } },
    },
    async (request) => {
      const result = await deps.rpc.tasks.getTaskContract({ issueId: request.params.id }, { principal: request.principal });
      return { data: { issue: { id: result.issueId, status: result.status }, taskContract: taskContractJson(result.contract), done: doneStatusJson(result.done) } };
    },
  );

  app.patch<{ Params: { id: string }; Body: { agent: { instructions: RestInstructions }; version?: number; fencingToken?: number } }>(
    '/api/issues/:id/task-contract',
    {
      schema: {
        operationId: 'updateTaskContract',
        summary: "Merge sections into an issue's task contract",
        description:
          'Sections (goal = `objective`, constraints, expectedOutput, verification, permissions, escalation) under `agent.instructions`; the ones sent replace theirs, `null` unsets one. Retry-safe: the same body again changes nothing and records no activity. `completeness.score` = filled sections / 6; `ready` = goal, expected output and a verification step are set.',
        params: idParams,
        body: patchBody,
        response: { ...errors('work-already-claimed'), 200: taskContractChangeResponse },
      },
      config: { access: { auth: 'token', scope: 'issues:write' } },
    },
    async (request) => {
      const result = await deps.rpc.tasks.updateTaskContract(
        {
          issueId: request.params.id,
          instructions: instructionsPatch(request.body.agent.instructions),
          expectedVersion: request.body.version,
          fencingToken: request.body.fencingToken,
        },
        { principal: request.principal },
      );
      return {
        data: {
          issue: { id: result.issueId, status: result.status },
          taskContract: taskContractJson(result.contract),
          changedSections: result.changedSections,
        },
      };
    },
  );
}
