import { readFile } from 'node:fs/promises';
import { Command, InvalidArgumentError, Option } from 'commander';
import { pino, type Logger } from 'pino';
import { MODEL_REPOSITORY_KEY_HEADER } from '../../options/environment.ts';
import { commandGroup } from '../command-group.ts';
import { collect, optionParser, parseHttpUrl, parseNonNegativeNumber, parsePositiveInteger } from '../flags.ts';
import { optionRules } from '../option-rules.ts';
import type { ModelStatus, VersionChange } from './promotion.ts';
import { durationParser } from '../duration.ts';
import { parseSteps } from './canary-steps.ts';
import type { StickinessSource } from '../../repository/canary-declaration.ts';

// Only the commands' flags load with the CLI: what a command does (the repository store, the AWS
// SDK clients, the canary judge) is imported when it runs, so `serve` and `--help` never load it.
export type { ModelStatus, VersionChange } from './promotion.ts';

export interface ModelsCommandIO {
  /** Where results go (tables, JSON). @default process.stdout */
  readonly write?: (text: string) => void;
  /** Structured logs (progress, steps). @default pino JSON on stderr */
  readonly logger?: Logger;
}

interface CommonFlags {
  modelRepository: string;
  logLevel: string;
  json?: boolean;
}

interface ChangeFlags extends CommonFlags {
  model: string;
  actor?: string;
  message?: string;
  /** Given with --wait, and only then. */
  serverUrl?: string;
  wait?: boolean;
  waitTimeoutSecs: number;
  waitIntervalSecs: number;
  apiKeyHeader: string;
  apiKey?: string;
}

interface CanaryFlags extends CommonFlags {
  version?: number;
  file?: string;
  weight?: number;
  steps?: number[];
  /** Milliseconds. */
  interval: number;
  metricsUrl?: string[];
  region?: string;
  serviceName: string;
  stickiness?: StickinessSource;
  windowSecs?: number;
  minRequests?: number;
  maxErrorRateIncrease?: number;
  maxP99Ratio?: number;
  actor?: string;
  message?: string;
}

function parsePercent(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 100) throw new InvalidArgumentError(`expected a percent between 0 and 100, got '${value}'`);
  return n;
}

function parseVersion(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`expected a version number >= 1, got '${value}'`);
  return n;
}

function commonOptions(command: Command): Command {
  return command
    .requiredOption(
      '--model-repository <location>',
      'repository: a local folder, s3://bucket/prefix, s3://host:port/bucket/prefix or s3://https://host:port/bucket/prefix',
    )
    .option('--json', 'print the result as JSON')
    .addOption(
      new Option('--log-level <level>', 'log level of the JSON logs on stderr').choices(['debug', 'info', 'warn', 'error']).default('info'),
    );
}

function changeOptions(command: Command): Command {
  return commonOptions(command)
    .requiredOption('--model <name>', 'model name (its folder in the repository)')
    .option('--actor <who>', 'who makes the change, for the history (default: $GITHUB_ACTOR, else the OS user)')
    .option('--message <text>', 'why, for the history')
    .option('--server-url <url>', 'server (or load balancer) to check the served version on, e.g. http://alb:8000', parseHttpUrl)
    .option('--wait', 'after the change, wait until --server-url reports the new version as the one served')
    .option('--wait-timeout-secs <n>', 'give up waiting after this long', parsePositiveInteger, 600)
    .option('--wait-interval-secs <n>', 'seconds between checks', parsePositiveInteger, 2)
    .option('--api-key-header <name>', 'header carrying the API key, when the server restricts its APIs', MODEL_REPOSITORY_KEY_HEADER)
    .addOption(new Option('--api-key <key>', 'API key for --server-url').env('BATCHWISE_API_KEY'))
    .hook(
      'preAction',
      optionRules({
        needs: { '--wait': ['--server-url'] },
        onlyWith: { '--wait': ['--server-url', '--wait-timeout-secs', '--wait-interval-secs', '--api-key-header', '--api-key'] },
      }),
    );
}

