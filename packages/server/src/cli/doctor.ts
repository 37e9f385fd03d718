import { Command, Option } from 'commander';
import { pino } from 'pino';
import { visibleGpus } from '../backends/gpu-detect.ts';
import { probeHostPython } from '../backends/python/host-python.ts';
import { useHeadlessVulkanDrivers } from '../backends/headless-vulkan.ts';
import { driverNames, vulkanSetup } from '../backends/vulkan-detect.ts';
import { cgroupMemoryLimitBytes, resolveMemoryBudgetBytes } from '../memory/memory-budget.ts';
import { MODEL_REPOSITORY_KEY_ENV } from '../options/environment.ts';
import { parseBool, parseHttpUrl } from './flags.ts';

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
  /** Fail unless a WebGPU session opens on a Vulkan GPU adapter (the webgpu accelerator, the webgpu image). */
  expectWebgpu?: boolean;
  region?: string;
  amiFamily: keyof typeof GPU_AMI_PARAMETERS;
  modelRepository?: string;
  memoryLimit?: string;
  /** The server's Prometheus endpoint; by default one at the default port, if any answers. */
  serverMetrics?: string;
  json: boolean;
}

export const DEFAULT_SERVER_METRICS_URL = 'http://127.0.0.1:8002/metrics';

/** The memory gauges a running server publishes, bytes. */
export interface ServerMemoryGauges {
  readonly budget: number;
  readonly baseline: number | undefined;
  readonly accounted: number;
  readonly rss: number;
}

/** A server's metrics page; undefined when none answers there. */
async function readServerMetrics(url: string): Promise<string | undefined> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return response.ok ? await response.text() : undefined;
  } catch {
    return undefined;
  }
}

/** The memory gauges of a server's metrics page; undefined when it has none. */
export function serverMemoryGauges(text: string | undefined): ServerMemoryGauges | undefined {
  if (text === undefined) return undefined;
  const gauge = (name: string) => {
    const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return match ? Number(match[1]) : undefined;
  };
  const budget = gauge('batchwise_memory_budget_bytes');
  const rss = gauge('batchwise_process_resident_memory_bytes');
  if (budget === undefined || rss === undefined) return undefined;
  return { budget, baseline: gauge('batchwise_memory_baseline_bytes'), accounted: gauge('batchwise_memory_accounted_bytes') ?? 0, rss };
}

/**
 * The server's own figures when one answers (its budget against its resident memory); else the
 * budget this host would give a server, against what is free of it now.
 */
function memoryCheck(flags: DoctorFlags, url: string, metricsText: string | undefined): Check {
  const server = serverMemoryGauges(metricsText);
  if (server) {
    return {
      name: 'memory-budget',
      ok: server.rss <= server.budget,
      required: true,
      detail:
        `server at ${url}: budget ${server.budget} bytes, resident ${server.rss}, held by requests ${server.accounted}` +
        (server.baseline !== undefined ? `, baseline (process at rest + models) ${server.baseline}` : '') +
        (server.rss > server.budget ? ': resident memory is over the budget' : ''),
    };
  }
  if (flags.serverMetrics !== undefined) {
    return { name: 'memory-budget', ok: false, required: true, detail: `no server metrics with memory gauges at ${url}` };
  }
  const cgroup = cgroupMemoryLimitBytes();
  try {
    const budget = resolveMemoryBudgetBytes(flags.memoryLimit);
    const rss = process.memoryUsage.rss();
    return {
      name: 'memory-budget',
      ok: budget > rss,
      required: true,
      detail: `no server answering at ${url}; a server here would get a budget of ${budget} bytes (${cgroup ? `container limit ${cgroup}` : 'no container limit; physical memory'})`,
    };
  } catch (error) {
    return { name: 'memory-budget', ok: false, required: true, detail: (error as Error).message };
  }
}

/**
 * A running server whose model-control API answers without a key on an address others reach
 * (its batchwise_model_control_exposed gauge): a warning, not a failure, since Triton serves
 * so by default. No check without a server that publishes the gauge.
 */
