import { ServiceError } from '@planning/errors';
import { describe, expect, it } from 'vitest';
import { assertNoDependencyCycle, assertNoParentCycle, findDependencyCycle } from './dependencies.js';

/** A graph as adjacency lists: task -> the tasks it depends on. */
function loader(graph: Record<string, string[]>) {
  return async (ids: string[]) => ids.filter((id) => id in graph).map((id) => ({ id, dependencies: graph[id] ?? [] }));
}

describe('dependencies: cycles', () => {
  it('dependencies: a chain without the task is fine', async () => {
    expect(await findDependencyCycle('a', ['b'], loader({ b: ['c'], c: [] }))).toBeUndefined();
  });

  it('dependencies: depending on yourself is a cycle', async () => {
    expect(await findDependencyCycle('a', ['a'], loader({}))).toEqual(['a', 'a']);
  });

  it('dependencies: a direct and an indirect cycle are found with their path', async () => {
    expect(await findDependencyCycle('a', ['b'], loader({ b: ['a'] }))).toEqual(['a', 'b', 'a']);
    expect(await findDependencyCycle('a', ['x', 'b'], loader({ x: [], b: ['c'], c: ['d'], d: ['a'] }))).toEqual(['a', 'b', 'c', 'd', 'a']);
  });

  it('dependencies: a diamond is not a cycle', async () => {
    expect(await findDependencyCycle('a', ['b', 'c'], loader({ b: ['d'], c: ['d'], d: [] }))).toBeUndefined();
  });

  it('dependencies: a cycle is refused with 400 naming dependencies', async () => {
    const err = await assertNoDependencyCycle('a', ['b'], loader({ b: ['a'] })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('invalid-input');
    expect((err as ServiceError).details.field).toBe('dependencies');
    expect((err as ServiceError).message).toContain('a -> b -> a');
  });

  it('dependencies: a task cannot be its own ancestor', async () => {
    const parents: Record<string, string | undefined> = { b: 'c', c: 'a', a: undefined };
    const parentOf = async (id: string) => parents[id];
    await expect(assertNoParentCycle('a', 'a', parentOf)).rejects.toMatchObject({ details: { field: 'parentId' } });
    await expect(assertNoParentCycle('a', 'b', parentOf)).rejects.toMatchObject({ details: { field: 'parentId' } });
    await expect(assertNoParentCycle('x', 'b', parentOf)).resolves.toBeUndefined();
  });
});
