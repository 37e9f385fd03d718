import { Worker } from 'node:worker_threads';
import { median } from '../in-process.ts';
import { environment, reportScenario } from '../report.ts';

/**
 * `pnpm bench handoff`: what a round trip to a worker thread and back costs on this host, with no
 * server around it (issue 34: a JavaScript model's request pays one, an ONNX model on the event loop
 * none). Three ways, each ping-ponging one request of the JavaScript backend's shape:
 * - `futex`: both threads blocked in Atomics.wait, woken by Atomics.notify. No event loop: the
 *   floor of two thread wake-ups (the kernel's futex wake and the scheduler's switch to the other core).
 * - `blockedWorker`: the worker blocked in Atomics.wait outside its event loop, the main thread's event
 *   loop woken through Atomics.waitAsync, the message in shared memory: the least a worker can cost a
 *   server whose main thread serves sockets, and only if the worker gives up its event loop while idle
 *   (which a JavaScript model's asynchronous code, its timers and its inferModel calls, cannot).
 * - `waitAsync`: Atomics.waitAsync on both event loops, the message in shared memory: what a
 *   shared-memory transport for the worker protocol could reach.
 * - `postMessage`: a MessagePort message each way with a transferred buffer and the batch as JSON
 *   text, as the JavaScript backend sends an execute and its answer.
 * Rounds interleave the three; medians of wall and process CPU (both threads) per round trip.
 */
export interface HandoffRow {
  readonly transport: Transport;
  readonly wallUs: number;
  readonly cpuUs: number;
}

type Transport = 'futex' | 'blockedWorker' | 'waitAsync' | 'postMessage';
const TRANSPORTS: readonly Transport[] = ['futex', 'blockedWorker', 'waitAsync', 'postMessage'];

export async function runHandoff(options: {
  roundTrips: number;
  rounds: number;
  log: (line: string) => void;
  name?: string;
}): Promise<HandoffRow[]> {
  const { roundTrips, rounds, log } = options;
  const samples = new Map<Transport, { wallUs: number[]; cpuUs: number[] }>(TRANSPORTS.map((t) => [t, { wallUs: [], cpuUs: [] }]));
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? TRANSPORTS : [...TRANSPORTS].reverse();
    for (const transport of order) {
      const { wallUs, cpuUs } = await pingPong(transport, roundTrips);
      samples.get(transport)!.wallUs.push(wallUs);
      samples.get(transport)!.cpuUs.push(cpuUs);
      log(`round ${round + 1} ${transport}: ${wallUs.toFixed(1)} us wall, ${cpuUs.toFixed(1)} us CPU a round trip`);
    }
  }
  const rows = TRANSPORTS.map((transport) => ({
    transport,
    wallUs: median(samples.get(transport)!.wallUs),
    cpuUs: median(samples.get(transport)!.cpuUs),
  }));
  await reportScenario(
    {
      name: options.name ?? 'handoff',
      title: 'A round trip to a worker thread and back, without a server (issue 34)',
      intro:
        `${roundTrips} round trips a run, ${rounds} rounds interleaved, medians; CPU is the process's (both threads). futex: ` +
        'both threads blocked in Atomics.wait (no event loop), the floor of two wake-ups on this host; blockedWorker: the ' +
        "worker in Atomics.wait, the main thread's event loop woken through Atomics.waitAsync; waitAsync: both event " +
        "loops woken through Atomics.waitAsync, the message in shared memory; postMessage: the JavaScript backend's execute " +
        'and answer, a MessagePort message each way with a transferred buffer and the batch as JSON.',
      tables: [{ headers: ['transport', 'wall us', 'CPU us'], rows: rows.map((r) => [r.transport, r.wallUs, r.cpuUs]) }],
      checks: [],
      json: { environment: environment(), roundTrips, rounds, rows },
    },
    log,
  );
  return rows;
}

/** One run of `roundTrips` round trips over `transport`: wall and process CPU per round trip, microseconds. */
async function pingPong(transport: Transport, roundTrips: number): Promise<{ wallUs: number; cpuUs: number }> {
  const shared = new SharedArrayBuffer(64 + 2 * BYTES);
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { transport, shared } });
  try {
    await new Promise<void>((resolve, reject) => {
      worker.once('message', () => resolve());
      worker.once('error', reject);
    });
    const control = new Int32Array(shared, 0, 16);
    const start = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    if (transport === 'postMessage') await viaPort(worker, roundTrips);
    else if (transport === 'waitAsync' || transport === 'blockedWorker') await viaWaitAsync(control, shared, roundTrips);
    else viaFutex(control, roundTrips);
    const used = process.cpuUsage(cpu);
    const wallUs = Number(process.hrtime.bigint() - start) / 1000 / roundTrips;
    return { wallUs, cpuUs: (used.user + used.system) / roundTrips };
  } finally {
    await worker.terminate();
  }
}

