import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
// @ts-expect-error plain ESM script without type declarations
import { checkManifests, schemaGaps } from '../../scripts/check-chart.mjs';
import { METRICS } from '@planning/telemetry';
import { ADMIN_EMAIL, startCluster, type Cluster } from '../support/cluster.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const chart = join(root, 'charts/planning');
type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const check = checkManifests as (objects: Obj[], options?: { requireDigest?: boolean }) => string[];
const gaps = schemaGaps as (schema: Obj, values: unknown) => string[];

/** A minimal workload that passes every check, to break one thing at a time. */
function goodObjects(): Obj[] {
  const labels = (): Record<string, string> => ({ app: 'planning', component: 'issues' });
  const probe = { httpGet: { path: '/live', port: 'http' } };
  return [
    {
      kind: 'Deployment',
      metadata: { name: 'issues' },
      spec: {
        template: {
          metadata: { labels: labels() },
          spec: {
            securityContext: { runAsNonRoot: true, runAsUser: 1000 },
            containers: [
              {
                name: 'issues',
                image: 'registry.example.com/planning@sha256:' + 'a'.repeat(64),
                resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
                securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
                startupProbe: probe,
                livenessProbe: probe,
                readinessProbe: probe,
              },
            ],
          },
        },
      },
    },
    { kind: 'NetworkPolicy', metadata: { name: 'issues' }, spec: { podSelector: { matchLabels: labels() } } },
    { kind: 'Service', metadata: { name: 'issues' }, spec: { selector: labels(), ports: [{ name: 'http', port: 8080 }] } },
    { kind: 'Service', metadata: { name: 'issues-metrics' }, spec: { clusterIP: 'None', selector: labels(), ports: [{ name: 'metrics', port: 9464 }] } },
  ];
}

function helmBinary(): string {
  return execFileSync(join(root, 'scripts/get-helm.sh'), { encoding: 'utf8' }).trim();
}

