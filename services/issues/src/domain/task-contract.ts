/**
 * The task contract (DECISIONS §6): the brief an agent works from. Its six sections live under
 * `agent.instructions`; the task-contract endpoint and `PATCH /api/issues/{id}` both change them
 * through `mergeInstructions`, the one merge.
 */
import { LIMITS, validateText, validateTextList } from './fields.js';

export interface Instructions {
  objective: string;
  constraints: string[];
  expectedOutput: string;
  verification: string[];
  permissions: string[];
  escalation: string;
}

/** A change to the brief: a present key replaces its section; null, '' or [] unsets it. */
export interface InstructionsPatch {
  objective?: string | null;
  constraints?: string[] | null;
  expectedOutput?: string | null;
  verification?: string[] | null;
  permissions?: string[] | null;
  escalation?: string | null;
}

/** Section names as the contract shows them; `goal` is `agent.instructions.objective`. */
export const CONTRACT_SECTIONS = ['goal', 'constraints', 'expectedOutput', 'verification', 'permissions', 'escalation'] as const;
export type ContractSection = (typeof CONTRACT_SECTIONS)[number];

const SECTION_KEY: Readonly<Record<ContractSection, keyof Instructions>> = {
  goal: 'objective',
  constraints: 'constraints',
  expectedOutput: 'expectedOutput',
  verification: 'verification',
  permissions: 'permissions',
  escalation: 'escalation',
};

const TEXT_KEYS = ['objective', 'expectedOutput', 'escalation'] as const;
const LIST_KEYS = ['constraints', 'verification', 'permissions'] as const;

export function emptyInstructions(): Instructions {
  return { objective: '', constraints: [], expectedOutput: '', verification: [], permissions: [], escalation: '' };
}

export function sectionFilled(instructions: Instructions, section: ContractSection): boolean {
  const value = instructions[SECTION_KEY[section]];
  return Array.isArray(value) ? value.length > 0 : value.trim().length > 0;
}

export interface Completeness {
  /** Goal, expected output and at least one verification step are set. */
  ready: boolean;
  /** Filled sections / 6, rounded to two decimals. */
  score: number;
  missing: ContractSection[];
}

export function completeness(instructions: Instructions): Completeness {
  const missing = CONTRACT_SECTIONS.filter((s) => !sectionFilled(instructions, s));
  const filled = CONTRACT_SECTIONS.length - missing.length;
  return {
    ready: sectionFilled(instructions, 'goal') && sectionFilled(instructions, 'expectedOutput') && sectionFilled(instructions, 'verification'),
    score: Math.round((filled / CONTRACT_SECTIONS.length) * 100) / 100,
    missing,
  };
}

/**
 * Validates a patch of the brief (fields named `<prefix>.<key>`, e.g. `agent.instructions.objective`).
 * Text is trimmed; blank list items are dropped.
 */
export function validateInstructionsPatch(raw: Record<string, unknown>, prefix = 'agent.instructions'): InstructionsPatch {
  const patch: InstructionsPatch = {};
  for (const key of TEXT_KEYS) {
    if (!(key in raw) || raw[key] === undefined) continue;
    const value = raw[key];
    patch[key] = value === null ? null : validateText(value, `${prefix}.${key}`, LIMITS.sectionText).trim();
  }
  for (const key of LIST_KEYS) {
    if (!(key in raw) || raw[key] === undefined) continue;
    const value = raw[key];
    patch[key] = value === null ? null : validateTextList(value, `${prefix}.${key}`, LIMITS.sectionItems, LIMITS.sectionItem);
  }
  return patch;
}

/** A complete brief from create input: unset sections are empty. */
export function validateInstructions(raw: Record<string, unknown> | undefined, prefix = 'agent.instructions'): Instructions {
  return mergeInstructions(emptyInstructions(), validateInstructionsPatch(raw ?? {}, prefix)).next;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * Merges a (validated) patch into the brief. Returns the new brief and the contract sections
 * that actually changed: sending the same brief twice changes nothing.
 */
export function mergeInstructions(current: Instructions, patch: InstructionsPatch): { next: Instructions; changed: ContractSection[] } {
  const next: Instructions = {
    ...current,
    constraints: [...current.constraints],
    verification: [...current.verification],
    permissions: [...current.permissions],
  };
  const changed: ContractSection[] = [];
  for (const section of CONTRACT_SECTIONS) {
    const key = SECTION_KEY[section];
    const value = patch[key];
    if (value === undefined) continue;
    if ((LIST_KEYS as readonly string[]).includes(key)) {
      const list = (value ?? []) as string[];
      const listKey = key as (typeof LIST_KEYS)[number];
      if (!sameList(next[listKey], list)) {
        next[listKey] = [...list];
        changed.push(section);
      }
    } else {
      const text = (value ?? '') as string;
      const textKey = key as (typeof TEXT_KEYS)[number];
      if (next[textKey] !== text) {
        next[textKey] = text;
        changed.push(section);
      }
    }
  }
  return { next, changed };
}

/** The field path a contract section is stored under. */
export function sectionField(section: ContractSection): string {
  return `agent.instructions.${SECTION_KEY[section]}`;
}
