import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Match } from 'aws-cdk-lib/assertions';
import { CERTIFICATE_ARN, IMAGE_URI, INGRESS_CIDR, REQUIRED, memo, only, synth } from './synth.ts';
import { SEQUENCE_COOKIE, SERVER_METRICS } from '../lib/server-metrics.ts';

const GITHUB_REPO = 'acme/batchwise';
const defaults = memo(() => synth({ ...REQUIRED, imageUri: IMAGE_URI, githubRepo: GITHUB_REPO, alarmEmail: 'ops@example.com' }));
const t = () => defaults().template;
const container = () => only(t(), 'AWS::ECS::TaskDefinition').props.ContainerDefinitions[0];

describe('GPU capacity', () => {
  it('resolves the ECS-Optimized AL2023 GPU AMI from its SSM public parameter', () => {
    const params = t().findParameters('*', {
      Type: 'AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>',
      Default: '/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id',
    });
    expect(Object.keys(params)).toHaveLength(1);
    const lt = only(t(), 'AWS::EC2::LaunchTemplate').props.LaunchTemplateData;
    expect(lt.ImageId).toEqual({ Ref: Object.keys(params)[0] });
    expect(lt.InstanceType).toBe('g4dn.xlarge');
  });

  it('requires IMDSv2 and an encrypted gp3 root volume', () => {
    const lt = only(t(), 'AWS::EC2::LaunchTemplate').props.LaunchTemplateData;
    expect(lt.MetadataOptions).toEqual({ HttpTokens: 'required', HttpPutResponseHopLimit: 1 });
    expect(lt.BlockDeviceMappings).toEqual([
      { DeviceName: '/dev/xvda', Ebs: { Encrypted: true, VolumeType: 'gp3', VolumeSize: 100, DeleteOnTermination: true } },
    ]);
    expect(JSON.stringify(lt.UserData)).toContain('ECS_AWSVPC_BLOCK_IMDS=true');
  });

  it('uses a launch template (not a launch configuration) in private subnets', () => {
    t().resourceCountIs('AWS::AutoScaling::LaunchConfiguration', 0);
    const asg = only(t(), 'AWS::AutoScaling::AutoScalingGroup').props;
    expect(asg.LaunchTemplate).toBeDefined();
    expect(asg.MinSize).toBe('1');
    expect(asg.MaxSize).toBe('8'); // maxCapacity 4, twice for rolling deploys, 1 GPU each
    expect(JSON.stringify(asg.VPCZoneIdentifier)).toContain('private');
  });

  it('enables Container Insights and a managed-scaling capacity provider', () => {
    t().hasResourceProperties('AWS::ECS::Cluster', {
      ClusterSettings: [{ Name: 'containerInsights', Value: 'enabled' }],
    });
    t().hasResourceProperties('AWS::ECS::CapacityProvider', {
      AutoScalingGroupProvider: Match.objectLike({
        ManagedScaling: Match.objectLike({ Status: 'ENABLED', TargetCapacity: 100 }),
        ManagedDraining: 'ENABLED',
      }),
    });
  });

  it('protects instances that run tasks from scale-in: managed termination protection, new instances protected', () => {
    t().hasResourceProperties('AWS::ECS::CapacityProvider', {
      AutoScalingGroupProvider: Match.objectLike({ ManagedTerminationProtection: 'ENABLED' }),
    });
    expect(only(t(), 'AWS::AutoScaling::AutoScalingGroup').props.NewInstancesProtectedFromScaleIn).toBe(true);
  });

  it('lets operators open an SSM session on a GPU host (no SSH, no inbound port)', () => {
    const role = Object.values(t().findResources('AWS::IAM::Role')).find((r) =>
      JSON.stringify(r.Properties.AssumeRolePolicyDocument).includes('ec2.amazonaws.com'),
    )!;
    expect(JSON.stringify(role.Properties.ManagedPolicyArns)).toContain(':iam::aws:policy/AmazonSSMManagedInstanceCore');
    const lt = only(t(), 'AWS::EC2::LaunchTemplate').props.LaunchTemplateData;
    expect(JSON.stringify(lt.UserData)).toContain('amazon-ssm-agent');
    const sg = Object.values(t().findResources('AWS::EC2::SecurityGroup')).find((r) =>
      String(r.Properties.GroupDescription).startsWith('Batchwise GPU container instances'),
    )!;
    expect(sg.Properties.SecurityGroupIngress).toBeUndefined();
  });

  it('spans two AZs with an S3 gateway endpoint', () => {
    t().resourceCountIs('AWS::EC2::Subnet', 4);
    t().hasResourceProperties('AWS::EC2::VPCEndpoint', {
      VpcEndpointType: 'Gateway',
      ServiceName: Match.objectLike({ 'Fn::Join': Match.arrayWith([Match.arrayWith(['.s3'])]) }),
    });
  });
});

