#!/usr/bin/env node
// Renders the Helm chart the ways it is installed and checks what a platform team relies on:
//   - every workload is selected by a NetworkPolicy;
//   - every container has resource requests and a memory limit, a non-root security context
//     (runAsNonRoot, a non-zero uid, no privilege escalation, a read-only root filesystem, all
//     capabilities dropped), and, for long-running workloads, startup, liveness and readiness probes;
//   - a workload that runs more than one replica (its own count, or its autoscaler's minimum) is
//     selected by a PodDisruptionBudget and spreads its replicas (topology spread or pod
//     anti-affinity); every HorizontalPodAutoscaler targets a workload of the render and says how
//     fast it scales (spec.behavior, with a scale-down stabilization window);
//   - no Service that carries traffic exposes the metrics port, and every workload has a metrics Service;
//   - with the production example, every image is pinned by digest;
//   - values.schema.json describes every value in values.yaml and the example values files.
//
//   node scripts/check-chart.mjs [path/to/helm]     (default: scripts/get-helm.sh)
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse as parseYaml } from 'yaml';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const chart = join(root, 'charts/planning');

/** The renders CI checks: name, helm arguments, and whether images must be pinned by digest. */
export const RENDERS = [
  { name: 'default values', args: [] },
  { name: 'all-in-one', args: ['--set', 'allInOne.enabled=true'] },
  { name: 'production example', args: ['-f', join(chart, 'values-production.yaml')], requireDigest: true },
];

const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'Job', 'CronJob', 'Pod']);

/** The pod template of a workload object (a bare Pod is its own template). */
function podTemplate(obj) {
  if (obj.kind === 'Pod') return { metadata: obj.metadata, spec: obj.spec };
  if (obj.kind === 'CronJob') return obj.spec?.jobTemplate?.spec?.template;
  return obj.spec?.template;
}

/** Helm test hooks run once and end: they need no probes. */
function isHook(obj) {
  return Boolean(obj.metadata?.annotations?.['helm.sh/hook']);
}

function matchesSelector(selector, labels) {
  if (!selector) return false;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const expr of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, expr.key);
    const value = labels[expr.key];
    if (expr.operator === 'In' && !(has && expr.values.includes(value))) return false;
    if (expr.operator === 'NotIn' && has && expr.values.includes(value)) return false;
    if (expr.operator === 'Exists' && !has) return false;
    if (expr.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

/** Problems in one render's objects (parsed manifests). */
export function checkManifests(objects, options = {}) {
  const problems = [];
  const name = (obj) => `${obj.kind}/${obj.metadata?.name}`;
  const policies = objects.filter((o) => o.kind === 'NetworkPolicy');
  const workloads = objects.filter((o) => WORKLOAD_KINDS.has(o.kind));
  const metricsPort = options.metricsPort ?? 9464;

  for (const workload of workloads) {
    const template = podTemplate(workload);
    const labels = template?.metadata?.labels ?? {};
    if (!policies.some((p) => matchesSelector(p.spec?.podSelector, labels))) {
      problems.push(`${name(workload)}: no NetworkPolicy selects its pods`);
    }
    const spec = template?.spec ?? {};
    const podSecurity = spec.securityContext ?? {};
    if (spec.hostNetwork || spec.hostPID || spec.hostIPC) problems.push(`${name(workload)}: uses the host's namespaces`);
    const containers = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
    if (containers.length === 0) problems.push(`${name(workload)}: no containers`);
    for (const container of containers) {
      const where = `${name(workload)} container ${container.name}`;
      const limits = container.resources?.limits ?? {};
      const requests = container.resources?.requests ?? {};
      if (limits.memory === undefined) problems.push(`${where}: no memory limit`);
      if (requests.memory === undefined || requests.cpu === undefined) problems.push(`${where}: no cpu and memory requests`);
      const security = { ...podSecurity, ...(container.securityContext ?? {}) };
      if (security.runAsNonRoot !== true) problems.push(`${where}: runAsNonRoot is not true`);
      if (security.runAsUser === 0 || security.runAsUser === undefined) problems.push(`${where}: no non-zero runAsUser`);
      if (container.securityContext?.allowPrivilegeEscalation !== false) problems.push(`${where}: allowPrivilegeEscalation is not false`);
      if (container.securityContext?.privileged === true) problems.push(`${where}: privileged`);
      if (container.securityContext?.readOnlyRootFilesystem !== true) problems.push(`${where}: root filesystem is writable`);
      if (!(container.securityContext?.capabilities?.drop ?? []).includes('ALL')) problems.push(`${where}: capabilities not dropped`);
      const isInit = (spec.initContainers ?? []).includes(container);
      if (!isHook(workload) && !isInit) {
        for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
          if (!container[probe]) problems.push(`${where}: no ${probe}`);
        }
      }
      if (options.requireDigest && !/@sha256:[0-9a-f]{64}$/.test(container.image ?? '')) {
        problems.push(`${where}: image ${container.image} is not pinned by digest`);
      }
    }
  }

  // Several replicas: a disruption budget keeps some up through node drains, and the scheduler is
  // told to keep them apart. Autoscalers say how fast they move, so a burst does not make them flap.
  const budgets = objects.filter((o) => o.kind === 'PodDisruptionBudget');
  const autoscalers = objects.filter((o) => o.kind === 'HorizontalPodAutoscaler');
  for (const hpa of autoscalers) {
    const target = hpa.spec?.scaleTargetRef ?? {};
    if (!workloads.some((w) => w.kind === target.kind && w.metadata?.name === target.name)) {
      problems.push(`${name(hpa)}: targets ${target.kind}/${target.name}, which the render does not have`);
    }
    if (hpa.spec?.behavior?.scaleDown?.stabilizationWindowSeconds === undefined) problems.push(`${name(hpa)}: no behavior with a scale-down stabilization window`);
  }
  for (const workload of workloads.filter((w) => !isHook(w))) {
    const hpa = autoscalers.find((h) => h.spec?.scaleTargetRef?.kind === workload.kind && h.spec?.scaleTargetRef?.name === workload.metadata?.name);
    const replicas = hpa ? (hpa.spec?.minReplicas ?? 1) : (workload.spec?.replicas ?? 1);
    if (replicas <= 1) continue;
    const template = podTemplate(workload);
    const labels = template?.metadata?.labels ?? {};
    if (!budgets.some((b) => matchesSelector(b.spec?.selector, labels))) problems.push(`${name(workload)}: ${replicas} replicas and no PodDisruptionBudget selects them`);
    const spec = template?.spec ?? {};
    const spread = (spec.topologySpreadConstraints ?? []).length > 0 || spec.affinity?.podAntiAffinity !== undefined;
    if (!spread) problems.push(`${name(workload)}: ${replicas} replicas with neither topology spread nor pod anti-affinity`);
  }

  // Metrics stay off the Services that carry traffic; each workload has a metrics Service.
  const services = objects.filter((o) => o.kind === 'Service');
  const metricsServices = services.filter((s) => (s.spec?.ports ?? []).some((p) => p.name === 'metrics' || p.port === metricsPort));
  for (const service of metricsServices) {
    const ports = service.spec?.ports ?? [];
    if (ports.length !== 1 || service.spec?.clusterIP !== 'None') {
      problems.push(`${name(service)}: exposes the metrics port beside other ports, or is not headless`);
    }
  }
  for (const workload of workloads.filter((w) => !isHook(w))) {
    const labels = podTemplate(workload)?.metadata?.labels ?? {};
    if (!metricsServices.some((s) => matchesSelector({ matchLabels: s.spec?.selector }, labels))) {
      problems.push(`${name(workload)}: no metrics Service selects its pods`);
    }
  }
  return problems;
}

