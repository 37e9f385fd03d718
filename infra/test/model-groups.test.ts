import { describe, expect, it } from 'vitest';
import { IMAGE_URI, REQUIRED, memo, synth } from './synth.ts';
import { ALB_LIMITS, MODEL_ROUTING_HEADER, parseModelGroups, planRoutes } from '../lib/model-groups.ts';
import { parseModelFilter } from '../../packages/server/src/models/model-filter.ts';

const MIB = 1024 * 1024;
/** Two groups: text (the first, so the default) on the stack's settings, vision on its own capacity. */
const GROUPS = [
  { name: 'text', models: ['bert-base', 'gpt-*'] },
  {
    name: 'vision',
    models: ['resnet50', 'yolo-*', 'vit-b16'],
    instanceType: 'g5.xlarge',
    minCapacity: 2,
    maxCapacity: 6,
    modelMemoryLimitMiB: 8000,
    loadOnDemand: true,
  },
];
const twoGroups = memo(() => synth({ ...REQUIRED, imageUri: IMAGE_URI, modelGroups: JSON.stringify(GROUPS) }));
const t = () => twoGroups().template;

type Resource = { logicalId: string; props: Record<string, any> };
const resources = (type: string): Resource[] =>
  Object.entries(t().findResources(type)).map(([logicalId, r]) => ({ logicalId, props: r.Properties as Record<string, any> }));
/** The resource of a type under a group's construct (its logical id starts with the construct path's letters). */
const ofGroup = (type: string, group: string): Resource[] => resources(type).filter((r) => r.logicalId.startsWith(`ModelGroup${group}`));
const commandOf = (group: string): string[] => ofGroup('AWS::ECS::TaskDefinition', group)[0]!.props.ContainerDefinitions[0].Command;
const flag = (command: string[], name: string) => (command.includes(name) ? command[command.indexOf(name) + 1] : undefined);
const ref = (r: Resource) => ({ Ref: r.logicalId });

