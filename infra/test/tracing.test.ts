/**
 * Context `tracing=xray`: the ADOT collector beside the server, the server's trace flags, the
 * memory the collector takes from the task, the X-Ray permissions; and nothing of it by default.
 */
import { describe, expect, it } from 'vitest';
import { SERVE_FLAGS } from '../../packages/server/src/options/index.ts';
import { parseTraceConfigFlags } from '../../packages/server/src/trace/trace-config-flags.ts';
import { taskMemoryFor } from '../lib/instance-types.ts';
import { ADOT_COLLECTOR_IMAGE, COLLECTOR_MEMORY_MIB, XRAY_ACTIONS } from '../lib/tracing.ts';
import { IMAGE_URI, REQUIRED, buildApp, memo, only, synth } from './synth.ts';
import type { Synthesized } from './synth.ts';

const base = { ...REQUIRED, imageUri: IMAGE_URI };

type Container = Record<string, any>;
const containers = (s: Synthesized): Container[] => only(s.template, 'AWS::ECS::TaskDefinition').props.ContainerDefinitions;
const named = (s: Synthesized, name: string): Container | undefined => containers(s).find((c) => c.Name === name);
const server = (s: Synthesized): Container => named(s, 'server')!;
const collector = (s: Synthesized): Container => named(s, 'otel-collector')!;
const env = (c: Container, name: string): unknown => c.Environment?.find((e: { Name: string }) => e.Name === name)?.Value;
const flagValues = (command: unknown[], flag: string): unknown[] => command.flatMap((part, i) => (part === flag ? [command[i + 1]] : []));

/** Every IAM statement of the template that grants an X-Ray action, with the policy it is in. */
function xrayStatements(s: Synthesized): { policy: Record<string, any>; statement: Record<string, any> }[] {
  return Object.values(s.template.findResources('AWS::IAM::Policy')).flatMap((r) =>
    (r.Properties.PolicyDocument.Statement as Record<string, any>[])
      .filter((st) => [st.Action].flat().some((a: string) => a.startsWith('xray:')))
      .map((statement) => ({ policy: r.Properties, statement })),
  );
}

describe('tracing off (the default)', () => {
  const s = memo(() => synth(base));

  it('has no collector container, no trace flags and no X-Ray permission', () => {
    expect(containers(s()).map((c) => c.Name)).toEqual(['server']);
    expect(server(s()).Command).not.toContain('--trace-config');
    expect(server(s()).DependsOn).toBeUndefined();
    expect(xrayStatements(s())).toEqual([]);
    expect(JSON.stringify(s().template.toJSON())).not.toMatch(/aws-otel-collector|AOT_CONFIG_CONTENT|xray:/);
  });

  it('gives the server the whole task memory', () => {
    expect(server(s()).Memory).toBe(14336);
  });

  it('is what tracing=off gives, key for key', () => {
    expect(synth({ ...base, tracing: 'off' }).template.toJSON()).toEqual(s().template.toJSON());
  });
});

