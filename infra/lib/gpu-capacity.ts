import { Duration, Validations } from 'aws-cdk-lib';
import * as autoscaling from 'aws-cdk-lib/aws-autoscaling';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';

/** Which ECS-Optimized GPU AMI line to follow. */
export type GpuAmiVariant = 'al2023' | 'al2';

/** SSM public parameters that name the recommended ECS-Optimized GPU AMI. */
export const GPU_AMI_PARAMETERS: Readonly<Record<GpuAmiVariant, string>> = {
  al2023: '/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id',
  // Amazon Linux 2 reaches end of life on 2026-06-30.
  al2: '/aws/service/ecs/optimized-ami/amazon-linux-2/gpu/recommended/image_id',
};

export interface GpuCapacityProps {
  readonly vpc: ec2.IVpc;
  /**
   * The cluster to add this capacity to (model groups share one); it keeps its own default capacity
   * provider strategy.
   * @default - a new cluster with Container Insights, this capacity its default
   */
  readonly cluster?: ecs.Cluster;
  /**
   * EC2 instance type; must have NVIDIA GPUs.
   * @default 'g4dn.xlarge'
   */
  readonly instanceType?: string;
  /** Instances the group may keep at least (managed scaling decides within the range). */
  readonly minInstances: number;
  /** Instances the group may grow to. */
  readonly maxInstances: number;
  /**
   * AMI line resolved through its SSM public parameter at deploy time.
   * @default 'al2023'
   */
  readonly amiVariant?: GpuAmiVariant;
  /**
   * Pinned AMI id. Without it the SSM parameter is re-read on every deploy, and a newly
   * published AMI replaces the launch template version (instances roll on scale events).
   * @default - resolve the recommended AMI from SSM on each deploy
   */
  readonly amiId?: string;
  /**
   * Root volume size; holds the Docker image layers and the tasks' local model caches (many-models.ts).
   * @default BASE_ROOT_VOLUME_GIB (100)
   */
  readonly rootVolumeGiB?: number;
  /** Receives instance launch and terminate errors (e.g. InsufficientInstanceCapacity). */
  readonly notificationTopic: sns.ITopic;
}

/** An ECS-Optimized GPU AMI pinned by id; user data as the ECS AMIs expect. */
class PinnedLinuxImage implements ec2.IMachineImage {
  constructor(private readonly imageId: string) {}
  getImage(): ec2.MachineImageConfig {
    return { imageId: this.imageId, osType: ec2.OperatingSystemType.LINUX, userData: ec2.UserData.forLinux() };
  }
}

/** The root volume without a model cache: the Docker image layers (the CUDA runtime image is several GiB). */
export const BASE_ROOT_VOLUME_GIB = 100;

/** AWS managed policy for the SSM agent (Session Manager). */
export const SSM_MANAGED_INSTANCE_POLICY = 'AmazonSSMManagedInstanceCore';

const AMI_ID_PATTERN = /^ami-[0-9a-f]{8,17}$/;

/** ECS cluster with Container Insights and an Auto Scaling group of GPU instances as its capacity provider (or one more of them). */
export class GpuCapacity extends Construct {
  readonly cluster: ecs.Cluster;
  readonly autoScalingGroup: autoscaling.AutoScalingGroup;
  readonly capacityProvider: ecs.AsgCapacityProvider;
  readonly instanceSecurityGroup: ec2.SecurityGroup;

