/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for tests that scrape
 * `/metrics`. Written here because the npm parser available (parse-prometheus-text-format 1.1)
 * folds every series of a labelled histogram into one when `_count`/`_sum` precede the buckets,
 * which is the order the OpenTelemetry exporter writes.
 *
 * It throws on anything Prometheus would reject: a malformed line, a family declared twice, a
 * sample outside its family, a value that is not a number, a histogram whose buckets are not
 * cumulative or whose `+Inf` bucket differs from its count.
 */

export interface PrometheusSample {
  labels: Record<string, string>;
  /** Counters, gauges, untyped. */
  value?: number;
  /** Histograms: cumulative counts by upper bound (`le`), count and sum. */
  buckets?: Record<string, number>;
  count?: number;
  sum?: number;
}

export interface PrometheusFamily {
  name: string;
  help: string;
  unit?: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  samples: PrometheusSample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function parseValue(raw: string, line: string): number {
  if (raw === '+Inf' || raw === 'Inf') return Infinity;
  if (raw === '-Inf') return -Infinity;
  if (raw === 'NaN') return NaN;
  const value = Number(raw);
  if (raw === '' || Number.isNaN(value)) throw new Error(`not a number in "${line}"`);
  return value;
}

/** `name{a="x",b="y"} value [timestamp]` */
function parseSample(line: string): { name: string; labels: Record<string, string>; value: number } {
  let i = 0;
  while (i < line.length && line[i] !== '{' && line[i] !== ' ') i++;
  const name = line.slice(0, i);
  if (!METRIC_NAME.test(name)) throw new Error(`bad metric name in "${line}"`);
  const labels: Record<string, string> = {};
  if (line[i] === '{') {
    i++;
    for (;;) {
      if (line[i] === '}') {
        i++;
        break;
      }
      const eq = line.indexOf('=', i);
      if (eq < 0) throw new Error(`bad labels in "${line}"`);
      const label = line.slice(i, eq).trim();
      if (!LABEL_NAME.test(label)) throw new Error(`bad label name "${label}" in "${line}"`);
      if (Object.hasOwn(labels, label)) throw new Error(`label ${label} repeated in "${line}"`);
      if (line[eq + 1] !== '"') throw new Error(`unquoted label value in "${line}"`);
      let value = '';
      let j = eq + 2;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '\\') {
          const next = line[++j];
          value += next === 'n' ? '\n' : next === '"' ? '"' : next === '\\' ? '\\' : `\\${next}`;
        } else value += line[j];
      }
      if (j >= line.length) throw new Error(`unterminated label value in "${line}"`);
      labels[label] = value;
      i = j + 1;
      if (line[i] === ',') i++;
      else if (line[i] !== '}') throw new Error(`bad labels in "${line}"`);
    }
  }
  const rest = line.slice(i).trim().split(/\s+/);
  if (rest.length < 1 || rest.length > 2 || rest[0] === '') throw new Error(`bad sample "${line}"`);
  if (rest[1] !== undefined && !/^-?\d+$/.test(rest[1])) throw new Error(`bad timestamp in "${line}"`);
  return { name, labels, value: parseValue(rest[0]!, line) };
}

export function parsePrometheusText(text: string): Map<string, PrometheusFamily> {
  const families = new Map<string, PrometheusFamily>();
  const typed = new Set<string>();
  let current: PrometheusFamily | undefined;
  const family = (name: string): PrometheusFamily => {
    let found = families.get(name);
    if (!found) families.set(name, (found = { name, help: '', type: 'UNTYPED', samples: [] }));
    return found;
  };
  const histograms = new Map<PrometheusFamily, Map<string, PrometheusSample>>();

  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    const meta = /^#\s+(HELP|TYPE|UNIT)\s+(\S+)(?:\s+(.*))?$/.exec(line);
    if (meta) {
      const [, kind, name, rest = ''] = meta;
      if (!METRIC_NAME.test(name!)) throw new Error(`bad metric name in "${line}"`);
      if (current && current.name !== name && families.has(name!) && families.get(name!)!.samples.length > 0) {
        throw new Error(`metric family ${name} is split across the scrape`);
      }
      current = family(name!);
      if (kind === 'HELP') current.help = rest;
      else if (kind === 'UNIT') current.unit = rest;
      else {
        if (typed.has(name!)) throw new Error(`metric family ${name} is declared twice`);
        typed.add(name!);
        const type = rest.toUpperCase();
        if (!['COUNTER', 'GAUGE', 'HISTOGRAM', 'SUMMARY', 'UNTYPED'].includes(type)) throw new Error(`bad type in "${line}"`);
        current.type = type as PrometheusFamily['type'];
      }
      continue;
    }
    if (line.startsWith('#')) continue;
    const sample = parseSample(line);
    if (current?.type === 'HISTOGRAM') {
      const suffix = ['_bucket', '_sum', '_count'].find((s) => sample.name === `${current!.name}${s}`);
      if (!suffix) throw new Error(`sample ${sample.name} outside its family (after # TYPE ${current.name})`);
      const { le, ...labels } = sample.labels;
      const key = JSON.stringify(Object.entries(labels).sort());
      let series = histograms.get(current);
      if (!series) histograms.set(current, (series = new Map()));
      let entry = series.get(key);
      if (!entry) {
        entry = { labels, buckets: {} };
        series.set(key, entry);
        current.samples.push(entry);
      }
      if (suffix === '_bucket') {
        if (le === undefined) throw new Error(`bucket without le in "${line}"`);
        entry.buckets![le] = sample.value;
      } else if (suffix === '_sum') entry.sum = sample.value;
      else entry.count = sample.value;
      continue;
    }
    if (current && sample.name !== current.name) throw new Error(`sample ${sample.name} outside its family (after # TYPE ${current.name})`);
    family(sample.name).samples.push({ labels: sample.labels, value: sample.value });
  }

  for (const [histogram, series] of histograms) {
    for (const entry of series.values()) {
      const bounds = Object.entries(entry.buckets ?? {}).sort(([a], [b]) => parseValue(a, a) - parseValue(b, b));
      for (let k = 1; k < bounds.length; k++) {
        if (bounds[k]![1] < bounds[k - 1]![1]) throw new Error(`${histogram.name}: buckets are not cumulative`);
      }
      if (bounds.at(-1)?.[0] !== '+Inf') throw new Error(`${histogram.name}: no +Inf bucket`);
      if (entry.count !== undefined && bounds.at(-1)![1] !== entry.count) throw new Error(`${histogram.name}: +Inf bucket differs from _count`);
    }
  }
  return families;
}
