import { describe, expect, it } from 'vitest';
import { Match } from 'aws-cdk-lib/assertions';
import { CERTIFICATE_ARN, IMAGE_URI, REQUIRED, memo, only, synth } from './synth.ts';

const container = (t: ReturnType<typeof synth>['template']) => only(t, 'AWS::ECS::TaskDefinition').props.ContainerDefinitions[0];

describe('g5.12xlarge, Amazon Linux 2, HTTPS on :8000, imported bucket, metrics scraper', () => {
  const s = memo(() =>
    synth({
      certificateArn: CERTIFICATE_ARN,
      // Public on purpose: the context has no default for it.
      allowedIngressCidr: '0.0.0.0/0',
      imageUri: IMAGE_URI,
      envName: 'prod',
      instanceType: 'g5.12xlarge',
      amiVariant: 'al2',
      httpListenerProtocol: 'HTTPS',
      modelBucketName: 'acme-models',
      modelPrefix: 'prod/models',
      minCapacity: '2',
      maxCapacity: '8',
      metricsScraperCidr: '10.0.0.0/16',
      githubRepo: 'acme/batchwise',
      githubOidcProviderArn: 'arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com',
    }),
  );

  it('splits the instance memory across its four GPUs, one task per GPU', () => {
    // 196608 MiB - 19661 MiB (10%) headroom = 176947 MiB over 4 tasks.
    expect(container(s().template).Memory).toBe(44236);
    expect(container(s().template).MemoryReservation).toBe(37600);
    const command: string[] = container(s().template).Command;
    expect(command[command.indexOf('--memory-limit') + 1]).toBe(String(37600 * 1024 * 1024));
    const asg = only(s().template, 'AWS::AutoScaling::AutoScalingGroup').props;
    expect([asg.MinSize, asg.MaxSize]).toEqual(['1', '4']);
  });

  it('uses the Amazon Linux 2 GPU AMI parameter', () => {
    const params = s().template.findParameters('*', {
      Default: '/aws/service/ecs/optimized-ami/amazon-linux-2/gpu/recommended/image_id',
    });
    expect(Object.keys(params)).toHaveLength(1);
  });

  it('alarms on 90% of the A10G memory', () => {
    s().template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'GpuMemoryUsedBytes',
      Threshold: Math.floor(24 * 1024 ** 3 * 0.9),
      Dimensions: [{ Name: 'ServiceName', Value: 'batchwise-prod' }],
    });
  });

  it('serves :8000 over HTTPS with the certificate', () => {
    s().template.hasResourceProperties('AWS::ElasticLoadBalancingV2::Listener', {
      Port: 8000,
      Protocol: 'HTTPS',
      Certificates: [{ CertificateArn: CERTIFICATE_ARN }],
    });
  });

  it('scopes the imported bucket to the prefix and creates no bucket or OIDC provider', () => {
    s().template.resourceCountIs('AWS::S3::Bucket', 1); // access logs only
    s().template.resourceCountIs('AWS::IAM::OIDCProvider', 0);
    const policies = JSON.stringify(s().template.findResources('AWS::IAM::Policy'));
    expect(policies).toContain(':s3:::acme-models/prod/models/*');
    expect(policies).toContain('"s3:prefix":["prod/models","prod/models/*"]');
    const command: unknown[] = container(s().template).Command;
    expect(command[command.indexOf('--model-repository') + 1]).toBe('s3://acme-models/prod/models');
  });

  it('opens :8000 and :8001 to everyone when 0.0.0.0/0 is set on purpose, acknowledged', () => {
    const alb = Object.values(s().template.findResources('AWS::EC2::SecurityGroup')).find((r) =>
      String(r.Properties.GroupDescription).startsWith('Batchwise ALB'),
    )!;
    expect(alb.Properties.SecurityGroupIngress.map((r: any) => r.CidrIp)).toEqual(['0.0.0.0/0', '0.0.0.0/0']);
  });

  it('opens :8002 to the scraper CIDR only', () => {
    const sg = Object.values(s().template.findResources('AWS::EC2::SecurityGroup')).find((r) =>
      String(r.Properties.GroupDescription).startsWith('Batchwise tasks'),
    )!;
    expect(sg.Properties.SecurityGroupIngress).toEqual([
      expect.objectContaining({ CidrIp: '10.0.0.0/16', FromPort: 8002, ToPort: 8002, IpProtocol: 'tcp' }),
    ]);
  });

  it('has no unacknowledged cdk-nag findings', () => {
    expect(s().violations).toEqual([]);
  });
});

describe('pinned AMI', () => {
  const s = memo(() => synth({ ...REQUIRED, imageUri: IMAGE_URI, amiId: 'ami-0123456789abcdef0' }));

  it('uses the pinned id and reads no AMI parameter', () => {
    expect(only(s().template, 'AWS::EC2::LaunchTemplate').props.LaunchTemplateData.ImageId).toBe('ami-0123456789abcdef0');
    expect(Object.keys(s().template.findParameters('*', { Type: 'AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>' }))).toHaveLength(0);
    expect(s().violations).toEqual([]);
  });
});