describe('task definition', () => {
  it('asks for one GPU', () => {
    expect(container().ResourceRequirements).toEqual([{ Type: 'GPU', Value: '1' }]);
  });

  it('sizes memory for g4dn.xlarge with host headroom and a server budget below the hard limit', () => {
    // 16384 MiB - 2048 MiB headroom; reservation and budget 85% of that.
    expect(container().Memory).toBe(14336);
    expect(container().MemoryReservation).toBe(12185);
    const command: string[] = container().Command;
    expect(command[command.indexOf('--memory-limit') + 1]).toBe(String(12185 * 1024 * 1024));
    expect(Number(command[command.indexOf('--memory-limit') + 1])).toBeLessThan(14336 * 1024 * 1024);
  });

  it('runs the serve command against the S3 repository with poll mode and CloudWatch metrics', () => {
    const command = container().Command;
    expect(command.slice(0, 1)).toEqual(['serve']);
    expect(command).toEqual(
      expect.arrayContaining(['--model-control-mode', 'poll', '--repository-poll-secs', '30', '--cloudwatch-metrics']),
    );
    // A model that loads slowly or fails must not make every task unready at once.
    expect(command[command.indexOf('--strict-readiness') + 1]).toBe('false');
    expect(command[command.indexOf('--cloudwatch-service-name') + 1]).toBe('batchwise-dev');
    expect(command[command.indexOf('--model-repository') + 1]).toEqual({
      'Fn::Join': ['', ['s3://', { Ref: expect.stringMatching(/^ModelStoreBucket/) }, '/models']],
    });
  });

  it('injects the model-repository key from Secrets Manager, not as plain text', () => {
    const secret = only(t(), 'AWS::SecretsManager::Secret').logicalId;
    expect(container().Secrets).toEqual([{ Name: 'BATCHWISE_MODEL_REPOSITORY_KEY', ValueFrom: { Ref: secret } }]);
    expect(container().Environment.map((e: { Name: string }) => e.Name)).toEqual(['AWS_REGION']);
  });

  it('exposes 8000, 8001, 8002, runs as non-root, drains for 120 s, health-checks liveness with node', () => {
    expect(container().PortMappings.map((p: { ContainerPort: number }) => p.ContainerPort)).toEqual([8000, 8001, 8002]);
    expect(container().User).toBe('10001:10001');
    expect(container().StopTimeout).toBe(120);
    expect(container().HealthCheck.Command.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
    expect(container().HealthCheck.Command[3]).toContain('/v2/health/live');
    expect(container().LogConfiguration.LogDriver).toBe('awslogs');
    expect(only(t(), 'AWS::ECS::TaskDefinition').props.NetworkMode).toBe('awsvpc');
  });

  it("runs an init process as PID 1, so the server's forced exit is not dropped", () => {
    expect(container().LinuxParameters).toMatchObject({ InitProcessEnabled: true });
  });
});

describe('service', () => {
  it('rolls back failed deployments and keeps capacity while deploying', () => {
    const svc = only(t(), 'AWS::ECS::Service').props;
    expect(svc.DeploymentConfiguration).toEqual({
      DeploymentCircuitBreaker: { Enable: true, Rollback: true },
      MinimumHealthyPercent: 100,
      MaximumPercent: 200,
    });
    expect(svc.HealthCheckGracePeriodSeconds).toBe(600);
    expect(svc.NetworkConfiguration.AwsvpcConfiguration.AssignPublicIp).toBe('DISABLED');
  });

  it('carries no desired count, which CloudFormation would reset on every deploy: autoscaling owns it', () => {
    const svc = only(t(), 'AWS::ECS::Service').props;
    expect(svc).not.toHaveProperty('DesiredCount');
    t().hasResourceProperties('AWS::ApplicationAutoScaling::ScalableTarget', {
      MinCapacity: 1,
      ScalableDimension: 'ecs:service:DesiredCount',
    });
  });

  it('leaves ECS Exec off unless asked for', () => {
    expect(only(t(), 'AWS::ECS::Service').props.EnableExecuteCommand).toBe(false);
  });

  it("is created after, and deleted before, the cluster's capacity provider association", () => {
    const association = only(t(), 'AWS::ECS::ClusterCapacityProviderAssociations').logicalId;
    const service = Object.values(t().findResources('AWS::ECS::Service'))[0]!;
    expect(service.DependsOn).toContain(association);
  });

  it('scales on the PendingRequests EMF metric per task, not on CPU', () => {
    const policy = only(t(), 'AWS::ApplicationAutoScaling::ScalingPolicy').props;
    expect(policy.TargetTrackingScalingPolicyConfiguration).toMatchObject({
      TargetValue: 16,
      CustomizedMetricSpecification: {
        Namespace: 'Batchwise',
        MetricName: 'PendingRequests',
        Dimensions: [{ Name: 'ServiceName', Value: 'batchwise-dev' }],
        Statistic: 'Average',
      },
    });
    t().hasResourceProperties('AWS::ApplicationAutoScaling::ScalableTarget', { MinCapacity: 1, MaxCapacity: 4 });
  });
});

describe('load balancer', () => {
  it('serves both :8000 and :8001 over HTTPS with the certificate by default', () => {
    for (const port of [8000, 8001]) {
      t().hasResourceProperties('AWS::ElasticLoadBalancingV2::Listener', {
        Port: port,
        Protocol: 'HTTPS',
        Certificates: [{ CertificateArn: CERTIFICATE_ARN }],
      });
    }
    t().resourceCountIs('AWS::ElasticLoadBalancingV2::ListenerRule', 0);
    t().hasResourceProperties('AWS::ElasticLoadBalancingV2::LoadBalancer', { Scheme: 'internet-facing' });
    t().hasOutput('HttpEndpoint', { Value: { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp('^https://')])] } });
  });

  it('admits only the configured clients, and attaches a WAF web ACL with a rate-based rule per client IP', () => {
    const alb = Object.values(t().findResources('AWS::EC2::SecurityGroup')).find((r) =>
      String(r.Properties.GroupDescription).startsWith('Batchwise ALB'),
    )!;
    expect(alb.Properties.SecurityGroupIngress.map((r: any) => [r.CidrIp, r.FromPort])).toEqual([
      [INGRESS_CIDR, 8000],
      [INGRESS_CIDR, 8001],
    ]);
    const acl = only(t(), 'AWS::WAFv2::WebACL');
    expect(acl.props).toMatchObject({ Scope: 'REGIONAL', DefaultAction: { Allow: {} } });
    expect(acl.props.Rules).toEqual([
      expect.objectContaining({
        Action: { Block: {} },
        Statement: { RateBasedStatement: { Limit: 20000, AggregateKeyType: 'IP', EvaluationWindowSec: 300 } },
      }),
    ]);
    const alb2 = only(t(), 'AWS::ElasticLoadBalancingV2::LoadBalancer').logicalId;
    t().hasResourceProperties('AWS::WAFv2::WebACLAssociation', {
      ResourceArn: { Ref: alb2 },
      WebACLArn: { 'Fn::GetAtt': [acl.logicalId, 'Arn'] },
    });
  });

  it("checks at deploy time, before creating anything, that the certificate is of the stack's region", () => {
    const rules = t().toJSON().Rules;
    expect(Object.values(rules)).toContainEqual({
      Assertions: [
        { Assert: { 'Fn::Equals': [{ Ref: 'AWS::Region' }, 'us-east-1'] }, AssertDescription: expect.stringContaining('us-east-1') },
      ],
    });
  });

  it('checks readiness on the HTTP target group and gRPC health with code 0 on the GRPC one', () => {
    t().hasResourceProperties('AWS::ElasticLoadBalancingV2::TargetGroup', {
      Port: 8000,
      Protocol: 'HTTP',
      TargetType: 'ip',
      HealthCheckPath: '/v2/health/ready',
      Matcher: { HttpCode: '200' },
    });
    t().hasResourceProperties('AWS::ElasticLoadBalancingV2::TargetGroup', {
      Port: 8001,
      Protocol: 'HTTP',
      ProtocolVersion: 'GRPC',
      TargetType: 'ip',
      HealthCheckPath: '/grpc.health.v1.Health/Check',
      Matcher: { GrpcCode: '0' },
    });
  });

  it("keeps a sequence's HTTP requests on one task: application-cookie stickiness on the cookie the server sets, :8000 only", () => {
    t().hasResourceProperties('AWS::ElasticLoadBalancingV2::TargetGroup', {
      Port: 8000,
      TargetGroupAttributes: Match.arrayWith([
        { Key: 'stickiness.enabled', Value: 'true' },
        { Key: 'stickiness.type', Value: 'app_cookie' },
        { Key: 'stickiness.app_cookie.cookie_name', Value: SEQUENCE_COOKIE },
        { Key: 'stickiness.app_cookie.duration_seconds', Value: '3600' },
      ]),
    });
    const grpc = Object.values(t().findResources('AWS::ElasticLoadBalancingV2::TargetGroup')).find((r) => r.Properties.Port === 8001)!;
    expect(grpc.Properties.TargetGroupAttributes).toContainEqual({ Key: 'stickiness.enabled', Value: 'false' });
  });

  it('never exposes :8002; tasks accept only the ALB', () => {
    const ingress = Object.values(t().findResources('AWS::EC2::SecurityGroupIngress')).map((r) => r.Properties);
    expect(ingress.map((i) => i.FromPort).sort()).toEqual([8000, 8001]);
    for (const rule of ingress) expect(rule.SourceSecurityGroupId).toBeDefined();
    const inline = Object.values(t().findResources('AWS::EC2::SecurityGroup')).flatMap((r) => r.Properties.SecurityGroupIngress ?? []);
    expect(inline.every((r: { FromPort: number }) => r.FromPort === 8000 || r.FromPort === 8001)).toBe(true);
    expect(inline).toHaveLength(2); // the ALB's listener ports
  });

  it('outputs the ALB DNS name', () => {
    t().hasOutput('LoadBalancerDnsName', {});
    t().hasOutput('HttpEndpoint', {});
  });
});