function modelControlCheck(url: string, metricsText: string | undefined): Check | undefined {
  const series = [...(metricsText ?? '').matchAll(/^batchwise_model_control_exposed\{(.*)\} (\S+)$/gm)].map(([, labels, value]) => ({
    endpoint: `${/protocol="([^"]*)"/.exec(labels!)?.[1]} ${/address="([^"]*)"/.exec(labels!)?.[1]}`,
    exposed: value === '1',
  }));
  if (series.length === 0) return undefined;
  const exposed = series.filter((s) => s.exposed).map((s) => s.endpoint);
  return {
    name: 'model-control-api',
    ok: exposed.length === 0,
    required: false,
    detail:
      exposed.length === 0
        ? `server at ${url}: the model-control API needs a key, listens on loopback only, or is off (--model-control-mode is not explicit)`
        : `server at ${url}: the model-control API answers without a key on ${exposed.join(' and ')}: anyone who reaches it can ` +
          `unload every model and load others with their own configs and ONNX files; set ${MODEL_REPOSITORY_KEY_ENV} or listen on 127.0.0.1 ` +
          '(docs/operations.md, "Security")',
  };
}

/**
 * Preflight for operators: GPU, the CUDA and TensorRT providers and a Vulkan adapter for WebGPU, memory budget, a running server's model-control
 * API, and with AWS access the AMI and bucket. `defaultServerMetricsUrl`: where to look for a
 * running server when --server-metrics is not given (tests point it where none answers, so a
 * server on this host's :8002 cannot change them). ONNX Runtime and the AWS SDK load only here,
 * when doctor runs.
 */
export async function runDoctor(flags: DoctorFlags, defaultServerMetricsUrl: string = DEFAULT_SERVER_METRICS_URL): Promise<Check[]> {
  const { probeExecutionProvider } = await import('../backends/onnxruntime/provider-probe.ts');
  const checks: Check[] = [];
  const gpus = visibleGpus();
  checks.push({
    name: 'gpu-visible',
    ok: gpus.length > 0,
    required: flags.expectGpu,
    detail:
      gpus.length > 0
        ? `GPU devices visible: ${gpus.map((g) => `CUDA ${g.cudaOrdinal} = host ${g.hostDevice}`).join(', ')}`
        : 'no /dev/nvidiaN device is visible to this process (is the task given a GPU, is the NVIDIA runtime in use?)',
  });
  const gpuProvider = async (provider: 'cuda' | 'tensorrt' | 'webgpu', name: string, required: boolean, where: string) => {
    const probe = await probeExecutionProvider(provider, gpus[0]?.cudaOrdinal ?? 0);
    checks.push({
      name,
      ok: probe.usable,
      required,
      detail: probe.usable ? `a session on ${where} opened and ran` : (probe.reason ?? 'unusable'),
    });
  };
  await gpuProvider('cuda', 'cuda-execution-provider', flags.expectGpu, 'the CUDA execution provider');
  // Only a model with the tensorrt accelerator needs it: informative.
  await gpuProvider('tensorrt', 'tensorrt-execution-provider', false, 'the TensorRT execution provider');
  // As `serve` does: on a host without a display, the NVIDIA driver through its EGL library.
  const headless = useHeadlessVulkanDrivers();
  const vulkan = vulkanSetup();
  await gpuProvider(
    'webgpu',
    'webgpu-vulkan-adapter',
    flags.expectWebgpu ?? false,
    `the WebGPU execution provider (Vulkan loader ${vulkan.loader}, driver(s) ${driverNames(vulkan)}` +
      `${headless ? `: ${headless.library}, for ${headless.replaces} without a display` : ''})`,
  );
  const cpu = await probeExecutionProvider('cpu');
  checks.push({ name: 'cpu-execution-provider', ok: cpu.usable, required: true, detail: cpu.usable ? 'ok' : (cpu.reason ?? 'unusable') });
  // Only Python backend models need it: informative.
  const python = await probeHostPython();
  checks.push({
    name: 'python-backend',
    ok: python.problem === undefined,
    required: false,
    detail:
      python.problem ?? `${python.python}: Python ${python.version}, numpy ${python.numpy} (models without EXECUTION_ENV_PATH run on it)`,
  });

  const metricsUrl = flags.serverMetrics ?? defaultServerMetricsUrl;
  const metricsText = await readServerMetrics(metricsUrl);
  checks.push(memoryCheck(flags, metricsUrl, metricsText));
  const exposure = modelControlCheck(metricsUrl, metricsText);
  if (exposure) checks.push(exposure);

  if (flags.region) {
    const parameter = GPU_AMI_PARAMETERS[flags.amiFamily];
    try {
      const { GetParameterCommand, SSMClient } = await import('@aws-sdk/client-ssm');
      const ssm = new SSMClient({ region: flags.region });
      const result = await ssm.send(new GetParameterCommand({ Name: parameter }));
      checks.push({ name: 'gpu-ami', ok: true, required: false, detail: `${parameter} = ${result.Parameter?.Value} in ${flags.region}` });
    } catch (error) {
      checks.push({
        name: 'gpu-ami',
        ok: false,
        required: true,
        detail: `cannot read ${parameter} in ${flags.region}: ${(error as Error).message}`,
      });
    }
  }
  if (flags.modelRepository !== undefined) checks.push(await repositoryCheck(flags.modelRepository, flags.region));
  return checks;
}