describe('region-agnostic synth with the image built from the Dockerfile', () => {
  const s = memo(() => synth({ ...REQUIRED, 'aws:cdk:disable-asset-staging': true }, { region: null }));

  it('uses a Docker image asset for the container', () => {
    expect(JSON.stringify(container(s().template).Image)).toContain('cdk-hnb659fds-container-assets');
    expect(s().stack.region).toMatch(/^\$\{Token/);
  });

  it("still checks the certificate's region, at deploy time, before any resource is created", () => {
    expect(Object.values(s().template.toJSON().Rules)).toContainEqual({
      Assertions: [
        { Assert: { 'Fn::Equals': [{ Ref: 'AWS::Region' }, 'us-east-1'] }, AssertDescription: expect.stringContaining('us-east-1') },
      ],
    });
  });

  it('leaves ALB access logs to region-specific synth, acknowledged', () => {
    const lb = only(s().template, 'AWS::ElasticLoadBalancingV2::LoadBalancer').props;
    expect(JSON.stringify(lb.LoadBalancerAttributes)).not.toContain('access_logs.s3.enabled');
    expect(s().violations).toEqual([]);
  });
});

describe('ECR image URI', () => {
  const s = memo(() => synth({ ...REQUIRED, imageUri: '123456789012.dkr.ecr.us-east-1.amazonaws.com/batchwise:abc123' }));

  it('lets the execution role pull from that repository', () => {
    const policies = JSON.stringify(s().template.findResources('AWS::IAM::Policy'));
    expect(policies).toContain('ecr:BatchGetImage');
    expect(policies).toContain(':ecr:us-east-1:123456789012:repository/batchwise');
    expect(s().violations).toEqual([]);
  });

  it('enables ALB access logs when the region is known', () => {
    const lb = only(s().template, 'AWS::ElasticLoadBalancingV2::LoadBalancer').props;
    expect(lb.LoadBalancerAttributes).toEqual(
      expect.arrayContaining([
        { Key: 'access_logs.s3.enabled', Value: 'true' },
        { Key: 'access_logs.s3.prefix', Value: 'alb' },
      ]),
    );
  });
});

describe('plain HTTP on :8000 on purpose, ECS Exec, OIDC subjects with the ref, a WAF limit', () => {
  const s = memo(() =>
    synth({
      ...REQUIRED,
      imageUri: IMAGE_URI,
      httpListenerProtocol: 'HTTP',
      enableExecuteCommand: 'true',
      githubRepo: 'acme/batchwise',
      githubBranch: 'release',
      githubOidcRefInSubject: 'true',
      wafRateLimitPer5Minutes: '5000',
    }),
  );

  it('refuses the model-repository API and its key header on plain HTTP, at the load balancer', () => {
    s().template.hasResourceProperties('AWS::ElasticLoadBalancingV2::Listener', {
      Port: 8000,
      Protocol: 'HTTP',
      Certificates: Match.absent(),
    });
    const rules = Object.values(s().template.findResources('AWS::ElasticLoadBalancingV2::ListenerRule')).map((r) => r.Properties);
    expect(rules.map((r) => r.Conditions)).toEqual([
      [{ Field: 'http-header', HttpHeaderConfig: { HttpHeaderName: 'batchwise-key', Values: ['*'] } }],
      [{ Field: 'path-pattern', PathPatternConfig: { Values: ['/v2/repository/*'] } }],
    ]);
    for (const rule of rules)
      expect(rule.Actions).toEqual([
        expect.objectContaining({ Type: 'fixed-response', FixedResponseConfig: expect.objectContaining({ StatusCode: '403' }) }),
      ]);
    s().template.hasOutput('HttpEndpoint', { Value: { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp('^http://')])] } });
  });

  it('turns ECS Exec on, with the SSM channel permissions on the task role', () => {
    expect(only(s().template, 'AWS::ECS::Service').props.EnableExecuteCommand).toBe(true);
    const policies = JSON.stringify(s().template.findResources('AWS::IAM::Policy'));
    expect(policies).toContain('ssmmessages:OpenDataChannel');
  });

  it("trusts the environment's jobs on the protected branch and on model tags only, with the ref in the subject", () => {
    const role = Object.values(s().template.findResources('AWS::IAM::Role')).find((r) =>
      JSON.stringify(r.Properties.AssumeRolePolicyDocument).includes('token.actions.githubusercontent.com'),
    )!;
    expect(role.Properties.AssumeRolePolicyDocument.Statement[0].Condition).toEqual({
      StringEquals: { 'token.actions.githubusercontent.com:aud': 'sts.amazonaws.com' },
      StringLike: {
        'token.actions.githubusercontent.com:sub': [
          'repo:acme/batchwise:environment:dev:ref:refs/heads/release',
          'repo:acme/batchwise:environment:dev:ref:refs/tags/model/*',
        ],
      },
    });
  });

  it('uses the configured WAF rate limit and has no unacknowledged cdk-nag findings', () => {
    expect(only(s().template, 'AWS::WAFv2::WebACL').props.Rules[0].Statement.RateBasedStatement.Limit).toBe(5000);
    expect(s().violations).toEqual([]);
  });
});