describe('tracing=xray', () => {
  const s = memo(() => synth({ ...base, tracing: 'xray' }));
  const config = () => JSON.parse(env(collector(s()), 'AOT_CONFIG_CONTENT') as string);

  it('runs the pinned ADOT collector as a non-essential sidecar that ECS restarts in place', () => {
    expect(containers(s()).map((c) => c.Name)).toEqual(['server', 'otel-collector']);
    expect(collector(s()).Image).toBe(ADOT_COLLECTOR_IMAGE);
    expect(ADOT_COLLECTOR_IMAGE).toMatch(/^public\.ecr\.aws\/aws-observability\/aws-otel-collector:v\d+\.\d+\.\d+$/);
    expect(collector(s()).Essential).toBe(false);
    expect(server(s()).Essential).toBe(true);
    expect(collector(s()).RestartPolicy).toMatchObject({ Enabled: true, RestartAttemptPeriod: 60 });
    expect(collector(s()).HealthCheck).toMatchObject({ Command: ['CMD', '/healthcheck'] });
  });

  it('starts the server once the collector has started', () => {
    expect(server(s()).DependsOn).toEqual([{ ContainerName: 'otel-collector', Condition: 'START' }]);
  });

  it('logs to the same log group as the server, under its own stream prefix', () => {
    const options = (c: Container) => c.LogConfiguration.Options;
    expect(collector(s()).LogConfiguration.LogDriver).toBe('awslogs');
    expect(options(collector(s()))['awslogs-group']).toEqual(options(server(s()))['awslogs-group']);
    expect(options(collector(s()))['awslogs-stream-prefix']).toBe('otel-collector');
  });

  it('configures OTLP/HTTP in on loopback and X-Ray out in the stack region, with a health check and a memory limiter', () => {
    expect(config().receivers).toEqual({ otlp: { protocols: { http: { endpoint: '127.0.0.1:4318' } } } });
    expect(config().exporters).toEqual({ awsxray: { region: 'us-east-1' } });
    expect(config().extensions).toEqual({ health_check: { endpoint: '127.0.0.1:13133' } });
    expect(config().service).toEqual({
      extensions: ['health_check'],
      pipelines: { traces: { receivers: ['otlp'], processors: ['memory_limiter', 'batch'], exporters: ['awsxray'] } },
    });
    expect(config().processors.memory_limiter.limit_mib).toBeLessThan(COLLECTOR_MEMORY_MIB);
    expect(env(collector(s()), 'AWS_REGION')).toEqual(env(server(s()), 'AWS_REGION'));
  });

  it('takes the region of a region-agnostic stack from the deploy', () => {
    const agnostic = synth({ ...base, tracing: 'xray' }, { region: null });
    const value = JSON.stringify(env(collector(agnostic), 'AOT_CONFIG_CONTENT'));
    expect(value).toContain('{"Ref":"AWS::Region"}');
    expect(agnostic.violations).toEqual([]);
  });

  it("passes the server Triton's OpenTelemetry trace flags: OTLP/HTTP to the sidecar, 1 in 1000, timestamps", () => {
    const command: unknown[] = server(s()).Command;
    expect(flagValues(command, '--trace-config')).toEqual([
      'mode=opentelemetry',
      'opentelemetry,url=http://127.0.0.1:4318/v1/traces',
      'rate=1000',
      'level=TIMESTAMPS',
    ]);
    expect(SERVE_FLAGS.map((d) => d.flag as string)).toContain('--trace-config');
    // What the server makes of them: its own parser, so a renamed key fails here, not in a deployment.
    const parsed = parseTraceConfigFlags(flagValues(command, '--trace-config') as string[]);
    expect(parsed.settings).toMatchObject({ trace_mode: 'opentelemetry', trace_rate: 1000, trace_level: ['TIMESTAMPS'] });
    expect(parsed.opentelemetry.url).toBe('http://127.0.0.1:4318/v1/traces');
  });

  it('takes the trace rate from traceRate', () => {
    const command: unknown[] = server(synth({ ...base, tracing: 'xray', traceRate: '50' })).Command;
    expect(flagValues(command, '--trace-config')).toContain('rate=50');
  });

  it("counts the collector's memory in the task's: the server's limits and --memory-limit shrink by it", () => {
    // g4dn.xlarge: 14336 MiB per task; the collector holds 256 of it.
    expect(collector(s()).Memory).toBe(COLLECTOR_MEMORY_MIB);
    expect(collector(s()).MemoryReservation).toBe(COLLECTOR_MEMORY_MIB);
    expect(server(s()).Memory).toBe(14336 - COLLECTOR_MEMORY_MIB);
    expect(server(s()).Memory + collector(s()).Memory).toBe(14336);
    const budget = taskMemoryFor('g4dn.xlarge', { sidecarMemoryMiB: COLLECTOR_MEMORY_MIB });
    expect(server(s()).MemoryReservation).toBe(budget.reservationMiB);
    expect(budget.reservationMiB).toBe(Math.floor(14080 * 0.85));
    const command: unknown[] = server(s()).Command;
    expect(command[command.indexOf('--memory-limit') + 1]).toBe(String(budget.serverBudgetBytes));
  });

  it('refuses a server memoryLimitMiB that leaves no room for the collector', () => {
    expect(() => buildApp({ ...base, tracing: 'xray', memoryLimitMiB: '14336' })).toThrow(
      /memoryLimitMiB 14336 does not fit g4dn.xlarge: at most 14080 MiB for the server .*less 256 MiB for the tracing collector/,
    );
  });

  it('grants the X-Ray actions on * to the task role only, in a policy of their own', () => {
    const found = xrayStatements(s());
    expect(found).toHaveLength(1);
    const [{ policy, statement }] = found as [(typeof found)[number]];
    expect(statement).toEqual({ Effect: 'Allow', Action: [...XRAY_ACTIONS].sort(), Resource: '*' });
    expect(policy.PolicyDocument.Statement).toHaveLength(1);
    const taskRole = only(s().template, 'AWS::ECS::TaskDefinition').props.TaskRoleArn['Fn::GetAtt'][0];
    expect(policy.Roles).toEqual([{ Ref: taskRole }]);
  });

  it('is cdk-nag clean', () => {
    expect(s().violations).toEqual([]);
  });
});

