import { Duration, RemovalPolicy, Stack, ArnFormat } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { SERVER_METRICS, serverMetric } from './server-metrics.ts';
import type { ServerMetricSpec } from './server-metrics.ts';

/** Namespace of metrics the stack derives itself (not published by the server). */
export const INFRA_METRICS_NAMESPACE = 'Batchwise/Infra';
export const OOM_KILLS_METRIC = 'OomKills';

export interface AlarmsProps {
  readonly topic: sns.ITopic;
  readonly cluster: ecs.ICluster;
  readonly service: ecs.Ec2Service;
  readonly httpTargetGroup: elbv2.ApplicationTargetGroup;
  readonly grpcTargetGroup: elbv2.ApplicationTargetGroup;
  /**
   * The load balancer in front of both target groups (its own 5xx: no healthy target, timeouts).
   * @default - no alarm on it (with model groups, the default group's Alarms has the one alarm)
   */
  readonly loadBalancer?: elbv2.IApplicationLoadBalancer;
  /** `ServiceName` dimension of the server's EMF metrics. */
  readonly metricsServiceName: string;
  /** Container hard limit, MiB: the memory alarm fires near it. */
  readonly memoryHardLimitMiB: number;
  /** Memory of the task's GPU, MiB. */
  readonly gpuMemoryMiB: number;
  /**
   * OOM kills of the cluster's tasks: `logGroupName` makes the EventBridge rule, the log group that
   * records the events (EventBridge requires the `/aws/events/` prefix for log group targets), the
   * metric and its alarm; `metric` is that metric, made by another Alarms of the same cluster (model
   * groups share one), shown on this one's dashboard.
   */
  readonly oomKills: { readonly logGroupName: string } | { readonly metric: cloudwatch.Metric };
  /**
   * The service's health check grace period: a new task may fail the target group's health
   * check this long (model download, CUDA initialisation, warm-up) without being broken.
   */
  readonly healthCheckGracePeriod: Duration;
  /**
   * p99 latency above which the ALB and server latency alarms fire.
   * @default Duration.millis(500)
   */
  readonly latencyP99Threshold?: Duration;
  /**
   * Container memory alarm threshold, percent of the hard limit.
   * @default 90
   */
  readonly memoryAlarmPercent?: number;
  /**
   * GPU memory alarm threshold, percent of the GPU's memory.
   * @default 90
   */
  readonly gpuMemoryAlarmPercent?: number;
  /**
   * Target 5xx alarm threshold, percent of requests.
   * @default 5
   */
  readonly target5xxPercent?: number;
  /**
   * Eviction thrash (--load-on-demand): evictions per task per minute, averaged over the running
   * tasks, above which the ModelEvictions alarm fires in 3 of 5 minutes.
   * @default - no eviction alarm (models are evicted only with loadOnDemand)
   */
  readonly evictionsPerTaskPerMinute?: number;
  /**
   * Requests per minute (all tasks) below which the server p99 alarm does not evaluate: with
   * fewer than 100 requests a p99 is the slowest request, not a percentile.
   * @default 100
   */
  readonly latencyMinRequestsPerMinute?: number;
}

const MINUTE = Duration.minutes(1);

/**
 * Alarms on OOM kills, memory, GPU memory, latency, errors, health and load shedding, all
 * notifying one topic. `alarms` is keyed by a stable name for the dashboard and tests.
 */
export class Alarms extends Construct {
  readonly alarms: Record<string, cloudwatch.Alarm> = {};
  readonly oomKillsMetric: cloudwatch.Metric;
  /** The rule that records the cluster's OOM kills, when this Alarms made it. */
  readonly oomRule?: events.Rule;
  /** Threshold of the GPU memory alarm, bytes. */
  readonly gpuMemoryThresholdBytes: number;
  /** Model evictions per task per minute as the eviction thrash alarm reads them, and its threshold (with evictionsPerTaskPerMinute). */
  readonly evictionsPerTask?: { readonly metric: cloudwatch.MathExpression; readonly threshold: number };