/** `batchwise models promote | rollback | list`: talks to the repository only; --wait reads the server. */
export function modelsCommand(io: ModelsCommandIO = {}): Command {
  const write = io.write ?? ((text: string) => void process.stdout.write(text));
  const loggerFor = (flags: CommonFlags): Logger =>
    io.logger ?? pino({ level: flags.logLevel, base: { service: 'batchwise', command: 'models' } }, pino.destination(2));

  const afterChange = async (flags: ChangeFlags, change: VersionChange, logger: Logger): Promise<void> => {
    if (flags.wait) {
      const { waitForServedVersion } = await import('./wait-for-server.ts');
      await waitForServedVersion({
        serverUrl: flags.serverUrl!,
        model: change.model,
        version: change.version,
        logger,
        timeoutSeconds: flags.waitTimeoutSecs,
        intervalSeconds: flags.waitIntervalSecs,
        ...(flags.apiKey && { headers: { [flags.apiKeyHeader]: flags.apiKey } }),
      });
    }
    if (flags.json) write(`${JSON.stringify(change)}\n`);
    else {
      const verb = change.record.action === 'promote' ? 'promoted' : 'rolled back';
      write(`${verb} '${change.model}': now serving version ${change.version} (was ${change.from ?? 'none'})\n`);
    }
  };

  const models = commandGroup(new Command('models')).description('Promote, roll back and list model versions in a model repository');

  models.addCommand(
    changeOptions(new Command('promote'))
      .description(
        'Validate an ONNX artifact against the model config, upload it as the next version, then make it the serving version in one step',
      )
      .requiredOption('--file <model.onnx>', 'the ONNX artifact')
      .option(
        '--config <config.pbtxt>',
        'serve the new version with this config.pbtxt (e.g. from batchwise tune) instead of the current one; ' +
          'a model the repository does not have yet is created with it (version 1)',
      )
      .action(async (flags: ChangeFlags & { file: string; config?: string }) => {
        const logger = loggerFor(flags);
        const { promoteModel } = await import('./promotion.ts');
        const change = await promoteModel({
          repository: flags.modelRepository,
          model: flags.model,
          file: flags.file,
          ...(flags.config !== undefined && { configText: await readFile(flags.config, 'utf8') }),
          logger,
          ...(flags.actor !== undefined && { actor: flags.actor }),
          ...(flags.message !== undefined && { message: flags.message }),
        });
        await afterChange(flags, change, logger);
      }),
  );

  models.addCommand(
    changeOptions(new Command('rollback'))
      .description('Serve the version that served before the current one again (one step), recorded in the history')
      .option('--to <version>', 'roll back to this version instead', parseVersion)
      .action(async (flags: ChangeFlags & { to?: number }) => {
        const logger = loggerFor(flags);
        const { rollbackModel } = await import('./promotion.ts');
        const change = await rollbackModel({
          repository: flags.modelRepository,
          model: flags.model,
          logger,
          ...(flags.to !== undefined && { toVersion: flags.to }),
          ...(flags.actor !== undefined && { actor: flags.actor }),
          ...(flags.message !== undefined && { message: flags.message }),
        });
        await afterChange(flags, change, logger);
      }),
  );

  models.addCommand(
    commonOptions(new Command('canary'))
      .description(
        'Start a canary release: write <model>/canary.json so that servers send --weight percent of the requests naming no version ' +
          'to --version, beside the version that serves now; with --steps, move it step by step while watching running servers, ' +
          'roll back by itself (weight 0, non-zero exit) when a step is worse, and finish at 100 as `models promote` would',
      )
      .argument('<model>', 'model name (its folder in the repository)')
      .option('--version <n>', 'the canary version (already in the repository)', parseVersion)
      .option('--file <model.onnx>', 'an ONNX artifact to validate and upload as the next version, which becomes the canary')
      .option('--weight <percent>', 'percent of unversioned requests for the canary (without --steps)', parsePercent)
      .option('--steps <weights>', 'weights to move through, e.g. 5,25,50,100', optionParser(parseSteps))
      .addOption(
        new Option('--interval <duration>', 'how long each step is watched: 500ms, 30s, 10m, 1h')
          .argParser(durationParser('--interval'))
          .default(600_000, '10m'),
      )
      .option(
        '--metrics-url <url>',
        "a running server's metrics endpoint to watch, e.g. http://task-1:8002/metrics; repeat for several",
        (value: string, previous: string[] | undefined) => collect(parseHttpUrl(value), previous),
      )
      .addOption(
        new Option('--region <region>', 'watch the CloudWatch EMF metrics (CanaryRollbacks) in this region instead').conflicts(
          'metricsUrl',
        ),
      )
      .option(
        '--service-name <names>',
        "the ServiceName dimension of the EMF metrics (--cloudwatch-service-name of the servers); comma-separated for a stack's model groups (its MetricsServiceNames output): the model's rollbacks are summed over them",
        'batchwise',
      )
      .addOption(new Option('--stickiness <source>', 'where a stickiness key comes from').choices(['header', 'parameter', 'none']))
      .option('--window-secs <n>', 'rollback window the servers judge over', parseNonNegativeNumber)
      .option('--min-requests <n>', 'requests a version needs in a window before it is judged', parsePositiveInteger)
      .option(
        '--max-error-rate-increase <fraction>',
        'largest tolerated canary error rate minus stable error rate (0..1)',
        parseNonNegativeNumber,
      )
      .option('--max-p99-ratio <ratio>', 'largest tolerated canary p99 / stable p99', parseNonNegativeNumber)
      .option('--actor <who>', 'who promotes at 100, for the history (default: $GITHUB_ACTOR, else the OS user)')
      .option('--message <text>', 'why, for the history')
      .hook(
        'preAction',
        optionRules({
          oneOf: [
            ['--version', '--file'],
            ['--weight', '--steps'],
          ],
          needs: { '--steps': ['--metrics-url', '--region'] },
          onlyWith: { '--steps': ['--interval', '--metrics-url', '--region', '--service-name', '--actor', '--message'] },
        }),
      )
      .action(async (model: string, flags: CanaryFlags) => {
        const logger = loggerFor(flags);
        const [{ runCanarySteps, startCanary, uploadCanaryVersion }, { cloudWatchSource, metricsEndpointSource }] = await Promise.all([
          import('./canary.ts'),
          import('./canary-figures.ts'),
        ]);
        const version =
          flags.version ?? (await uploadCanaryVersion({ repository: flags.modelRepository, model, file: flags.file!, logger }));
        const base = {
          repository: flags.modelRepository,
          model,
          version,
          logger,
          ...(flags.stickiness !== undefined && { stickiness: flags.stickiness }),
          rollback: {
            windowSeconds: flags.windowSecs,
            minRequests: flags.minRequests,
            maxErrorRateIncrease: flags.maxErrorRateIncrease,
            maxP99Ratio: flags.maxP99Ratio,
          },
        };
        if (flags.steps === undefined) {
          const declaration = await startCanary({ ...base, weight: flags.weight! });
          write(
            flags.json
              ? `${JSON.stringify(declaration)}\n`
              : `canary of '${model}': version ${declaration.canaryVersion} at ${declaration.canaryWeight}%, version ${declaration.stableVersion} at ${100 - declaration.canaryWeight}%\n`,
          );
          return;
        }
        const source =
          flags.region !== undefined
            ? cloudWatchSource({
                region: flags.region,
                serviceNames: flags.serviceName
                  .split(',')
                  .map((name) => name.trim())
                  .filter(Boolean),
              })
            : metricsEndpointSource(flags.metricsUrl!);
        const change = await runCanarySteps({
          ...base,
          steps: flags.steps,
          intervalMs: flags.interval,
          source,
          progress: (line) => write(flags.json ? `${JSON.stringify({ model, progress: line })}\n` : `${line}\n`),
          ...(flags.actor !== undefined && { actor: flags.actor }),
          ...(flags.message !== undefined && { message: flags.message }),
        });
        if (change && flags.json) write(`${JSON.stringify(change)}\n`);
      }),
  );

  models.addCommand(
    commonOptions(new Command('list'))
      .description('Show the versions of each model, which one serves, and who promoted what when')
      .option('--model <name>', 'only this model')
      .action(async (flags: CommonFlags & { model?: string }) => {
        const logger = loggerFor(flags);
        const { listModelStatus } = await import('./promotion.ts');
        const status = await listModelStatus({ repository: flags.modelRepository, logger, ...(flags.model && { model: flags.model }) });
        write(flags.json ? `${JSON.stringify(status, null, 2)}\n` : formatStatus(status));
      }),
  );
  return models;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return (
    rows
      .map((r) =>
        r
          .map((cell, i) => cell.padEnd(widths[i]!))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}

export function formatStatus(status: readonly ModelStatus[]): string {
  const out: string[] = [
    table([
      ['MODEL', 'VERSIONS', 'SERVING', 'POLICY'],
      ...status.map((s) => [s.model, s.versions.join(',') || '-', s.serving.join(',') || '-', s.error ? `error: ${s.error}` : s.policy]),
    ]),
  ];
  for (const s of status.filter((m) => m.history.length > 0)) {
    out.push(`\nhistory of ${s.model}:\n`);
    out.push(
      table([
        ['WHEN', 'ACTION', 'VERSION', 'FROM', 'ACTOR', 'MESSAGE'],
        ...s.history.map((r) => [r.at, r.action, String(r.version), r.from === null ? '-' : String(r.from), r.actor, r.message ?? '']),
      ]),
    );
  }
  return out.join('');
}