/** The repository as the server would list it (a folder or any s3:// form it takes): model folders found, or why not. */
async function repositoryCheck(location: string, region: string | undefined): Promise<Check> {
  try {
    const { createModelSource } = await import('../repository/create-model-source.ts');
    const source = createModelSource(location, { logger: pino({ level: 'silent' }), ...(region && { s3: { region } }) });
    const models = (await source.listModels()).map((m) => m.name);
    return {
      name: 'model-repository',
      ok: models.length > 0,
      required: true,
      detail:
        models.length > 0 ? `${location}: ${models.length} model folder(s): ${models.join(', ')}` : `${location}: no model folders found`,
    };
  } catch (error) {
    return { name: 'model-repository', ok: false, required: true, detail: `cannot list ${location}: ${(error as Error).message}` };
  }
}

export function doctorCommand(): Command {
  return new Command('doctor')
    .description(
      "Check that this host or container can serve: GPU, the CUDA and TensorRT providers and a Vulkan GPU adapter (WebGPU), each with what is missing, memory budget, a running server's model-control API (a warning when it answers without a key on an address others reach), and (with AWS access) the GPU AMI and the model bucket. Exits 1 when a required check fails.",
    )
    .option('--expect-gpu [bool]', 'fail unless a GPU is visible and the CUDA execution provider works', parseBool, false)
    .option(
      '--expect-webgpu [bool]',
      'fail unless a WebGPU session opens on a Vulkan GPU adapter (the webgpu accelerator and image)',
      parseBool,
      false,
    )
    .option('--region <region>', 'AWS region: resolve the ECS GPU AMI from its SSM public parameter')
    .addOption(new Option('--ami-family <family>', 'the GPU AMI family').choices(Object.keys(GPU_AMI_PARAMETERS)).default('al2023'))
    .option('--model-repository <location>', 'check that the model repository (a folder or s3:// location) lists model folders')
    .option('--memory-limit <bytes|fraction>', 'the --memory-limit the server would be given (when no server is running)')
    .option(
      '--server-metrics <url>',
      `a running server's metrics endpoint: check its memory budget, accounted bytes, resident memory and whether its model-control API needs a key (default: ${DEFAULT_SERVER_METRICS_URL} if one answers)`,
      parseHttpUrl,
    )
    .option('--json [bool]', 'print the checks as JSON', parseBool, false)
    .action(async (flags: DoctorFlags) => {
      const checks = await runDoctor(flags);
      const failed = checks.filter((c) => c.required && !c.ok);
      if (flags.json) {
        process.stdout.write(`${JSON.stringify({ ok: failed.length === 0, checks }, null, 2)}\n`);
      } else {
        for (const c of checks) process.stdout.write(`${c.ok ? 'ok  ' : c.required ? 'FAIL' : 'warn'}  ${c.name.padEnd(28)} ${c.detail}\n`);
        process.stdout.write(failed.length === 0 ? 'all required checks passed\n' : `${failed.length} required check(s) failed\n`);
      }
      if (failed.length > 0) {
        process.stderr.write(`error: doctor: required check(s) failed: ${failed.map((c) => c.name).join(', ')}\n`);
        process.exitCode = 1;
      }
    });
}