/** Room for a request's or an answer's JSON in the shared buffer. */
const BYTES = 4096;
/** One request of the JavaScript backend's shape: a 16-float input (64 bytes) and its description. */
const REQUEST = JSON.stringify([
  {
    key: 1,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], offset: 0, byteLength: 64 }],
    outputNames: ['OUTPUT0'],
    parameters: {},
  },
]);

async function viaPort(worker: Worker, roundTrips: number): Promise<void> {
  for (let i = 0; i < roundTrips; i++) {
    const buffer = new ArrayBuffer(64);
    const answered = new Promise<{ responses: string }>((resolve) => worker.once('message', resolve));
    worker.postMessage({ type: 'execute', id: i, buffer, requests: REQUEST }, [buffer]);
    JSON.parse((await answered).responses);
  }
}

/** Atomics.waitAsync (Node 16+), which TypeScript's ES2022 library does not declare. */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(array: Int32Array, index: number, value: number): { async: boolean; value: Promise<string> | string };
  }
).waitAsync;

async function viaWaitAsync(control: Int32Array, shared: SharedArrayBuffer, roundTrips: number): Promise<void> {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const request = new Uint8Array(shared, 64, BYTES);
  const answer = new Uint8Array(shared, 64 + BYTES, BYTES);
  // A pending waitAsync does not keep the event loop alive: this timer does, until the run ends.
  const alive = setInterval(() => undefined, 60_000);
  try {
    for (let i = 1; i <= roundTrips; i++) {
      Atomics.store(control, 2, encoder.encodeInto(REQUEST, request).written);
      Atomics.store(control, 0, i);
      Atomics.notify(control, 0);
      while (Atomics.load(control, 1) !== i) {
        const wait = waitAsync(control, 1, i - 1);
        if (wait.async) await wait.value;
      }
      JSON.parse(decoder.decode(answer.slice(0, Atomics.load(control, 3))));
    }
  } finally {
    clearInterval(alive);
  }
}

function viaFutex(control: Int32Array, roundTrips: number): void {
  for (let i = 1; i <= roundTrips; i++) {
    Atomics.store(control, 0, i);
    Atomics.notify(control, 0);
    while (Atomics.load(control, 1) !== i) Atomics.wait(control, 1, i - 1);
  }
}

/** The worker: answers each request as the JavaScript backend's worker answers an execute (JSON parsed, answer packed). */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { transport, shared } = workerData;
const control = new Int32Array(shared, 0, 16);
const ANSWER = JSON.stringify([{ outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 16], offset: 0, byteLength: 64 }] }]);
parentPort.postMessage('ready');
if (transport === 'postMessage') {
  parentPort.on('message', (m) => {
    JSON.parse(m.requests);
    const buffer = new ArrayBuffer(64);
    parentPort.postMessage({ type: 'executed', id: m.id, buffer, responses: ANSWER, timings: { computeInputNs: 1, computeInferNs: 2, computeOutputNs: 3 } }, [buffer]);
  });
} else if (transport === 'waitAsync') {
  parentPort.on('message', () => undefined); // keeps this event loop alive
  const encoder = new TextEncoder(), decoder = new TextDecoder();
  const request = new Uint8Array(shared, 64, ${BYTES}), answer = new Uint8Array(shared, 64 + ${BYTES}, ${BYTES});
  (async () => {
    for (let i = 1; ; i++) {
      while (Atomics.load(control, 0) !== i) { const wait = Atomics.waitAsync(control, 0, i - 1); if (wait.async) await wait.value; }
      JSON.parse(decoder.decode(request.slice(0, Atomics.load(control, 2))));
      Atomics.store(control, 3, encoder.encodeInto(ANSWER, answer).written);
      Atomics.store(control, 1, i);
      Atomics.notify(control, 1);
    }
  })();
} else if (transport === 'blockedWorker') {
  const decoder = new TextDecoder(), encoder = new TextEncoder();
  const request = new Uint8Array(shared, 64, ${BYTES}), answer = new Uint8Array(shared, 64 + ${BYTES}, ${BYTES});
  for (let i = 1; ; i++) {
    while (Atomics.load(control, 0) !== i) Atomics.wait(control, 0, i - 1);
    JSON.parse(decoder.decode(request.slice(0, Atomics.load(control, 2))));
    Atomics.store(control, 3, encoder.encodeInto(ANSWER, answer).written);
    Atomics.store(control, 1, i);
    Atomics.notify(control, 1);
  }
} else {
  for (let i = 1; ; i++) {
    while (Atomics.load(control, 0) !== i) Atomics.wait(control, 0, i - 1);
    Atomics.store(control, 1, i);
    Atomics.notify(control, 1);
  }
}
`;