describe('model groups: a two-group stack', () => {
  it('runs each group as its own ECS service on its own capacity, in one cluster', () => {
    t().resourceCountIs('AWS::ECS::Cluster', 1);
    t().resourceCountIs('AWS::ECS::Service', 2);
    t().resourceCountIs('AWS::ECS::CapacityProvider', 2);
    expect(ofGroup('AWS::EC2::LaunchTemplate', 'text')[0]!.props.LaunchTemplateData.InstanceType).toBe('g4dn.xlarge');
    expect(ofGroup('AWS::EC2::LaunchTemplate', 'vision')[0]!.props.LaunchTemplateData.InstanceType).toBe('g5.xlarge');
    // vision: 2..6 tasks, one GPU each, twice the maximum for rolling deploys.
    expect(ofGroup('AWS::AutoScaling::AutoScalingGroup', 'vision')[0]!.props).toMatchObject({ MinSize: '2', MaxSize: '12' });
    expect(ofGroup('AWS::AutoScaling::AutoScalingGroup', 'text')[0]!.props).toMatchObject({ MinSize: '1', MaxSize: '8' });
    const [association] = resources('AWS::ECS::ClusterCapacityProviderAssociations');
    expect(association!.props.CapacityProviders).toHaveLength(2);
    // Each service places its tasks on its own capacity provider.
    for (const group of ['text', 'vision']) {
      const [service] = ofGroup('AWS::ECS::Service', group);
      const [provider] = ofGroup('AWS::ECS::CapacityProvider', group);
      expect(service!.props.CapacityProviderStrategy).toEqual([{ CapacityProvider: ref(provider!), Weight: 1 }]);
    }
  });

  it("keeps each group's tasks to its models (--model-filter) with its own many-models limits", () => {
    const text = commandOf('text');
    const vision = commandOf('vision');
    expect(flag(text, '--model-filter')).toBe('bert-base,gpt-*');
    expect(flag(vision, '--model-filter')).toBe('resnet50,yolo-*,vit-b16');
    expect(text).not.toContain('--load-on-demand');
    expect(vision).toContain('--load-on-demand');
    expect(flag(vision, '--model-memory-limit')).toBe(String(8000 * MIB));
    expect(flag(text, '--cloudwatch-service-name')).toBe('batchwise-dev-text');
    expect(flag(vision, '--cloudwatch-service-name')).toBe('batchwise-dev-vision');
    // What serve makes of the flag: the group's models, and no other.
    const filter = parseModelFilter([flag(vision, '--model-filter')!])!;
    expect(['resnet50', 'yolo-v8', 'vit-b16'].every((m) => filter.admits(m))).toBe(true);
    expect(['bert-base', 'resnet', 'vit-b16x'].some((m) => filter.admits(m))).toBe(false);
  });

  it("gives each group target groups on :8000 and :8001, the default group the listeners' default actions", () => {
    const targetGroups = resources('AWS::ElasticLoadBalancingV2::TargetGroup');
    expect(targetGroups).toHaveLength(4);
    for (const group of ['text', 'vision']) {
      const [service] = ofGroup('AWS::ECS::Service', group);
      const mine = ofGroup('AWS::ElasticLoadBalancingV2::TargetGroup', group);
      expect(mine.map((tg) => [tg.props.Port, tg.props.ProtocolVersion ?? 'HTTP1']).sort()).toEqual([
        [8000, 'HTTP1'],
        [8001, 'GRPC'],
      ]);
      expect(service!.props.LoadBalancers.map((lb: any) => lb.TargetGroupArn).sort((a: any, b: any) => a.Ref.localeCompare(b.Ref))).toEqual(
        mine.map(ref).sort((a, b) => a.Ref.localeCompare(b.Ref)),
      );
    }
    const textTargets = ofGroup('AWS::ElasticLoadBalancingV2::TargetGroup', 'text');
    for (const listener of resources('AWS::ElasticLoadBalancingV2::Listener')) {
      const tg = textTargets.find((target) => target.props.Port === listener.props.Port)!;
      expect(listener.props.DefaultActions).toEqual([{ Type: 'forward', TargetGroupArn: ref(tg) }]);
    }
  });

  it("routes the other group's models by path on :8000 and by the batchwise-model header on :8001", () => {
    const rules = resources('AWS::ElasticLoadBalancingV2::ListenerRule');
    const listenerOf = (port: number) => ref(resources('AWS::ElasticLoadBalancingV2::Listener').find((l) => l.props.Port === port)!);
    const visionTarget = (port: number) =>
      ref(ofGroup('AWS::ElasticLoadBalancingV2::TargetGroup', 'vision').find((tg) => tg.props.Port === port)!);
    expect(rules.map((r) => r.props)).toEqual(
      expect.arrayContaining([
        {
          ListenerArn: listenerOf(8000),
          Priority: 10,
          Conditions: [
            {
              Field: 'path-pattern',
              PathPatternConfig: {
                Values: ['/v2/models/resnet50', '/v2/models/resnet50/*', '/v2/models/yolo-*', '/v2/models/vit-b16', '/v2/models/vit-b16/*'],
              },
            },
          ],
          Actions: [{ Type: 'forward', TargetGroupArn: visionTarget(8000) }],
        },
        {
          ListenerArn: listenerOf(8001),
          Priority: 10,
          Conditions: [
            { Field: 'http-header', HttpHeaderConfig: { HttpHeaderName: MODEL_ROUTING_HEADER, Values: ['resnet50', 'yolo-*', 'vit-b16'] } },
          ],
          Actions: [{ Type: 'forward', TargetGroupArn: visionTarget(8001) }],
        },
      ]),
    );
    // The default group needs no rule: what matches none goes to it.
    expect(rules).toHaveLength(2);
  });

  it('scales each group on its own pending requests, within its own range', () => {
    const targets = resources('AWS::ApplicationAutoScaling::ScalableTarget');
    expect(
      targets.map((s) => [s.logicalId.startsWith('ModelGroupvision') ? 'vision' : 'text', s.props.MinCapacity, s.props.MaxCapacity]).sort(),
    ).toEqual([
      ['text', 1, 4],
      ['vision', 2, 6],
    ]);
    const policies = resources('AWS::ApplicationAutoScaling::ScalingPolicy');
    expect(
      policies
        .map((p) => p.props.TargetTrackingScalingPolicyConfiguration.CustomizedMetricSpecification)
        .map((m: any) => [m.MetricName, m.Dimensions[0].Value])
        .sort(),
    ).toEqual([
      ['PendingRequests', 'batchwise-dev-text'],
      ['PendingRequests', 'batchwise-dev-vision'],
    ]);
  });

  it("alarms per group on its own service, target groups and server metrics; the cluster's OOM kills and the ALB's 5xx once", () => {
    const alarms = resources('AWS::CloudWatch::Alarm');
    const text = JSON.stringify;
    const heartbeat = alarms.filter((a) => a.logicalId.includes('HeartbeatAlarm'));
    expect(heartbeat.map((a) => a.props.Dimensions[0].Value).sort()).toEqual(['batchwise-dev-text', 'batchwise-dev-vision']);
    expect(alarms.filter((a) => a.logicalId.includes('OomKillsAlarm'))).toHaveLength(1);
    expect(alarms.filter((a) => a.logicalId.includes('LoadBalancer5xxAlarm'))).toHaveLength(1);
    t().resourceCountIs('AWS::Events::Rule', 1);
    for (const group of ['text', 'vision']) {
      const mine = ofGroup('AWS::CloudWatch::Alarm', group);
      const names = mine.map((a) => a.logicalId.replace(/^ModelGroup\w+?Alarms/, '').replace(/[0-9A-F]{8}$/, ''));
      for (const alarm of [
        'HTTPTarget5xxAlarm',
        'GRPCTarget5xxAlarm',
        'HTTPHealthyHostsAlarm',
        'ContainerMemoryAlarm',
        'QueueRejectionsAlarm',
      ]) {
        expect(names, `${group} ${alarm}`).toContain(alarm);
      }
      // Its target groups, its service: nothing of the other group's.
      const targetGroups = ofGroup('AWS::ElasticLoadBalancingV2::TargetGroup', group).map((tg) => tg.logicalId);
      const target5xx = mine.find((a) => a.logicalId.includes('HTTPTarget5xxAlarm'))!;
      expect(targetGroups.some((id) => text(target5xx.props).includes(id))).toBe(true);
      const other = group === 'text' ? 'vision' : 'text';
      expect(text(mine.map((a) => a.props))).not.toContain(`batchwise-dev-${other}`);
    }
    // Evictions are alarmed where models are evicted: the group loading on demand.
    expect(ofGroup('AWS::CloudWatch::Alarm', 'vision').some((a) => a.logicalId.includes('EvictionThrashAlarm'))).toBe(true);
    expect(ofGroup('AWS::CloudWatch::Alarm', 'text').some((a) => a.logicalId.includes('EvictionThrashAlarm'))).toBe(false);
  });

  it('draws a dashboard per group and says which group is which in its outputs', () => {
    expect(
      resources('AWS::CloudWatch::Dashboard')
        .map((d) => d.props.DashboardName)
        .sort(),
    ).toEqual(['batchwise-dev-text', 'batchwise-dev-vision']);
    const outputs = t().findOutputs('*');
    expect(outputs['MetricsServiceNames']!.Value).toBe('batchwise-dev-text,batchwise-dev-vision');
    expect(JSON.stringify(outputs['ModelGroups']!.Value)).toContain('batchwise-dev-vision');
    expect(outputs['ServiceName']).toBeUndefined();
  });

  it('is clean under cdk-nag', () => {
    expect(twoGroups().violations).toEqual([]);
  });

  it('reads the groups from an environment file as a JSON list, and the default group marked as such', () => {
    const marked = synth({
      ...REQUIRED,
      imageUri: IMAGE_URI,
      httpListenerProtocol: 'HTTP',
      modelGroups: [
        { name: 'vision', models: ['yolo-*'] },
        { name: 'rest', models: ['*'], default: true },
      ],
    });
    const rules = Object.values(marked.template.findResources('AWS::ElasticLoadBalancingV2::ListenerRule')).map((r: any) => r.Properties);
    // The plain-HTTP listener's refusals keep priorities 1 and 2; the routes follow.
    expect(rules.map((r) => r.Priority).sort()).toEqual([1, 10, 10, 2]);
    const commands = Object.values(marked.template.findResources('AWS::ECS::TaskDefinition')).map(
      (d: any) => d.Properties.ContainerDefinitions[0].Command as string[],
    );
    // The default group of * serves every model no other group names: no filter.
    expect(commands.map((c) => flag(c, '--model-filter'))).toEqual(['yolo-*', undefined]);
  });
});