/**
 * Value paths in `values` that the schema does not describe. Objects with `properties` must name
 * each key (or allow others through `additionalProperties`); arrays check their items.
 */
export function schemaGaps(schema, values, path = '', definitions = schema.definitions ?? {}) {
  const resolve = (node) => {
    let current = node;
    while (current?.$ref) current = definitions[current.$ref.replace('#/definitions/', '')];
    return current;
  };
  const node = resolve(schema);
  const gaps = [];
  if (!node) return [path || '(root)'];
  if (Array.isArray(values)) {
    const items = resolve(node.items);
    if (items && values.some((v) => v !== null && typeof v === 'object')) {
      values.forEach((v, i) => {
        if (v !== null && typeof v === 'object') gaps.push(...schemaGaps(items, v, `${path}[${i}]`, definitions));
      });
    }
    return gaps;
  }
  if (values === null || typeof values !== 'object') return gaps;
  for (const [key, value] of Object.entries(values)) {
    const child = node.properties?.[key] ?? (typeof node.additionalProperties === 'object' ? node.additionalProperties : undefined);
    const keyPath = path ? `${path}.${key}` : key;
    if (child === undefined) {
      // An open object (no properties listed) may hold anything, such as affinity or resources.
      if (node.properties || node.additionalProperties === false) gaps.push(keyPath);
      continue;
    }
    gaps.push(...schemaGaps(child, value, keyPath, definitions));
  }
  return gaps;
}

function render(helm, args) {
  const out = execFileSync(helm, ['template', 'planning', chart, ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return parseAllDocuments(out)
    .map((doc) => doc.toJS())
    .filter((obj) => obj && typeof obj === 'object');
}

function main() {
  const helm = process.argv[2] ?? execFileSync(join(root, 'scripts/get-helm.sh'), { encoding: 'utf8' }).trim();
  let failed = false;
  for (const r of RENDERS) {
    const objects = render(helm, r.args);
    const problems = checkManifests(objects, { requireDigest: r.requireDigest });
    const workloads = objects.filter((o) => WORKLOAD_KINDS.has(o.kind)).length;
    const policies = objects.filter((o) => o.kind === 'NetworkPolicy').length;
    if (problems.length > 0) {
      failed = true;
      console.error(`check-chart: ${r.name}: ${problems.length} problems`);
      for (const p of problems) console.error(`  ${p}`);
    } else {
      console.log(`check-chart: ${r.name}: ${objects.length} objects, ${workloads} workloads, ${policies} NetworkPolicies: ok`);
    }
  }
  const schema = JSON.parse(readFileSync(join(chart, 'values.schema.json'), 'utf8'));
  for (const file of ['values.yaml', 'values-production.yaml', 'values-dev.yaml']) {
    const gaps = schemaGaps(schema, parseYaml(readFileSync(join(chart, file), 'utf8')));
    if (gaps.length > 0) {
      failed = true;
      console.error(`check-chart: values.schema.json does not describe ${gaps.length} values of ${file}:`);
      for (const g of gaps) console.error(`  ${g}`);
    } else {
      console.log(`check-chart: values.schema.json describes every value of ${file}`);
    }
  }
  process.exit(failed ? 1 : 0);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
