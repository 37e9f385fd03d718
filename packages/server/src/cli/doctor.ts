import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Command } from 'commander';
import { visibleGpuIds } from '../backends/gpu-detect.ts';
import { probeExecutionProvider } from '../backends/onnxruntime/provider-probe.ts';
import { cgroupMemoryLimitBytes, resolveMemoryBudgetBytes } from '../memory/memory-budget.ts';
import { parseBool } from './flags.ts';

export const GPU_AMI_PARAMETERS = {
  al2023: '/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id',
  al2: '/aws/service/ecs/optimized-ami/amazon-linux-2/gpu/recommended/image_id',
} as const;

export interface Check {
  readonly name: string;
  readonly ok: boolean;
  /** A failed check that is only informative does not fail the command. */
  readonly required: boolean;
  readonly detail: string;
}

interface DoctorFlags {
  expectGpu: boolean;
  region?: string;
  amiFamily: keyof typeof GPU_AMI_PARAMETERS;
  modelRepository?: string;
  memoryLimit?: string;
  json: boolean;
}

/** Preflight for operators: GPU and CUDA provider, memory budget, and with AWS access the AMI and bucket. */
export async function runDoctor(flags: DoctorFlags): Promise<Check[]> {
  const checks: Check[] = [];
  const gpus = visibleGpuIds();
  checks.push({
    name: 'gpu-visible',
    ok: gpus.length > 0,
    required: flags.expectGpu,
    detail: gpus.length > 0 ? `GPU devices visible: ${gpus.join(', ')}` : 'no /dev/nvidiaN device is visible to this process (is the task given a GPU, is the NVIDIA runtime in use?)',
  });
  const cuda = await probeExecutionProvider('cuda', gpus[0] ?? 0);
  checks.push({
    name: 'cuda-execution-provider',
    ok: cuda.usable,
    required: flags.expectGpu,
    detail: cuda.usable ? 'a session on the CUDA execution provider opened and ran' : cuda.reason ?? 'unusable',
  });
  const cpu = await probeExecutionProvider('cpu');
  checks.push({ name: 'cpu-execution-provider', ok: cpu.usable, required: true, detail: cpu.usable ? 'ok' : cpu.reason ?? 'unusable' });

  const cgroup = cgroupMemoryLimitBytes();
  try {
    const budget = resolveMemoryBudgetBytes(flags.memoryLimit);
    const rss = process.memoryUsage.rss();
    checks.push({
      name: 'memory-budget',
      ok: budget > rss,
      required: true,
      detail: `budget ${budget} bytes (${cgroup ? `container limit ${cgroup}` : 'no container limit; physical memory'}), this process uses ${rss}`,
    });
  } catch (error) {
    checks.push({ name: 'memory-budget', ok: false, required: true, detail: (error as Error).message });
  }

  if (flags.region) {
    const parameter = GPU_AMI_PARAMETERS[flags.amiFamily];
    try {
      const ssm = new SSMClient({ region: flags.region });
      const result = await ssm.send(new GetParameterCommand({ Name: parameter }));
      checks.push({ name: 'gpu-ami', ok: true, required: false, detail: `${parameter} = ${result.Parameter?.Value} in ${flags.region}` });
    } catch (error) {
      checks.push({ name: 'gpu-ami', ok: false, required: true, detail: `cannot read ${parameter} in ${flags.region}: ${(error as Error).message}` });
    }
  }
  if (flags.modelRepository?.startsWith('s3://')) {
    const [bucket, ...rest] = flags.modelRepository.slice('s3://'.length).split('/');
    try {
      const s3 = new S3Client(flags.region ? { region: flags.region } : {});
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: rest.join('/'), MaxKeys: 10 }));
      checks.push({ name: 'model-bucket', ok: true, required: true, detail: `s3://${bucket}: listed ${listed.KeyCount ?? 0} objects under the prefix` });
    } catch (error) {
      checks.push({ name: 'model-bucket', ok: false, required: true, detail: `cannot list ${flags.modelRepository}: ${(error as Error).message}` });
    }
  }
  return checks;
}

export function doctorCommand(): Command {
  return new Command('doctor')
    .description('Check that this host or container can serve: GPU and CUDA provider, memory budget, and (with AWS access) the GPU AMI and the model bucket. Exits 1 when a required check fails.')
    .option('--expect-gpu [bool]', 'fail unless a GPU is visible and the CUDA execution provider works', parseBool, false)
    .option('--region <region>', 'AWS region: resolve the ECS GPU AMI from its SSM public parameter')
    .option('--ami-family <family>', 'al2023 or al2', 'al2023')
    .option('--model-repository <s3url>', 'check that the model repository prefix can be listed')
    .option('--memory-limit <bytes|fraction>', 'the --memory-limit the server would be given')
    .option('--json [bool]', 'print the checks as JSON', parseBool, false)
    .action(async (flags: DoctorFlags) => {
      if (!(flags.amiFamily in GPU_AMI_PARAMETERS)) throw new Error(`--ami-family must be al2023 or al2, got '${flags.amiFamily}'`);
      const checks = await runDoctor(flags);
      const failed = checks.filter((c) => c.required && !c.ok);
      if (flags.json) {
        process.stdout.write(`${JSON.stringify({ ok: failed.length === 0, checks }, null, 2)}\n`);
      } else {
        for (const c of checks) process.stdout.write(`${c.ok ? 'ok  ' : c.required ? 'FAIL' : 'warn'}  ${c.name.padEnd(24)} ${c.detail}\n`);
        process.stdout.write(failed.length === 0 ? 'all required checks passed\n' : `${failed.length} required check(s) failed\n`);
      }
      process.exitCode = failed.length === 0 ? 0 : 1;
    });
}
