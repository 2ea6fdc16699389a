/**
 * Projects, milestones, programs and initiatives: their statuses and the validation of their
 * fields (context packs included).
 */
import { invalidInput } from '@planning/errors';
import { LIMITS, validateEnum, validateName, validateText, validateUrl } from './fields.js';

export const PROJECT_STATUSES = ['active', 'paused', 'completed', 'archived'] as const;
export type ProjectStatus = (typeof PROJECT_STATUSES)[number];

export const MILESTONE_STATUSES = ['active', 'completed', 'cancelled'] as const;
export type MilestoneStatus = (typeof MILESTONE_STATUSES)[number];

/** Programs and initiatives share the project lifecycle. */
export const PROGRAM_STATUSES = PROJECT_STATUSES;
export type ProgramStatus = ProjectStatus;

export const CONTEXT_KINDS = ['file', 'doc', 'link'] as const;
export type ContextKind = (typeof CONTEXT_KINDS)[number];

/** A file, document or link attached to a project or initiative, read by agents as context. */
export interface ContextPackItem {
  kind: ContextKind;
  title: string;
  path?: string;
  url?: string;
  note?: string;
}

const PATH_PATTERN = /^[^\0]{1,500}$/;

export function validateContextPack(value: unknown, field = 'contextPack'): ContextPackItem[] {
  if (!Array.isArray(value)) throw invalidInput(field, `'${field}' must be an array`);
  if (value.length > LIMITS.contextPack) throw invalidInput(field, `'${field}' must hold at most ${LIMITS.contextPack} items`);
  return value.map((raw, i) => {
    const where = `${field}[${i}]`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalidInput(where, `'${where}' must be an object`);
    const item = raw as Record<string, unknown>;
    const out: ContextPackItem = {
      kind: validateEnum(item.kind, CONTEXT_KINDS, `${where}.kind`),
      title: validateName(item.title, `${where}.title`, LIMITS.title),
    };
    if (item.path !== undefined && item.path !== null && item.path !== '') {
      if (typeof item.path !== 'string' || !PATH_PATTERN.test(item.path)) {
        throw invalidInput(`${where}.path`, `'${where}.path' must be a path of at most 500 characters`);
      }
      out.path = item.path;
    }
    if (item.url !== undefined && item.url !== null && item.url !== '') out.url = validateUrl(item.url, `${where}.url`);
    if (item.note !== undefined && item.note !== null && item.note !== '') out.note = validateText(item.note, `${where}.note`, LIMITS.note);
    if (out.kind === 'link' && out.url === undefined) throw invalidInput(`${where}.url`, `'${where}.url' is required for a link`);
    if (out.kind !== 'link' && out.path === undefined && out.url === undefined) {
      throw invalidInput(`${where}.path`, `'${where}.path' or '${where}.url' is required for a ${out.kind}`);
    }
    return out;
  });
}

export function validateGoal(value: unknown, field = 'goal'): string {
  return validateText(value, field, LIMITS.goal).trim();
}
