import {
  binaryBytesBody,
  bytesContentsMessage,
  jsonBody,
  MANY_ELEMENTS_MODELS,
  post,
  residentBytes,
  RUNTIME_RESERVE_BYTES,
  sendInferMessage,
  startBystander,
  type Outcome,
} from '@batchwise/server/test-support/many-elements.ts';
import { scrapeMetric, startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { table, writeResult } from '../report.ts';
import { benchRepository, cachedModel } from '../workload.ts';

const OK = new Set([0, 200]);

/**
 * Issue 21's overload case: requests small on the wire and huge once decoded (`elements` one-byte
 * BYTES elements over gRPC, HTTP JSON and HTTP binary, as many JSON numbers for FP32, rows of one
 * element), one after another against the real CLI with a memory budget, while another client
 * keeps sending small requests. Each must be refused within a second of its last byte or served;
 * the server must stay ready, the other client must never fail, and peak resident memory (VmHWM)
 * must stay within the budget plus the runtime reserve.
 */
export async function runManyElements(options: { elements: number; memoryLimit: string; log: (line: string) => void; name: string }) {
  const { elements: n, log } = options;
  const repo = await manyElementsRepository(log);
  const server = await startServerProcess(['--model-repository', repo, '--memory-limit', options.memoryLimit]);
  const pid = server.child.pid!;
  const url = (model: string) => `${server.httpUrl}/v2/models/${model}/infer`;
  const json = { 'content-type': 'application/json' };
  const binary = binaryBytesBody('INPUT0', n);
  const cases: [string, () => Buffer, (body: Buffer) => Promise<Outcome>][] = [
    [`gRPC BYTES contents x ${n}`, () => bytesContentsMessage('text', 'INPUT0', n), (b) => sendInferMessage(server.grpcAddress, b)],
    [`HTTP JSON strings x ${n}`, () => jsonBody('INPUT0', 'BYTES', [1, n], '"a"', n), (b) => post(url('text'), b, json)],
    [
      `HTTP binary BYTES x ${n}`,
      () => binary.body,
      (b) =>
        post(url('text'), b, {
          'content-type': 'application/octet-stream',
          'inference-header-content-length': String(binary.headerLength),
        }),
    ],
    [`HTTP JSON FP32 numbers x ${n}`, () => jsonBody('INPUT0', 'FP32', [1, n], '1', n), (b) => post(url('vector'), b, json)],
    [`HTTP JSON rows of 1 x ${n / 20}`, () => jsonBody('INPUT0', 'FP32', [n / 20, 1], '[0.5]', n / 20), (b) => post(url('rows'), b, json)],
    [`HTTP JSON rows of 1 x ${n / 4}`, () => jsonBody('INPUT0', 'FP32', [n / 4, 1], '[0.5]', n / 4), (b) => post(url('rows'), b, json)],
    [
      `gRPC BYTES contents x ${n / 100}`,
      () => bytesContentsMessage('text', 'INPUT0', n / 100),
      (b) => sendInferMessage(server.grpcAddress, b),
    ],
  ];
  const bystander = startBystander(server.httpUrl, server.grpcAddress);
  const rows: { request: string; wireBytes: number; code: number | undefined; ms: number; rssAfterBytes: number; message: string }[] = [];
  let other: Awaited<ReturnType<typeof bystander.stop>>;
  let peakRssBytes: number;
  let budget: number;
  try {
    for (const [request, build, send] of cases) {
      const body = build();
      const outcome = await send(body);
      rows.push({
        request,
        wireBytes: body.length,
        code: outcome.code,
        ms: outcome.ms,
        rssAfterBytes: residentBytes(pid).now,
        message: outcome.message.slice(0, 200),
      });
    }
  } finally {
    other = await bystander.stop();
    peakRssBytes = residentBytes(pid).peak;
    budget = (await scrapeMetric(server.metricsUrl, 'batchwise_memory_budget_bytes')) ?? NaN;
    await server.stop();
  }
  const refusedLate = rows.filter((r) => !OK.has(r.code ?? -1) && r.ms >= 1000).length;
  const result = {
    elements: n,
    memoryLimit: options.memoryLimit,
    requests: rows,
    refusedLate,
    bystander: { ok: other.ok, failed: other.failed.length, firstFailure: other.failed[0], notReady: other.notReady },
    peakRssBytes,
    memoryBudgetBytes: budget,
    peakWithinBudgetAndReserve: peakRssBytes <= budget + RUNTIME_RESERVE_BYTES,
  };
  log(
    `\n${table(
      ['request', 'wire MB', 'answer', 'ms after last byte', 'RSS after MiB'],
      rows.map((r) => [r.request, r.wireBytes / 1e6, String(r.code ?? 'reset'), r.ms, r.rssAfterBytes / 2 ** 20]),
    )}`,
  );
  for (const r of rows) if (!OK.has(r.code ?? -1)) log(`  ${r.request}: ${r.message}`);
  log(
    `refused later than 1 s: ${refusedLate}; the other client: ${other.ok} ok, ${other.failed.length} failed, not ready ${other.notReady} times; ` +
      `peak RSS ${(peakRssBytes / 2 ** 20).toFixed(0)} MiB of a ${(budget / 2 ** 20).toFixed(0)} MiB budget (+ ${RUNTIME_RESERVE_BYTES / 2 ** 20} MiB runtime reserve)`,
  );
  await writeResult(options.name, result);
  return result;
}

/** MANY_ELEMENTS_MODELS as a repository in the bench cache. */
async function manyElementsRepository(log: (line: string) => void): Promise<string> {
  const entries = [];
  for (const m of MANY_ELEMENTS_MODELS)
    entries.push({ name: m.name, modelFile: await cachedModel(`identity-${m.name}`, m.model, log), config: m.config });
  return benchRepository('many-elements', entries);
}