function render(args: string[]): Obj[] {
  const out = execFileSync(helmBinary(), ['template', 'planning', chart, ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return parseAllDocuments(out)
    .map((d) => d.toJS() as Obj)
    .filter(Boolean);
}

describe('chart checks (scripts/check-chart.mjs)', () => {
  it('chart: a compliant workload passes', () => {
    expect(check(goodObjects(), { requireDigest: true })).toEqual([]);
  });

  it('chart: a workload no NetworkPolicy selects is reported', () => {
    const objects = goodObjects();
    objects[1]!.spec.podSelector.matchLabels.component = 'gateway';
    expect(check(objects)).toContain('Deployment/issues: no NetworkPolicy selects its pods');
  });

  it('chart: a container without limits, probes or a non-root context is reported', () => {
    const objects = goodObjects();
    const container = objects[0]!.spec.template.spec.containers[0];
    delete container.resources.limits;
    delete container.readinessProbe;
    container.securityContext.readOnlyRootFilesystem = false;
    objects[0]!.spec.template.spec.securityContext = { runAsUser: 0 };
    container.image = 'planning-service:0.1.0';
    const problems = check(objects, { requireDigest: true });
    for (const expected of [
      'no memory limit',
      'no readinessProbe',
      'root filesystem is writable',
      'runAsNonRoot is not true',
      'no non-zero runAsUser',
      'is not pinned by digest',
    ]) {
      expect(problems.some((p) => p.includes(expected))).toBe(true);
    }
  });

  it('chart: several replicas without a disruption budget or a spread, and an autoscaler without a behavior, are reported', () => {
    const objects = goodObjects();
    objects[0]!.spec.replicas = 3;
    expect(check(objects)).toEqual([
      'Deployment/issues: 3 replicas and no PodDisruptionBudget selects them',
      'Deployment/issues: 3 replicas with neither topology spread nor pod anti-affinity',
    ]);
    objects.push({ kind: 'PodDisruptionBudget', metadata: { name: 'issues' }, spec: { maxUnavailable: 1, selector: { matchLabels: { component: 'issues' } } } });
    objects[0]!.spec.template.spec.topologySpreadConstraints = [{ maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway' }];
    expect(check(objects)).toEqual([]);
    // An autoscaler's minimum counts, not the Deployment's (absent) replicas.
    delete objects[0]!.spec.replicas;
    delete objects[0]!.spec.template.spec.topologySpreadConstraints;
    objects.push({ kind: 'HorizontalPodAutoscaler', metadata: { name: 'issues' }, spec: { scaleTargetRef: { kind: 'Deployment', name: 'issues' }, minReplicas: 2 } });
    objects.push({ kind: 'HorizontalPodAutoscaler', metadata: { name: 'gone' }, spec: { scaleTargetRef: { kind: 'Deployment', name: 'gone' }, behavior: { scaleDown: { stabilizationWindowSeconds: 300 } } } });
    expect(check(objects)).toEqual([
      'HorizontalPodAutoscaler/issues: no behavior with a scale-down stabilization window',
      'HorizontalPodAutoscaler/gone: targets Deployment/gone, which the render does not have',
      'Deployment/issues: 2 replicas with neither topology spread nor pod anti-affinity',
    ]);
  });

  it('chart: a Service carrying traffic that also exposes the metrics port is reported', () => {
    const objects = goodObjects();
    objects[2]!.spec.ports.push({ name: 'metrics', port: 9464 });
    expect(check(objects)).toContain('Service/issues: exposes the metrics port beside other ports, or is not headless');
  });

  it('chart: values the schema does not describe are reported', () => {
    const schema = JSON.parse(readFileSync(join(chart, 'values.schema.json'), 'utf8')) as Obj;
    expect(gaps(schema, { metrics: { port: 9464, serviceMonitr: {} }, gateway: { autoscaling: { behaviour: {} } } })).toEqual([
      'metrics.serviceMonitr',
      'gateway.autoscaling.behaviour',
    ]);
  });
});

describe('the rendered chart', () => {
  it('chart: default values, all-in-one and the production example pass every check', () => {
    const result = spawnSync(process.execPath, [join(root, 'scripts/check-chart.mjs'), helmBinary()], { encoding: 'utf8' });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout.match(/: ok$/gm)).toHaveLength(3);
  }, 60_000);

  it('chart: only the gateway takes traffic from outside the release; services take gRPC from the release only', () => {
    const policies = render([]).filter((o) => o.kind === 'NetworkPolicy');
    const byComponent = new Map(policies.map((p) => [p.spec.podSelector.matchLabels['app.kubernetes.io/component'] as string, p]));
    expect([...byComponent.keys()].sort()).toEqual(['agents-claims', 'audit', 'gateway', 'imports-exports', 'issues', 'test']);
    const gateway = byComponent.get('gateway')!;
    expect(gateway.spec.ingress[0]).toEqual({ ports: [{ port: 'http', protocol: 'TCP' }] });
    for (const service of ['issues', 'agents-claims', 'imports-exports', 'audit']) {
      const ingress = byComponent.get(service)!.spec.ingress as Obj[];
      const ports = ingress.flatMap((rule) => rule.ports.map((p: Obj) => p.port));
      expect(ports.sort()).toEqual(['grpc', 'metrics']);
      const grpc = ingress.find((rule) => rule.ports[0].port === 'grpc')!;
      expect(grpc.from).toEqual([{ podSelector: { matchLabels: { 'app.kubernetes.io/instance': 'planning', 'app.kubernetes.io/name': 'planning' } } }]);
      const egressPorts = (byComponent.get(service)!.spec.egress as Obj[]).flatMap((rule) => rule.ports.map((p: Obj) => p.port));
      expect(new Set(egressPorts)).toEqual(new Set([53, 50051, 4222, 27017, 4317, 4318]));
    }
  }, 60_000);

  it('chart: the production example pins the image by digest, autoscales with a behaviour and monitors itself', () => {
    const objects = render(['-f', join(chart, 'values-production.yaml')]);
    const deployments = objects.filter((o) => o.kind === 'Deployment');
    for (const d of deployments) expect(d.spec.template.spec.containers[0].image).toMatch(/^registry\.example\.com\/planning-service@sha256:/);
    const hpas = objects.filter((o) => o.kind === 'HorizontalPodAutoscaler');
    expect(hpas.map((h) => h.metadata.name).sort()).toEqual(['planning-gateway', 'planning-issues']);
    for (const h of hpas) expect(h.spec.behavior.scaleDown.stabilizationWindowSeconds).toBe(300);
    // An autoscaled Deployment leaves its replica count to the autoscaler.
    expect(deployments.find((d) => d.metadata.name === 'planning-gateway')!.spec.replicas).toBeUndefined();
    const monitor = objects.find((o) => o.kind === 'ServiceMonitor')!;
    const metricsServices = objects.filter(
      (o) => o.kind === 'Service' && Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels[k] === v),
    );
    expect(metricsServices.map((s) => s.metadata.name).sort()).toEqual(
      ['agents-claims', 'audit', 'gateway', 'imports-exports', 'issues'].map((c) => `planning-${c}-metrics`),
    );
    const rule = objects.find((o) => o.kind === 'PrometheusRule')!;
    expect(rule.spec.groups[0].rules.map((r: Obj) => r.alert)).toEqual([
      'PlanningHttpErrorRatio',
      'PlanningRpcErrorRatio',
      'PlanningClaimRefusalSpike',
      'PlanningOutboxLag',
      'PlanningAuditLag',
      'PlanningBusDropped',
    ]);
    const dashboard = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'planning-dashboard')!;
    expect(dashboard.metadata.namespace).toBe('monitoring');
    expect(JSON.parse(dashboard.data['planning.json']).uid).toBe('planning-service');
  }, 60_000);
});

describe('alerts and dashboard', () => {
  /** Every series name the service exports, as Prometheus writes it. */
  const exported = new Set<string>(['target_info']);
  const counters = new Set(['busDropped', 'claimsStarted', 'claimsRefused', 'claimsExpired', 'rateLimitDecisions', 'importRows', 'exportBytes']);
  const histograms = new Set(Object.keys(METRICS).filter((k) => /Duration|Lag$|Remaining/.test(k) && !k.startsWith('outbox')));
  for (const [key, name] of Object.entries(METRICS)) {
    const base = name.replace(/\./g, '_');
    if (counters.has(key)) exported.add(`${base}_total`);
    else if (histograms.has(key)) for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${base}${suffix}`);
    else exported.add(base);
  }
  const referenced = (text: string) => new Set([...text.matchAll(/\b((?:planning|http|rpc|mcp|messaging)_[a-z_]+)\b/g)].map((m) => m[1]!));

  it('chart: the alerts and the dashboard query only metrics the service exports', () => {
    const rule = render(['--set', 'metrics.prometheusRule.enabled=true']).find((o) => o.kind === 'PrometheusRule')!;
    const exprs = (rule.spec.groups[0].rules as Obj[]).map((r) => r.expr as string).join('\n');
    const dashboard = readFileSync(join(chart, 'dashboards/planning.json'), 'utf8');
    const queries = (JSON.parse(dashboard).panels as Obj[]).flatMap((p) => (p.targets ?? []).map((t: Obj) => t.expr as string)).join('\n');
    // Label names share the prefixes; every series here is queried with a label selector.
    const series = (text: string) => [...referenced(text)].filter((name) => new RegExp(`${name}\\{`).test(text));
    const unknown = [...series(exprs), ...series(queries)].filter((name) => !exported.has(name));
    expect(unknown).toEqual([]);
    expect(series(queries).length).toBeGreaterThan(15);
  }, 60_000);
});

describe('helm test (charts/planning/files/helm-test.mjs)', () => {
  let cluster: Cluster;
  const script = readFileSync(join(chart, 'files/helm-test.mjs'), 'utf8');
  const runTest = (env: Record<string, string>) =>
    spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: { PATH: process.env.PATH, ...env } });

  beforeAll(async () => {
    cluster = await startCluster('all-in-one');
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('chart: `helm test` is a test hook running this script against the Service that takes traffic, in both modes', () => {
    for (const args of [[], ['--set', 'allInOne.enabled=true']]) {
      const objects = render(args);
      const pod = objects.find((o) => o.kind === 'Pod' && o.metadata.annotations?.['helm.sh/hook'] === 'test')!;
      expect(pod, `a test hook Pod (${args.join(' ') || 'default values'})`).toBeDefined();
      const container = pod.spec.containers[0];
      expect([...container.command, ...container.args]).toEqual(['node', '--input-type=module', '-e', script]);
      const env = Object.fromEntries((container.env as Obj[]).map((e) => [e.name, e]));
      const url = new URL(env.GATEWAY_URL.value as string);
      const service = objects.find((o) => o.kind === 'Service' && o.metadata.name === url.hostname)!;
      expect(service, `${url.hostname} is a Service of the release`).toBeDefined();
      expect((service.spec.ports as Obj[]).find((p) => p.port === Number(url.port))?.name).toBe('http');
      const secret = env.TEST_PASSWORD.valueFrom.secretKeyRef;
      expect(objects.find((o) => o.kind === 'Secret' && o.metadata.name === secret.name)?.stringData?.[secret.key] ?? objects.find((o) => o.kind === 'Secret' && o.metadata.name === secret.name)?.data?.[secret.key]).toBeDefined();
    }
  }, 60_000);

  it('chart: the test pod passes against a ready gateway with the admin credentials', () => {
    const result = runTest({ GATEWAY_URL: cluster.baseUrl, TEST_EMAIL: ADMIN_EMAIL, TEST_PASSWORD: cluster.adminPassword });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('ok   GET /api/auth/session (authenticated)');
  });

  it('chart: the test pod fails, naming the step, on a wrong password or an unreachable gateway', () => {
    const wrong = runTest({ GATEWAY_URL: cluster.baseUrl, TEST_EMAIL: ADMIN_EMAIL, TEST_PASSWORD: 'not-the-password' });
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).toContain('FAIL POST /api/auth/login as admin@example.com answered 401');
    const gone = runTest({ GATEWAY_URL: 'http://127.0.0.1:1', TEST_EMAIL: ADMIN_EMAIL, TEST_PASSWORD: 'x' });
    expect(gone.status).toBe(1);
    expect(gone.stderr).toMatch(/^FAIL http:\/\/127\.0\.0\.1:1: /);
  });
});