describe('model groups: what synth refuses', () => {
  const groups = (value: unknown) => () =>
    synth({ ...REQUIRED, imageUri: IMAGE_URI, modelGroups: typeof value === 'string' ? value : JSON.stringify(value) });

  it('says what is wrong with a group in one line naming it', () => {
    expect(groups('[{"name": "a"')).toThrow(/^Context 'modelGroups': not valid JSON/);
    expect(groups([])).toThrow("Context 'modelGroups': expected a non-empty list of groups");
    expect(groups([{ name: 'Vision', models: ['a'] }])).toThrow(
      `Context 'modelGroups': group 1: "name" must be a lowercase name of up to 20 characters, got "Vision".`,
    );
    expect(groups([{ name: 'a', models: ['x'], gpus: 2 }])).toThrow(
      "Context 'modelGroups': group 'a': unknown key 'gpus'. Known keys: name, models, default,",
    );
    expect(groups([{ name: 'a', models: ['x*y'] }])).toThrow(
      `group 'a': "models" must be a list of model names and prefixes ending in *, got ["x*y"].`,
    );
    expect(groups([{ name: 'a', models: ['x'], minCapacity: 3, maxCapacity: 2 }])).toThrow(
      "group 'a': minCapacity (3) must not exceed maxCapacity (2).",
    );
    expect(
      groups([
        { name: 'a', models: ['x'] },
        { name: 'a', models: ['y'] },
      ]),
    ).toThrow("two groups are named 'a'.");
    expect(
      groups([
        { name: 'a', models: ['x'], default: true },
        { name: 'b', models: ['y'], default: true },
      ]),
    ).toThrow("only one group may be the default, got 'a' and 'b'.");
    expect(
      groups([
        { name: 'a', models: ['x'] },
        { name: 'b', models: ['*'] },
      ]),
    ).toThrow(`group 'b': "models" may be "*" (every model no other group names) only in the default group, 'a'.`);
    expect(
      groups([
        { name: 'text', models: ['yolo-v8'] },
        { name: 'vision', models: ['yolo-*'] },
      ]),
    ).toThrow("'yolo-v8' of group 'text' and 'yolo-*' of group 'vision' can name the same model: each model belongs to one group.");
  });

  it('names the group when its settings do not fit its instance type', () => {
    expect(
      groups([
        { name: 'a', models: ['x'] },
        { name: 'big', models: ['y'], modelMemoryLimitMiB: 12000, loadOnDemand: true },
      ]),
    ).toThrow(/^modelGroups: group 'big': modelMemoryLimitMiB 12000 does not fit the task/);
  });

  it(`refuses routes past the ALB's limits: ${ALB_LIMITS.rulesPerLoadBalancer} rules, ${ALB_LIMITS.conditionValueChars} characters a value`, () => {
    // 2 path values per exact name and 5 a rule: 2 names a rule on :8000, 5 on :8001. 140 names take 98 rules, 143 take 101.
    const names = (n: number) => Array.from({ length: n }, (_, i) => `model-${i}`);
    expect(() =>
      planRoutes(
        parseModelGroups([
          { name: 'rest', models: ['*'] },
          { name: 'many', models: names(140) },
        ]),
        0,
      ),
    ).not.toThrow();
    expect(
      groups([
        { name: 'rest', models: ['*'] },
        { name: 'many', models: names(143) },
      ]),
    ).toThrow(
      /^modelGroups: the groups need 101 listener rules \(72 by path on :8000, 29 by header on :8001\), more than the 100 an Application Load Balancer allows .*infra\/docs\/model-groups\.md, 'Past the limits'\.$/,
    );
    // A quota AWS raised is read from albRuleQuota; without groups it has nothing to bound.
    const raised = () =>
      synth({
        ...REQUIRED,
        imageUri: IMAGE_URI,
        albRuleQuota: '150',
        modelGroups: JSON.stringify([
          { name: 'rest', models: ['*'] },
          { name: 'many', models: names(143) },
        ]),
      });
    expect(Object.keys(raised().template.findResources('AWS::ElasticLoadBalancingV2::ListenerRule'))).toHaveLength(101);
    expect(() => synth({ ...REQUIRED, imageUri: IMAGE_URI, albRuleQuota: '150' })).toThrow(
      "Context 'albRuleQuota': only applies with modelGroups",
    );
    expect(
      groups([
        { name: 'rest', models: ['*'] },
        { name: 'long', models: ['m'.repeat(120)] },
      ]),
    ).toThrow(
      `group 'long': model '${'m'.repeat(120)}' makes the condition value '/v2/models/${'m'.repeat(120)}/*' of 133 characters; an ALB takes at most 128.`,
    );
    // 51 groups of one prefix each: 100 rules fit, 102 target groups do not.
    const fiftyOne = Array.from({ length: 51 }, (_, i) => ({ name: `g${i}`, models: [`p${i}-*`] }));
    expect(() => planRoutes(parseModelGroups(fiftyOne), 0)).toThrow(
      '51 groups need 102 target groups (one on :8000 and one on :8001 each), more than the 100 an Application Load Balancer allows',
    );
  });

  it('packs prefixes five to a rule and keeps the plain-HTTP refusals in the count', () => {
    const prefixes = Array.from({ length: 12 }, (_, i) => `p${i}-*`);
    const plan = planRoutes(
      parseModelGroups([
        { name: 'rest', models: ['*'] },
        { name: 'p', models: prefixes },
      ]),
      2,
    );
    expect(plan.http.map((r) => r.values.length)).toEqual([5, 5, 2]);
    expect(plan.grpc.map((r) => r.priority)).toEqual([10, 11, 12]);
    // 49 rules on each listener and the two refusals are 100: one more model's rules are too many.
    const fits = Array.from({ length: 49 * 5 }, (_, i) => `q${i}-*`);
    expect(() =>
      planRoutes(
        parseModelGroups([
          { name: 'rest', models: ['*'] },
          { name: 'q', models: fits },
        ]),
        2,
      ),
    ).not.toThrow();
    expect(() =>
      planRoutes(
        parseModelGroups([
          { name: 'rest', models: ['*'] },
          { name: 'q', models: [...fits, 'one-more-*'] },
        ]),
        2,
      ),
    ).toThrow(/^the groups need 102 listener rules \(50 by path on :8000, 50 by header on :8001, 2 of the stack's own\)/);
  });
});