describe('model store and IAM', () => {
  const statements = (roleMatch: RegExp): any[] =>
    Object.entries(t().findResources('AWS::IAM::Policy'))
      .filter(([, r]) => r.Properties.Roles.some((role: { Ref: string }) => roleMatch.test(role.Ref)))
      .flatMap(([, r]) => r.Properties.PolicyDocument.Statement);

  it('creates an encrypted, private, TLS-only, versioned bucket with access logs', () => {
    const buckets = Object.values(t().findResources('AWS::S3::Bucket')).map((r) => r.Properties);
    const model = buckets.find((b) => b.VersioningConfiguration)!;
    expect(model.VersioningConfiguration).toEqual({ Status: 'Enabled' });
    expect(model.BucketEncryption.ServerSideEncryptionConfiguration[0].ServerSideEncryptionByDefault.SSEAlgorithm).toBe('AES256');
    expect(model.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
    expect(model.LoggingConfiguration.LogFilePrefix).toBe('model-bucket/');
    // Versioning keeps overwritten model files; they expire after 30 days (the newest 3 stay).
    expect(model.LifecycleConfiguration.Rules).toEqual([
      expect.objectContaining({
        Status: 'Enabled',
        NoncurrentVersionExpiration: { NoncurrentDays: 30, NewerNoncurrentVersions: 3 },
        ExpiredObjectDeleteMarker: true,
        AbortIncompleteMultipartUpload: { DaysAfterInitiation: 7 },
      }),
    ]);
    t().hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
      },
    });
  });

  it('gives the task role read-only access to the repository prefix', () => {
    const s = statements(/TaskRole/);
    expect(s).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          Action: 's3:GetObject',
          Resource: { 'Fn::Join': ['', [expect.objectContaining({ 'Fn::GetAtt': expect.arrayContaining(['Arn']) }), '/models/*']] },
        }),
        expect.objectContaining({
          Action: 's3:ListBucket',
          Condition: { StringLike: { 's3:prefix': ['models', 'models/*'] } },
        }),
      ]),
    );
    const actions = s.flatMap((st) => [st.Action].flat());
    expect(actions.filter((a: string) => a.startsWith('s3:')).sort()).toEqual(['s3:GetObject', 's3:ListBucket']);
  });

  it('lets the CI role write only the repository prefix, read the key and assume the bootstrap roles', () => {
    const s = statements(/CiAccessRole/);
    const puts = s.filter((st) => [st.Action].flat().includes('s3:PutObject'));
    expect(puts).toHaveLength(1);
    expect(puts[0].Resource['Fn::Join'][1][1]).toBe('/models/*');
    const s3Actions = s.flatMap((st) => [st.Action].flat()).filter((a: string) => a.startsWith('s3:'));
    expect(s3Actions.sort()).toEqual(['s3:AbortMultipartUpload', 's3:DeleteObject', 's3:GetObject', 's3:ListBucket', 's3:PutObject']);
    // Canary releases: delete only the canary.json declarations, and read metrics.
    const deletes = s.filter((st) => [st.Action].flat().includes('s3:DeleteObject'));
    expect(deletes).toHaveLength(1);
    expect(deletes[0].Resource['Fn::Join'][1][1]).toBe('/models/*/canary.json');
    expect(s.some((st) => [st.Action].flat().includes('cloudwatch:GetMetricData'))).toBe(true);
    const assume = s.find((st) => [st.Action].flat().includes('sts:AssumeRole'));
    expect(JSON.stringify(assume.Resource)).toContain('cdk-hnb659fds-deploy-role-');
    expect(JSON.stringify(assume.Resource)).toContain('cdk-hnb659fds-image-publishing-role-');
    expect(s.some((st) => [st.Action].flat().includes('secretsmanager:GetSecretValue'))).toBe(true);
  });

  it('keeps CI credentials valid for the whole deploy job, which passes no settings but envName', () => {
    const workflow = readFileSync(new URL('../../.github/workflows/deploy.yml', import.meta.url), 'utf8');
    const jobSeconds = 60 * Number(/timeout-minutes: (\d+)/.exec(workflow)![1]);
    const sessionSeconds = Number(/role-duration-seconds: (\d+)/.exec(workflow)![1]);
    const role = Object.values(t().findResources('AWS::IAM::Role')).find((r) =>
      JSON.stringify(r.Properties.AssumeRolePolicyDocument).includes('token.actions.githubusercontent.com'),
    )!;
    expect(sessionSeconds).toBeGreaterThanOrEqual(jobSeconds);
    expect(sessionSeconds).toBeLessThanOrEqual(role.Properties.MaxSessionDuration);
    // Settings come from infra/environments/<envName>.json, never from the workflow.
    expect(workflow.match(/-c "?[A-Za-z]+=/g)).toEqual(['-c "envName=']);
  });

  it('trusts only GitHub OIDC tokens of the repository', () => {
    const role = Object.values(t().findResources('AWS::IAM::Role')).find((r) =>
      JSON.stringify(r.Properties.AssumeRolePolicyDocument).includes('token.actions.githubusercontent.com'),
    )!;
    const statement = role.Properties.AssumeRolePolicyDocument.Statement[0];
    expect(statement.Action).toBe('sts:AssumeRoleWithWebIdentity');
    // Only jobs in the GitHub environment (whose deployment branch rule admits the protected
    // branch only), compared exactly: no branch-only subject, no wildcard.
    expect(statement.Condition).toEqual({
      StringEquals: {
        'token.actions.githubusercontent.com:aud': 'sts.amazonaws.com',
        'token.actions.githubusercontent.com:sub': `repo:${GITHUB_REPO}:environment:dev`,
      },
    });
    t().resourceCountIs('AWS::IAM::OIDCProvider', 1);
  });
});

