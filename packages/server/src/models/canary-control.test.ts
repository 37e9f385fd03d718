import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ServerMetrics } from '../metrics/server-metrics.ts';
import { parseCanaryDeclaration } from '../repository/canary-declaration.ts';
import { CanaryControl } from './canary-control.ts';

const SERVING = new Set(['1', '2']);

function declared(weight: number, extra: object = {}) {
  const text = JSON.stringify({ stable_version: '1', canary_version: '2', canary_weight: weight, ...extra });
  return { text, declaration: parseCanaryDeclaration(text) };
}

async function gauge(metrics: ServerMetrics, version: string): Promise<number | undefined> {
  return (await metrics.canaryWeight.get()).values.find((v) => v.labels['version'] === version)?.value;
}

describe('CanaryControl', () => {
  let random = 0;
  let metrics: ServerMetrics;
  let control: CanaryControl;

  beforeEach(() => {
    vi.useFakeTimers();
    metrics = new ServerMetrics({ processMetrics: false });
    control = new CanaryControl({
      metrics,
      logger: pino({ level: 'silent' }),
      random: () => random,
      now: () => Date.now(),
      servingVersions: () => SERVING,
    });
  });

  afterEach(() => {
    control.close();
    vi.useRealTimers();
  });

  it('splits keyless requests by the weight, and only for models with a declaration', async () => {
    expect(control.versionFor('m', undefined, SERVING)).toBeUndefined();
    control.apply('m', declared(20));
    random = 0.19;
    expect(control.versionFor('m', undefined, SERVING)).toBe('2');
    random = 0.21;
    expect(control.versionFor('m', undefined, SERVING)).toBe('1');
    expect([await gauge(metrics, '1'), await gauge(metrics, '2')]).toEqual([80, 20]);
  });

  it('keeps a key on one version, and keys on the canary stay there as the weight grows', () => {
    control.apply('m', declared(20));
    const keys = Array.from({ length: 200 }, (_, i) => `k${i}`);
    const at20 = keys.filter((k) => control.versionFor('m', { header: k }, SERVING) === '2');
    expect(keys.every((k) => control.versionFor('m', { header: k }, SERVING) === control.versionFor('m', { header: k }, SERVING))).toBe(
      true,
    );
    control.apply('m', declared(50));
    const at50 = keys.filter((k) => control.versionFor('m', { header: k }, SERVING) === '2');
    expect(at20.length).toBeGreaterThan(0);
    expect(at50.length).toBeGreaterThan(at20.length);
    for (const k of at20) expect(at50).toContain(k);
  });

  it('reads the key the declaration names: under stickiness parameter the header is ignored', () => {
    control.apply('m', declared(50, { stickiness: 'parameter' }));
    const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
    const byParameter = keys.map((k) => control.versionFor('m', { parameter: k }, SERVING));
    expect(new Set(byParameter)).toEqual(new Set(['1', '2']));
    random = 0.99; // keyless: stable
    expect(keys.map((k) => control.versionFor('m', { header: k }, SERVING))).toEqual(keys.map(() => '1'));
  });

  it('falls back to the stable version when the canary does not serve', () => {
    control.apply('m', declared(100));
    expect(control.versionFor('m', undefined, new Set(['1']))).toBe('1');
  });

  it('rolls a canary back when its error rate over the window is worse, and keeps it so until the text changes', async () => {
    control.apply('m', declared(50, { rollback: { window_seconds: 10, min_requests: 10 } }));
    const stable = metrics.versionSeries('m', '1');
    const canary = metrics.versionSeries('m', '2');
    vi.advanceTimersByTime(500); // the window's first reading
    stable.success += 100;
    canary.success += 5;
    canary.failures.BACKEND += 5;
    vi.advanceTimersByTime(500);
    expect(control.canaryWeightOf('m')).toBe(0);
    expect((await metrics.canaryRollbacks.get()).values).toEqual([
      expect.objectContaining({ labels: { model: 'm', reason: 'error_rate' }, value: 1 }),
    ]);
    expect(await gauge(metrics, '2')).toBe(0);
    random = 0;
    expect(control.versionFor('m', undefined, SERVING)).toBe('1');
    control.apply('m', declared(50, { rollback: { window_seconds: 10, min_requests: 10 } }));
    expect(control.canaryWeightOf('m')).toBe(0);
    control.apply('m', declared(40, { rollback: { window_seconds: 10, min_requests: 10 } }));
    expect(control.canaryWeightOf('m')).toBe(40);
  });

  it('judges only what happened inside the window: old failures age out', () => {
    control.apply('m', declared(50, { rollback: { window_seconds: 2, min_requests: 10 } }));
    const canary = metrics.versionSeries('m', '2');
    canary.failures.BACKEND += 100; // before the first reading: not in any window
    vi.advanceTimersByTime(3000);
    canary.success += 20;
    vi.advanceTimersByTime(3000);
    expect(control.canaryWeightOf('m')).toBe(50);
  });
});
