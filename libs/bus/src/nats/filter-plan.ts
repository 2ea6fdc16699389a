import { invalidInput } from '@planning/errors';
import { subjectMatches } from '../port.js';
import { supportsMultipleFilters } from './server-version.js';

/**
 * How a consumer's filter subjects become JetStream consumer configuration.
 *
 * nats-server 2.10 added `filter_subjects` (several filters on one consumer). On older servers a
 * consumer with several filters is created with one covering filter (the longest common prefix of
 * the filters, then `>`), and the client acks and skips the messages that match none of them.
 */
export interface FilterPlan {
  filter_subject?: string;
  filter_subjects?: string[];
  /** Set when the server filters more loosely than asked and the client must check each message. */
  clientFilters?: string[];
}

/**
 * One filter that matches every subject any of `filters` matches: the leading tokens they share
 * literally, then `>`. Empty when they share no first token.
 */
export function coveringFilter(filters: readonly string[]): string {
  const split = filters.map((f) => f.split('.'));
  const first = split[0] ?? [];
  if (split.every((tokens) => tokens.length === first.length && tokens.every((t, i) => t === first[i]))) {
    return first.join('.');
  }
  const prefix: string[] = [];
  // `>` needs at least one token after the prefix, so the prefix stays shorter than every filter.
  const limit = Math.min(...split.map((tokens) => tokens.length)) - 1;
  for (let i = 0; i < limit; i++) {
    const token = first[i];
    // A shared `*` is fine in the prefix: it matches the same tokens for every filter.
    if (token === undefined) break;
    if (!split.every((tokens) => tokens[i] === token)) break;
    prefix.push(token);
  }
  return prefix.length === 0 ? '' : [...prefix, '>'].join('.');
}

export function planFilters(
  filters: readonly string[],
  serverVersion: string | undefined,
  streamSubjects: readonly string[],
): FilterPlan {
  if (filters.length === 1) return { filter_subject: filters[0]! };
  if (supportsMultipleFilters(serverVersion)) return { filter_subjects: [...filters] };
  let cover = coveringFilter(filters);
  if (cover === '') {
    // A filter must sit inside the stream's subjects; with a single stream subject that is the cover.
    if (streamSubjects.length !== 1) {
      throw invalidInput(
        'filterSubjects',
        `nats-server ${serverVersion ?? '(unknown)'} allows one filter per consumer, and these filters share no ` +
          'common first token to cover them with; upgrade to nats-server 2.10 or use one consumer per filter',
      );
    }
    cover = streamSubjects[0]!;
  }
  return { filter_subject: cover, clientFilters: [...filters] };
}

export function passesClientFilters(plan: FilterPlan, subject: string): boolean {
  return !plan.clientFilters || plan.clientFilters.some((f) => subjectMatches(f, subject));
}