  constructor(scope: Construct, id: string, props: AlarmsProps) {
    super(scope, id);
    const latencyMs = (props.latencyP99Threshold ?? Duration.millis(500)).toMilliseconds();
    const memoryPercent = props.memoryAlarmPercent ?? 90;
    const gpuPercent = props.gpuMemoryAlarmPercent ?? 90;
    const errorPercent = props.target5xxPercent ?? 5;
    for (const [name, value] of Object.entries({ memoryPercent, gpuPercent, errorPercent })) {
      if (!(value > 0 && value <= 100)) throw new Error(`Alarms: ${name} must be in (0, 100], got ${value}.`);
    }
    if (!(latencyMs > 0)) throw new Error(`Alarms: latencyP99Threshold must be positive, got ${latencyMs} ms.`);
    const minRequests = props.latencyMinRequestsPerMinute ?? 100;
    if (!(Number.isInteger(minRequests) && minRequests >= 0)) {
      throw new Error(`Alarms: latencyMinRequestsPerMinute must be an integer >= 0, got ${minRequests}.`);
    }
    const oom = props.oomKills;
    if ('logGroupName' in oom && !oom.logGroupName.startsWith('/aws/events/')) {
      throw new Error(`Alarms: oomKills.logGroupName must start with /aws/events/ (EventBridge requirement), got ${oom.logGroupName}.`);
    }
    const action = new cwActions.SnsAction(props.topic);
    const add = (key: string, alarm: cloudwatch.Alarm): void => {
      alarm.addAlarmAction(action);
      alarm.addOkAction(action);
      this.alarms[key] = alarm;
    };

    if ('metric' in oom) this.oomKillsMetric = oom.metric;
    else {
      const recorded = this.recordOomKills(props.cluster, oom.logGroupName);
      this.oomRule = recorded.rule;
      this.oomKillsMetric = recorded.metric;
      add(
        'oomKills',
        this.oomKillsMetric.createAlarm(this, 'OomKillsAlarm', {
          alarmDescription: 'A Batchwise container was OOM-killed (host memory hard limit) or SIGKILLed (exit 137).',
          threshold: 1,
          evaluationPeriods: 1,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
    }

    // Container Insights writes one datapoint per task; Maximum is the fullest task.
    const memoryUtilized = new cloudwatch.Metric({
      namespace: 'ECS/ContainerInsights',
      metricName: 'MemoryUtilized',
      dimensionsMap: { ClusterName: props.cluster.clusterName, ServiceName: props.service.serviceName },
      statistic: 'Maximum',
      period: MINUTE,
      unit: cloudwatch.Unit.MEGABYTES,
    });
    const memoryThresholdMiB = Math.floor((props.memoryHardLimitMiB * memoryPercent) / 100);
    add(
      'containerMemory',
      memoryUtilized.createAlarm(this, 'ContainerMemoryAlarm', {
        alarmDescription:
          `A task uses more than ${memoryPercent}% (${memoryThresholdMiB} MiB) of its ${props.memoryHardLimitMiB} MiB ` +
          'hard limit: an OOM kill is near.',
        threshold: memoryThresholdMiB,
        evaluationPeriods: 5,
        datapointsToAlarm: 3,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );

    // The lowest desired count in the minute, so a scale-out in progress does not count as missing targets.
    const desiredTasks = new cloudwatch.Metric({
      namespace: 'ECS/ContainerInsights',
      metricName: 'DesiredTaskCount',
      dimensionsMap: { ClusterName: props.cluster.clusterName, ServiceName: props.service.serviceName },
      statistic: 'Minimum',
      period: MINUTE,
    });
    const graceMinutes = Math.ceil(props.healthCheckGracePeriod.toSeconds() / 60);
    const healthMinutes = graceMinutes + 5;
    const targetGroups = { http: props.httpTargetGroup, grpc: props.grpcTargetGroup };
    for (const [kind, tg] of Object.entries(targetGroups)) {
      const Kind = kind.toUpperCase();
      add(
        `${kind}LatencyP99`,
        tg.metrics.targetResponseTime({ statistic: 'p99', period: MINUTE }).createAlarm(this, `${Kind}LatencyP99Alarm`, {
          alarmDescription: `ALB ${Kind} target group: p99 target response time above ${latencyMs} ms.`,
          threshold: latencyMs / 1000,
          evaluationPeriods: 5,
          datapointsToAlarm: 3,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
      const errors = tg.metrics.httpCodeTarget(elbv2.HttpCodeTarget.TARGET_5XX_COUNT, { statistic: 'Sum', period: MINUTE });
      const requests = tg.metrics.requestCount({ statistic: 'Sum', period: MINUTE });
      add(
        `${kind}Target5xx`,
        percentOf(errors, requests, `${Kind} target 5xx %`).createAlarm(this, `${Kind}Target5xxAlarm`, {
          alarmDescription:
            `ALB ${Kind} target group: more than ${errorPercent}% of requests answered 5xx by the server.` +
            (kind === 'grpc' ? ' gRPC errors travel as HTTP 200 with a grpc-status: see the ServerErrors alarm.' : ''),
          threshold: errorPercent,
          evaluationPeriods: 5,
          datapointsToAlarm: 3,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
      // New targets fail readiness while their models download (up to the grace period), on
      // every deploy and scale-out: an UnhealthyHostCount alarm would fire each time. What
      // matters is whether the service has fewer ready targets than tasks it wants, for longer
      // than a new task may take to become ready.
      const deficit = new cloudwatch.MathExpression({
        expression: 'desired - FILL(healthy, 0)',
        usingMetrics: { desired: desiredTasks, healthy: tg.metrics.healthyHostCount({ statistic: 'Maximum', period: MINUTE }) },
        label: `${Kind} targets missing (desired tasks - healthy targets)`,
        period: MINUTE,
      });
      add(
        `${kind}HealthyHosts`,
        deficit.createAlarm(this, `${Kind}HealthyHostsAlarm`, {
          alarmDescription:
            `ALB ${Kind} target group: fewer healthy targets than desired tasks for ${healthMinutes} minutes, longer ` +
            `than the ${graceMinutes}-minute health check grace period a new task may need to load its models.`,
          threshold: 1,
          evaluationPeriods: healthMinutes,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
      // Not one target healthy: every request to this port is answered 503 by the load balancer.
      // Missing data counts as none healthy. It fires on a stack's first deploy until the first
      // task is ready (model download), and never on a rolling deploy (minHealthyPercent 100).
      add(
        `${kind}NoHealthyTargets`,
        tg.metrics.healthyHostCount({ statistic: 'Maximum', period: MINUTE }).createAlarm(this, `${Kind}NoHealthyTargetsAlarm`, {
          alarmDescription: `ALB ${Kind} target group: no healthy target for 2 minutes, so the load balancer answers every request with 503.`,
          threshold: 1,
          evaluationPeriods: 2,
          comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.BREACHING,
        }),
      );
    }

    if (props.loadBalancer) this.alarmOnLoadBalancer5xx(props.loadBalancer, errorPercent, add);

    const server = (spec: ServerMetricSpec): cloudwatch.Metric => serverMetric(spec, props.metricsServiceName);
    // Every task writes the service-wide EMF line every 10 s, RequestCount included even when 0:
    // lines in a minute is the heartbeat. Every other server-metric alarm treats missing data as
    // fine, and autoscaling does nothing without its metric, so silence must alarm on its own.
    add(
      'heartbeat',
      server(SERVER_METRICS.requestCount)
        .with({ statistic: 'SampleCount' })
        .createAlarm(this, 'HeartbeatAlarm', {
          alarmDescription:
            'No task wrote server metrics for 3 minutes (no EMF line in CloudWatch): the tasks are down or their logs ' +
            'do not reach CloudWatch. Autoscaling is frozen and the server-metric alarms are blind meanwhile.',
          threshold: 1,
          evaluationPeriods: 3,
          comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.BREACHING,
        }),
    );
    // With --strict-readiness false a failed model leaves its task in service: this is where it shows.
    add(
      'modelsFailedToLoad',
      server(SERVER_METRICS.modelsFailedToLoad).createAlarm(this, 'ModelsFailedToLoadAlarm', {
        alarmDescription:
          'A task has a model whose latest load failed, for 2 minutes: requests to it fail (or an older version ' +
          'serves on). See the task logs ("failed to load") and POST /v2/repository/index; the metric by Model ' +
          'dimension names it.',
        threshold: 1,
        evaluationPeriods: 2,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    // A canary release rolled back by a task (models canary, canary.json): the new version was worse than the stable one.
    add(
      'canaryRollback',
      server(SERVER_METRICS.canaryRollbacks).createAlarm(this, 'CanaryRollbackAlarm', {
        alarmDescription:
          'A task rolled a canary model version back: it was clearly worse than the stable version (error rate or p99). ' +
          'Unversioned requests go to the stable version; the task logs ("canary rolled back") say why, the Model ' +
          'dimension names the model. See docs/canary-releases.md.',
        threshold: 1,
        evaluationPeriods: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    add(
      'queueRejections',
      server(SERVER_METRICS.queueRejections).createAlarm(this, 'QueueRejectionsAlarm', {
        alarmDescription: 'The server rejects requests: a model queue is full or its queue timeout expires (clients get 503).',
        threshold: 1,
        evaluationPeriods: 3,
        datapointsToAlarm: 2,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    add(
      'serverErrors',
      percentOf(server(SERVER_METRICS.backendFailures), server(SERVER_METRICS.requestCount), 'server errors %').createAlarm(
        this,
        'ServerErrorsAlarm',
        {
          alarmDescription:
            `More than ${errorPercent}% of requests failed in model execution (BackendFailures), on HTTP and gRPC alike ` +
            '(gRPC errors reach the ALB as HTTP 200, so its 5xx alarm misses them).',
          threshold: errorPercent,
          evaluationPeriods: 5,
          datapointsToAlarm: 3,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        },
      ),
    );
    // CloudWatch's p99 over the distributions of all tasks, evaluated only with enough requests.
    const serverLatencyP99 = new cloudwatch.MathExpression({
      expression: `IF(requests >= ${minRequests}, latency, 0)`,
      usingMetrics: { latency: server(SERVER_METRICS.requestLatency), requests: server(SERVER_METRICS.requestCount) },
      label: `server p99 latency (ms), when >= ${minRequests} requests/min`,
      period: MINUTE,
    });
    add(
      'serverLatencyP99',
      serverLatencyP99.createAlarm(this, 'ServerLatencyP99Alarm', {
        alarmDescription: `Server-side p99 request latency (all tasks) above ${latencyMs} ms, in minutes with at least ${minRequests} requests.`,
        threshold: latencyMs,
        evaluationPeriods: 5,
        datapointsToAlarm: 3,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    const evictions = props.evictionsPerTaskPerMinute;
    if (evictions !== undefined) {
      if (!(evictions > 0)) throw new Error(`Alarms: evictionsPerTaskPerMinute must be > 0, got ${evictions}.`);
      // Evictions of every task over the tasks running: one task thrashing shows as its share.
      const perTask = new cloudwatch.MathExpression({
        expression: 'IF(FILL(tasks, 0) > 0, FILL(evictions, 0) / tasks, FILL(evictions, 0))',
        usingMetrics: {
          evictions: server(SERVER_METRICS.modelEvictions),
          tasks: new cloudwatch.Metric({
            namespace: 'ECS/ContainerInsights',
            metricName: 'RunningTaskCount',
            dimensionsMap: { ClusterName: props.cluster.clusterName, ServiceName: props.service.serviceName },
            statistic: 'Average',
            period: MINUTE,
          }),
        },
        label: 'model evictions per task per minute',
        period: MINUTE,
      });
      this.evictionsPerTask = { metric: perTask, threshold: evictions };
      add(
        'evictionThrash',
        perTask.createAlarm(this, 'EvictionThrashAlarm', {
          alarmDescription:
            `Tasks evict more than ${evictions} models per task per minute, in 3 of 5 minutes: the models in use do not fit ` +
            '--model-memory-limit, so requests keep waiting for loads of models evicted moments before. Raise the limit ' +
            '(a larger instance type), run more tasks, or split the models across services. See docs/many-models.md, sizing many models per host.',
          threshold: evictions,
          evaluationPeriods: 5,
          datapointsToAlarm: 3,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
    }
    const gpuThresholdBytes = Math.floor((props.gpuMemoryMiB * 1024 * 1024 * gpuPercent) / 100);
    this.gpuMemoryThresholdBytes = gpuThresholdBytes;
    add(
      'gpuMemory',
      server(SERVER_METRICS.gpuMemoryUsedBytes).createAlarm(this, 'GpuMemoryAlarm', {
        alarmDescription:
          `GPU memory use above ${gpuPercent}% of ${props.gpuMemoryMiB} MiB: CUDA out-of-memory fails requests ` +
          'without killing the container.',
        threshold: gpuThresholdBytes,
        evaluationPeriods: 3,
        datapointsToAlarm: 2,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
  }

  /**
   * 5xx the load balancer itself answers (502 bad gateway, 503 no healthy target, 504 timeout): the
   * tasks never see these requests, so neither the target 5xx nor the server's metrics do.
   */
  private alarmOnLoadBalancer5xx(
    loadBalancer: elbv2.IApplicationLoadBalancer,
    errorPercent: number,
    add: (key: string, alarm: cloudwatch.Alarm) => void,
  ): void {
    const elb5xx = loadBalancer.metrics.httpCodeElb(elbv2.HttpCodeElb.ELB_5XX_COUNT, { statistic: 'Sum', period: MINUTE });
    const lbRequests = loadBalancer.metrics.requestCount({ statistic: 'Sum', period: MINUTE });
    add(
      'loadBalancer5xx',
      percentOf(elb5xx, lbRequests, 'ALB 5xx %').createAlarm(this, 'LoadBalancer5xxAlarm', {
        alarmDescription:
          `The load balancer itself answered more than ${errorPercent}% of requests with 5xx (502, 503 no healthy ` +
          'target, 504 timeout) in 2 of 3 minutes.',
        threshold: errorPercent,
        evaluationPeriods: 3,
        datapointsToAlarm: 2,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
  }

  /**
   * OOM kills. EventBridge cannot emit metrics, so matching events land in a log group and a metric
   * filter counts them: no Lambda involved.
   */
  private recordOomKills(cluster: ecs.ICluster, logGroupName: string): { rule: events.Rule; metric: cloudwatch.Metric } {
    const oomLogGroup = new logs.LogGroup(this, 'OomEvents', {
      logGroupName,
      retention: logs.RetentionDays.THREE_MONTHS,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // A native resource policy instead of the events-targets helper, which installs a Lambda.
    new logs.ResourcePolicy(this, 'OomEventsPolicy', {
      policyStatements: [
        new iam.PolicyStatement({
          principals: [new iam.ServicePrincipal('events.amazonaws.com'), new iam.ServicePrincipal('delivery.logs.amazonaws.com')],
          actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
          resources: [oomLogGroup.logGroupArn],
        }),
      ],
    });
    const oomLogGroupTargetArn = Stack.of(this).formatArn({
      service: 'logs',
      resource: 'log-group',
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
      resourceName: oomLogGroup.logGroupName,
    });
    const rule = new events.Rule(this, 'OomKillRule', {
      description: 'ECS task stopped with a container OOM-killed (OutOfMemoryError or exit code 137)',
      eventPattern: {
        source: ['aws.ecs'],
        detailType: ['ECS Task State Change'],
        detail: {
          clusterArn: [cluster.clusterArn],
          lastStatus: ['STOPPED'],
          $or: [{ containers: { reason: [{ prefix: 'OutOfMemoryError' }] } }, { containers: { exitCode: [137] } }],
        },
      },
      targets: [{ bind: () => ({ id: 'OomLogGroup', arn: oomLogGroupTargetArn }) }],
    });
    const metric = new cloudwatch.Metric({
      namespace: INFRA_METRICS_NAMESPACE,
      metricName: OOM_KILLS_METRIC,
      dimensionsMap: { ClusterArn: cluster.clusterArn },
      statistic: 'Sum',
      period: MINUTE,
    });
    new logs.MetricFilter(this, 'OomKillsFilter', {
      logGroup: oomLogGroup,
      filterPattern: logs.FilterPattern.exists('$.detail.clusterArn'),
      metricNamespace: INFRA_METRICS_NAMESPACE,
      metricName: OOM_KILLS_METRIC,
      metricValue: '1',
      dimensions: { ClusterArn: '$.detail.clusterArn' },
      unit: cloudwatch.Unit.COUNT,
    });
    return { rule, metric };
  }
}

/** `100 * part / whole` per period; 0 without requests (no traffic is no error rate). */
function percentOf(part: cloudwatch.IMetric, whole: cloudwatch.IMetric, label: string): cloudwatch.MathExpression {
  return new cloudwatch.MathExpression({
    expression: 'IF(whole > 0, 100 * FILL(part, 0) / whole, 0)',
    usingMetrics: { part, whole },
    label,
    period: MINUTE,
  });
}
