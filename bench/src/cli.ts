/**
 * `pnpm bench <scenario> [--smoke]`: batching | limit | overhead | grpc | overload | shutdown | all.
 * Results: a table on the terminal, bench/results/<scenario>.json and, where it applies, .svg.
 */
import { FULL_WINDOWS, SMOKE_WINDOWS } from './load-generator.ts';
import { FULL_MODEL, SMOKE_MODEL, runBatching } from './scenarios/batching.ts';
import { runLimit } from './scenarios/limit.ts';
import { runOverhead } from './scenarios/overhead.ts';
import { runOverload } from './scenarios/overload.ts';
import { runShutdown } from './scenarios/shutdown.ts';

const args = process.argv.slice(2);
const smoke = args.includes('--smoke') || process.env['BENCH_SMOKE'] === '1';
const scenario = args.find((a) => !a.startsWith('--')) ?? 'all';
const log = (line: string) => process.stdout.write(`${line}\n`);
const windows = smoke ? SMOKE_WINDOWS : FULL_WINDOWS;
const model = smoke ? SMOKE_MODEL : FULL_MODEL;
const concurrencyArg = args.find((a) => a.startsWith('--concurrency='));
const concurrencies = concurrencyArg
  ? concurrencyArg.slice('--concurrency='.length).split(',').map(Number)
  : smoke
    ? [1, 4]
    : [1, 2, 4, 8, 16, 32];

const scenarios: Record<string, () => Promise<unknown>> = {
  batching: () => runBatching({ model, concurrencies, windows, log }),
  limit: () => runLimit({ model, durationMs: smoke ? 100 : 1500, log }),
  overhead: () => runOverhead({ concurrency: smoke ? 4 : 16, windows, log }),
  overload: () => runOverload({ model, durationMs: smoke ? 1000 : 60_000, memoryLimit: smoke ? '0.8' : '2G', windows, log }),
  shutdown: () => runShutdown({ model, concurrency: smoke ? 4 : 16, loadMs: smoke ? 500 : 3000, log }),
  grpc: async () => {
    await runOverhead({ concurrency: smoke ? 4 : 16, windows, protocols: ['http-binary', 'grpc'], log, name: 'grpc-tiny' });
    await runBatching({ model, concurrencies: smoke ? [4] : [16], windows, protocols: ['http-binary', 'grpc'], log, name: 'grpc-batching' });
  },
};

async function main(): Promise<void> {
  const chosen = scenario === 'all' ? ['batching', 'limit', 'overhead', 'grpc', 'overload', 'shutdown'] : [scenario];
  for (const name of chosen) {
    const run = scenarios[name];
    if (!run) throw new Error(`unknown scenario '${name}'; choose one of ${Object.keys(scenarios).join(', ')}, all`);
    log(`== ${name}${smoke ? ' (smoke)' : ''} ==`);
    await run();
  }
}

main().then(
  () => process.exit(0),
  (error: Error) => {
    process.stderr.write(`${error.stack ?? error.message}\n`);
    process.exit(1);
  },
);