describe('alarms', () => {
  const alarms = () => Object.values(t().findResources('AWS::CloudWatch::Alarm')).map((r) => r.Properties);
  const byMetric = (name: string) => alarms().filter((a) => a.MetricName === name);

  it('routes every alarm to the SNS topic with an e-mail subscription', () => {
    const topic = only(t(), 'AWS::SNS::Topic').logicalId;
    expect(alarms()).toHaveLength(18);
    for (const alarm of alarms()) expect(alarm.AlarmActions).toEqual([{ Ref: topic }]);
    t().hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
  });

  it('counts OOM kills from ECS task events through a log group and a metric filter, without Lambda', () => {
    const rule = only(t(), 'AWS::Events::Rule').props;
    expect(rule.EventPattern).toEqual({
      source: ['aws.ecs'],
      'detail-type': ['ECS Task State Change'],
      detail: {
        clusterArn: [{ 'Fn::GetAtt': [expect.stringMatching(/Cluster/), 'Arn'] }],
        lastStatus: ['STOPPED'],
        $or: [{ containers: { reason: [{ prefix: 'OutOfMemoryError' }] } }, { containers: { exitCode: [137] } }],
      },
    });
    const logGroupId = Object.keys(
      t().findResources('AWS::Logs::LogGroup', { Properties: { LogGroupName: '/aws/events/batchwise-dev-oom-kills' } }),
    )[0]!;
    expect(JSON.stringify(rule.Targets[0].Arn)).toContain(logGroupId);
    t().hasResourceProperties('AWS::Logs::MetricFilter', {
      LogGroupName: { Ref: logGroupId },
      MetricTransformations: [Match.objectLike({ MetricNamespace: 'Batchwise/Infra', MetricName: 'OomKills', MetricValue: '1' })],
    });
    const policy = JSON.stringify(only(t(), 'AWS::Logs::ResourcePolicy').props.PolicyDocument);
    expect(policy).toContain('events.amazonaws.com');
    expect(policy).toContain(logGroupId);
    expect(byMetric('OomKills')).toEqual([expect.objectContaining({ Namespace: 'Batchwise/Infra', Threshold: 1, Statistic: 'Sum' })]);
    t().resourceCountIs('AWS::Lambda::Function', 0);
  });

  it('alarms on container memory near the hard limit (Container Insights)', () => {
    expect(byMetric('MemoryUtilized')).toEqual([
      expect.objectContaining({ Namespace: 'ECS/ContainerInsights', Statistic: 'Maximum', Threshold: Math.floor(14336 * 0.9) }),
    ]);
  });

  it('alarms on p99 target response time, target 5xx and unhealthy hosts for both target groups', () => {
    const p99 = byMetric('TargetResponseTime');
    expect(p99).toHaveLength(2);
    for (const a of p99) expect(a).toMatchObject({ ExtendedStatistic: 'p99', Threshold: 0.5, Namespace: 'AWS/ApplicationELB' });
    expect(new Set(p99.map((a) => JSON.stringify(a.Dimensions.find((d: { Name: string }) => d.Name === 'TargetGroup').Value))).size).toBe(
      2,
    );
    const math = (name: string) => alarms().filter((a) => a.Metrics?.some((m: any) => m.MetricStat?.Metric.MetricName === name));
    expect(math('HTTPCode_Target_5XX_Count')).toHaveLength(2);
    for (const a of math('HTTPCode_Target_5XX_Count')) {
      expect(
        a.Metrics.map((m: any) => m.MetricStat?.Metric.MetricName)
          .filter(Boolean)
          .sort(),
      ).toEqual(['HTTPCode_Target_5XX_Count', 'RequestCount']);
    }
  });

  it('alarms on missing healthy targets only beyond the health check grace period, not on every deploy', () => {
    expect(byMetric('UnHealthyHostCount')).toEqual([]);
    const health = alarms().filter((a) => a.Metrics?.some((m: any) => m.MetricStat?.Metric.MetricName === 'HealthyHostCount'));
    expect(health).toHaveLength(2);
    for (const a of health) {
      const stat = (name: string) => a.Metrics.find((m: any) => m.MetricStat?.Metric.MetricName === name).MetricStat;
      expect(stat('DesiredTaskCount')).toMatchObject({ Stat: 'Minimum', Period: 60, Metric: { Namespace: 'ECS/ContainerInsights' } });
      expect(stat('HealthyHostCount')).toMatchObject({ Stat: 'Maximum', Period: 60 });
      expect(a.Metrics.find((m: any) => m.Expression).Expression).toBe('desired - FILL(healthy, 0)');
      // Grace 600 s = 10 minutes, plus 5: every minute of 15 must miss a target.
      expect(a).toMatchObject({ Threshold: 1, EvaluationPeriods: 15, ComparisonOperator: 'GreaterThanOrEqualToThreshold' });
      expect(a.DatapointsToAlarm).toBeUndefined();
    }
  });

  it('alarms on the server EMF metrics: queue rejections, p99 latency, backend failures, GPU memory', () => {
    const dims = [{ Name: 'ServiceName', Value: 'batchwise-dev' }];
    const metricStat = (name: string, stat: string) => ({
      Metric: { Namespace: 'Batchwise', MetricName: name, Dimensions: dims },
      Period: 60,
      Stat: stat,
    });
    expect(byMetric(SERVER_METRICS.queueRejections.name)).toEqual([
      expect.objectContaining({ Namespace: 'Batchwise', Dimensions: dims, Statistic: 'Sum', Threshold: 1 }),
    ]);
    // CloudWatch's p99 of the latency distributions of all tasks, not a maximum of per-task values.
    const latency = alarms().filter((a) => a.Metrics?.some((m: any) => m.MetricStat?.Metric.MetricName === 'RequestLatency'));
    expect(latency).toHaveLength(1);
    expect(latency[0]).toMatchObject({ Threshold: 500, ComparisonOperator: 'GreaterThanThreshold' });
    expect(latency[0].Metrics).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ Expression: 'IF(requests >= 100, latency, 0)', ReturnData: true }),
        expect.objectContaining({ Id: 'latency', MetricStat: metricStat('RequestLatency', 'p99'), ReturnData: false }),
        expect.objectContaining({ Id: 'requests', MetricStat: metricStat('RequestCount', 'Sum'), ReturnData: false }),
      ]),
    );
    // gRPC failures reach the ALB as HTTP 200: the server's own count covers both protocols.
    const errors = alarms().filter((a) => a.Metrics?.some((m: any) => m.MetricStat?.Metric.MetricName === 'BackendFailures'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ Threshold: 5, ComparisonOperator: 'GreaterThanThreshold' });
    expect(errors[0].Metrics).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ Id: 'part', MetricStat: metricStat('BackendFailures', 'Sum') }),
        expect.objectContaining({ Id: 'whole', MetricStat: metricStat('RequestCount', 'Sum') }),
      ]),
    );
    expect(byMetric(SERVER_METRICS.gpuMemoryUsedBytes.name)).toEqual([
      expect.objectContaining({ Namespace: 'Batchwise', Dimensions: dims, Threshold: Math.floor(16 * 1024 ** 3 * 0.9) }),
    ]);
  });

  it("alarms on the load balancer's own 5xx and on a target group without a healthy target", () => {
    const elb = alarms().filter((a) => a.Metrics?.some((m: any) => m.MetricStat?.Metric.MetricName === 'HTTPCode_ELB_5XX_Count'));
    expect(elb).toHaveLength(1);
    const stat = (name: string) => elb[0].Metrics.find((m: any) => m.MetricStat?.Metric.MetricName === name).MetricStat;
    expect(stat('HTTPCode_ELB_5XX_Count')).toMatchObject({
      Stat: 'Sum',
      Metric: { Namespace: 'AWS/ApplicationELB', Dimensions: [{ Name: 'LoadBalancer', Value: expect.anything() }] },
    });
    expect(stat('RequestCount').Metric.Dimensions.map((d: any) => d.Name)).toEqual(['LoadBalancer']);
    expect(elb[0]).toMatchObject({ Threshold: 5, ComparisonOperator: 'GreaterThanThreshold', EvaluationPeriods: 3, DatapointsToAlarm: 2 });

    const none = byMetric('HealthyHostCount');
    expect(none).toHaveLength(2);
    for (const a of none) {
      expect(a).toMatchObject({
        Statistic: 'Maximum',
        Threshold: 1,
        ComparisonOperator: 'LessThanThreshold',
        TreatMissingData: 'breaching',
      });
    }
  });

  it('has a heartbeat on the line every task writes, which treats silence as an outage', () => {
    expect(byMetric('RequestCount').filter((a) => a.Namespace === 'Batchwise')).toEqual([
      expect.objectContaining({
        Statistic: 'SampleCount',
        Dimensions: [{ Name: 'ServiceName', Value: 'batchwise-dev' }],
        Threshold: 1,
        ComparisonOperator: 'LessThanThreshold',
        TreatMissingData: 'breaching',
      }),
    ]);
  });

  it('alarms on models that failed to load, which readiness no longer reports', () => {
    expect(byMetric(SERVER_METRICS.modelsFailedToLoad.name)).toEqual([
      expect.objectContaining({
        Namespace: 'Batchwise',
        Statistic: 'Maximum',
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      }),
    ]);
  });

  it('alarms on a canary rollback in any task, from the EMF metric the server writes', () => {
    expect(byMetric(SERVER_METRICS.canaryRollbacks.name)).toEqual([
      expect.objectContaining({
        Namespace: 'Batchwise',
        MetricName: 'CanaryRollbacks',
        Statistic: 'Sum',
        Dimensions: [{ Name: 'ServiceName', Value: 'batchwise-dev' }],
        Threshold: 1,
        EvaluationPeriods: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
      }),
    ]);
  });

  it('draws a dashboard with the server metrics and the alarms', () => {
    const body = JSON.stringify(only(t(), 'AWS::CloudWatch::Dashboard').props.DashboardBody);
    for (const spec of Object.values(SERVER_METRICS)) expect(body).toContain(spec.name);
    expect(body).toContain('MemoryUtilized');
    expect(body).toContain('OomKills');
  });
});

describe('cdk-nag', () => {
  it('reports no unacknowledged AwsSolutions findings (errors or warnings)', () => {
    expect(defaults().violations).toEqual([]);
  });
});