  constructor(scope: Construct, id: string, props: GpuCapacityProps) {
    super(scope, id);
    const instanceType = props.instanceType ?? 'g4dn.xlarge';
    const amiVariant = props.amiVariant ?? 'al2023';
    if (!(amiVariant in GPU_AMI_PARAMETERS)) {
      throw new Error(`amiVariant must be one of ${Object.keys(GPU_AMI_PARAMETERS).join(', ')}, got '${amiVariant}'.`);
    }
    if (props.amiId !== undefined && !AMI_ID_PATTERN.test(props.amiId)) {
      throw new Error(`amiId '${props.amiId}' is not an AMI id (ami-0123456789abcdef0).`);
    }
    if (!Number.isInteger(props.minInstances) || props.minInstances < 0) {
      throw new Error(`minInstances must be an integer >= 0, got ${props.minInstances}.`);
    }
    if (!Number.isInteger(props.maxInstances) || props.maxInstances < Math.max(1, props.minInstances)) {
      throw new Error(`maxInstances (${props.maxInstances}) must be >= 1 and >= minInstances (${props.minInstances}).`);
    }

    this.cluster =
      props.cluster ??
      new ecs.Cluster(this, 'Cluster', {
        vpc: props.vpc,
        containerInsightsV2: ecs.ContainerInsights.ENABLED,
      });

    const machineImage = props.amiId
      ? new PinnedLinuxImage(props.amiId)
      : ec2.MachineImage.fromSsmParameter(GPU_AMI_PARAMETERS[amiVariant], { os: ec2.OperatingSystemType.LINUX });

    this.instanceSecurityGroup = new ec2.SecurityGroup(this, 'InstanceSecurityGroup', {
      vpc: props.vpc,
      description: 'Batchwise GPU container instances: no inbound (tasks use awsvpc ENIs); outbound for ECS, ECR, S3',
      allowAllOutbound: true,
    });

    const role = new iam.Role(this, 'InstanceRole', {
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      description: 'Batchwise GPU container instances (ECS agent, SSM Session Manager)',
      // A shell on a GPU host for diagnosis (nvidia-smi, docker, the ECS agent's logs) without SSH
      // keys or an inbound port: `aws ssm start-session --target <instance-id>`.
      managedPolicies: [iam.ManagedPolicy.fromAwsManagedPolicyName(SSM_MANAGED_INSTANCE_POLICY)],
    });
    Validations.of(role).acknowledge({
      id: `AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/${SSM_MANAGED_INSTANCE_POLICY}]`,
      reason:
        'SSM Session Manager on the GPU hosts (no SSH, no inbound port): the AWS-maintained policy follows the ' +
        "SSM agent's needs (ssm, ssmmessages, ec2messages), which a copy would not.",
    });

    const userData = ec2.UserData.forLinux();
    userData.addCommands(
      // Tasks must not reach the instance role through IMDS; they have their own task role.
      'echo ECS_AWSVPC_BLOCK_IMDS=true >> /etc/ecs/ecs.config',
      'echo ECS_ENABLE_GPU_SUPPORT=true >> /etc/ecs/ecs.config',
      'echo ECS_IMAGE_PULL_BEHAVIOR=prefer-cached >> /etc/ecs/ecs.config',
      // Session Manager needs the SSM agent; install it where the AMI lacks it, never failing the boot.
      '(command -v amazon-ssm-agent >/dev/null || dnf install -y amazon-ssm-agent || yum install -y amazon-ssm-agent) ' +
        '&& systemctl enable --now amazon-ssm-agent || echo "SSM agent unavailable: no Session Manager on this host"',
    );

    const rootVolumeGiB = props.rootVolumeGiB ?? BASE_ROOT_VOLUME_GIB;
    const launchTemplate = new ec2.LaunchTemplate(this, 'LaunchTemplate', {
      instanceType: new ec2.InstanceType(instanceType),
      machineImage,
      userData,
      role,
      securityGroup: this.instanceSecurityGroup,
      requireImdsv2: true,
      httpPutResponseHopLimit: 1,
      detailedMonitoring: true,
      blockDevices: [
        {
          deviceName: '/dev/xvda',
          volume: ec2.BlockDeviceVolume.ebs(rootVolumeGiB, {
            volumeType: ec2.EbsDeviceVolumeType.GP3,
            encrypted: true,
            deleteOnTermination: true,
          }),
        },
      ],
    });

    this.autoScalingGroup = new autoscaling.AutoScalingGroup(this, 'AutoScalingGroup', {
      vpc: props.vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      launchTemplate,
      minCapacity: props.minInstances,
      maxCapacity: props.maxInstances,
      cooldown: Duration.minutes(5),
      healthChecks: autoscaling.HealthChecks.ec2({ gracePeriod: Duration.minutes(5) }),
      notifications: [
        {
          topic: props.notificationTopic,
          scalingEvents: new autoscaling.ScalingEvents(
            autoscaling.ScalingEvent.INSTANCE_LAUNCH_ERROR,
            autoscaling.ScalingEvent.INSTANCE_TERMINATE_ERROR,
          ),
        },
      ],
    });
    Validations.of(this.autoScalingGroup).acknowledge({
      id: 'AwsSolutions-AS3',
      reason:
        'Launch and terminate errors (GPU capacity shortages) notify the alarm topic; routine launches and ' +
        'terminations by ECS managed scaling are left out to keep that topic actionable.',
    });

    this.capacityProvider = new ecs.AsgCapacityProvider(this, 'CapacityProvider', {
      autoScalingGroup: this.autoScalingGroup,
      machineImageType: ecs.MachineImageType.AMAZON_LINUX_2,
      enableManagedScaling: true,
      targetCapacityPercent: 100,
      // Managed termination protection: the group launches instances protected from scale-in and
      // ECS lifts the protection only from instances without tasks, so scale-in ends empty
      // instances, never one serving requests. Managed draining moves tasks off an instance before
      // it is terminated otherwise (instance refresh, AMI change). Stack deletion then needs the
      // protection lifted first: infra/README, "Teardown".
      enableManagedTerminationProtection: true,
      enableManagedDraining: true,
    });
    this.cluster.addAsgCapacityProvider(this.capacityProvider);
    // The statements the ECS agent needs, as aws-ecs adds them for any EC2 capacity.
    Validations.of(role).acknowledge(
      {
        id: 'AwsSolutions-IAM5[Action::ecs:Submit*]',
        reason: 'ECS agent reports container and task state (SubmitContainerStateChange, ...), limited to this cluster.',
      },
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'ecs:DiscoverPollEndpoint and ecr:GetAuthorizationToken support no resource scoping; ecs:Poll and ' +
          'StartTelemetrySession carry an ecs:cluster condition on this cluster.',
      },
    );
    if (!props.cluster) {
      this.cluster.addDefaultCapacityProviderStrategy([{ capacityProvider: this.capacityProvider.capacityProviderName, weight: 1 }]);
    }
  }
}
