import { describe, expect, it } from 'vitest';
import { CERTIFICATE_ARN, IMAGE_URI, buildApp } from './synth.ts';
import { GPU_INSTANCE_TYPES, hostHeadroomMiB, taskMemoryFor } from '../lib/instance-types.ts';
import { EMF_METRICS } from '../../packages/server/src/metrics/emf-metrics.ts';
import { SERVER_METRICS } from '../lib/server-metrics.ts';

const base = { certificateArn: CERTIFICATE_ARN, imageUri: IMAGE_URI };
const build = (context: Record<string, unknown>) => () => buildApp({ ...base, ...context });

describe('context validation', () => {
  it('requires certificateArn and says which key and why', () => {
    expect(() => buildApp({ imageUri: IMAGE_URI })).toThrow(/Context 'certificateArn': required: .*HTTPS.*-c certificateArn=/);
  });

  it('rejects a malformed certificateArn', () => {
    expect(build({ certificateArn: 'my-cert' })).toThrow(/Context 'certificateArn': 'my-cert' is not an ACM certificate ARN/);
  });

  it('rejects an instance type outside the table unless the memory is given', () => {
    expect(build({ instanceType: 'p9.huge' })).toThrow(/Unknown instance type 'p9.huge'.*context 'memoryLimitMiB'/);
    expect(build({ instanceType: 'p9.huge', memoryLimitMiB: '20000' })).not.toThrow();
  });

  it('rejects a hard limit larger than the instance can give one task', () => {
    expect(build({ memoryLimitMiB: 16384 })).toThrow(/memoryLimitMiB 16384 does not fit g4dn.xlarge: at most 14336 MiB/);
  });

  it('rejects minCapacity > maxCapacity and a desiredCount outside them', () => {
    expect(build({ minCapacity: '5', maxCapacity: '2' })).toThrow(/Context 'minCapacity': \(5\) must not exceed maxCapacity \(2\)/);
    expect(build({ minCapacity: '1', maxCapacity: '2', desiredCount: '3' })).toThrow(/Context 'desiredCount'/);
  });

  it('rejects values of the wrong type or shape, naming the key', () => {
    expect(build({ desiredCount: 'two' })).toThrow(/Context 'desiredCount': expected an integer/);
    expect(build({ amiVariant: 'ubuntu' })).toThrow(/Context 'amiVariant': expected one of al2023, al2/);
    expect(build({ amiId: 'latest' })).toThrow(/Context 'amiId'/);
    expect(build({ httpListenerProtocol: 'TCP' })).toThrow(/Context 'httpListenerProtocol'/);
    expect(build({ githubRepo: 'batchwise' })).toThrow(/Context 'githubRepo'/);
    expect(build({ alarmEmail: 'nobody' })).toThrow(/Context 'alarmEmail'/);
    expect(build({ modelPrefix: '/models/' })).toThrow(/modelPrefix '\/models\/' is not a valid key prefix/);
  });
});

describe('instance type table', () => {
  it('leaves host headroom on every type and keeps the server budget below the hard limit', () => {
    for (const [type, spec] of Object.entries(GPU_INSTANCE_TYPES)) {
      const m = taskMemoryFor(type);
      expect(m.hardLimitMiB * spec.gpuCount + hostHeadroomMiB(spec.memoryMiB)).toBeLessThanOrEqual(spec.memoryMiB);
      expect(m.serverBudgetBytes).toBeLessThan(m.hardLimitMiB * 1024 * 1024);
      expect(m.reservationMiB).toBeLessThan(m.hardLimitMiB);
    }
  });

  it('covers the g4dn, g5 and g6 sizes', () => {
    for (const size of ['xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '16xlarge']) {
      for (const family of ['g4dn', 'g5', 'g6']) expect(GPU_INSTANCE_TYPES[`${family}.${size}`]).toBeDefined();
    }
  });
});

describe('server metrics contract', () => {
  it('reads the names and units the server writes, each with a statistic', () => {
    expect(Object.keys(SERVER_METRICS)).toEqual(Object.keys(EMF_METRICS));
    for (const [key, spec] of Object.entries(SERVER_METRICS)) {
      const emf = EMF_METRICS[key as keyof typeof EMF_METRICS];
      expect(spec).toMatchObject({ name: emf.name, unit: emf.unit });
      expect(['Sum', 'Average', 'Maximum', 'p99']).toContain(spec.statistic);
    }
    expect(SERVER_METRICS.requestLatency.statistic).toBe('p99');
  });
});