describe('tracing=xray with otelCollectorConfig', () => {
  const s = memo(() => synth({ ...base, tracing: 'xray', otelCollectorConfig: '/batchwise/otel-collector-jaeger' }));

  it('reads the whole collector configuration from the SSM parameter, as an ECS secret', () => {
    expect(env(collector(s()), 'AOT_CONFIG_CONTENT')).toBeUndefined();
    const secret = collector(s()).Secrets.find((x: { Name: string }) => x.Name === 'AOT_CONFIG_CONTENT');
    expect(JSON.stringify(secret.ValueFrom)).toContain(':parameter/batchwise/otel-collector-jaeger');
  });

  it('lets the execution role read that parameter and nothing else of SSM', () => {
    const statements = Object.values(s().template.findResources('AWS::IAM::Policy')).flatMap(
      (r) => r.Properties.PolicyDocument.Statement as Record<string, any>[],
    );
    const ssm = statements.filter((st) => [st.Action].flat().some((a: string) => a.startsWith('ssm:')));
    expect(ssm.length).toBeGreaterThan(0);
    for (const st of ssm) expect(JSON.stringify(st.Resource)).toContain(':parameter/batchwise/otel-collector-jaeger');
  });

  it('is cdk-nag clean', () => {
    expect(s().violations).toEqual([]);
  });
});

describe('tracing context validation', () => {
  const build = (context: Record<string, unknown>) => () => buildApp({ ...base, ...context });

  it('rejects an unknown tracing mode, naming the choices', () => {
    expect(build({ tracing: 'jaeger' })).toThrow(/Context 'tracing': expected one of off, xray, got 'jaeger'/);
  });

  it('rejects a trace rate below 1 or not an integer', () => {
    expect(build({ tracing: 'xray', traceRate: '0' })).toThrow(/Context 'traceRate': must be >= 1/);
    expect(build({ tracing: 'xray', traceRate: 'often' })).toThrow(/Context 'traceRate': expected an integer/);
  });

  it('rejects traceRate and otelCollectorConfig without the sidecar', () => {
    expect(build({ traceRate: '10' })).toThrow(/Context 'traceRate': only applies with tracing=xray/);
    expect(build({ tracing: 'off', otelCollectorConfig: 'otel' })).toThrow(/Context 'otelCollectorConfig': only applies with tracing=xray/);
  });

  it('rejects a malformed SSM parameter name', () => {
    expect(build({ tracing: 'xray', otelCollectorConfig: 'a/b' })).toThrow(
      /Context 'otelCollectorConfig': 'a\/b' is not an SSM parameter name/,
    );
    expect(build({ tracing: 'xray', otelCollectorConfig: 'arn:aws:ssm:x' })).toThrow(/Context 'otelCollectorConfig'/);
  });
});
