/**
 * Trace mode opentelemetry end to end: a real OTLP HTTP receiver on loopback gets the spans the
 * server's OpenTelemetry SDK exports (JSON), for requests over HTTP and gRPC, with and without a
 * caller's W3C traceparent, for an ensemble's steps and for a JavaScript model's calls to other models.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Metadata } from '@grpc/grpc-js';
import { PROTO_DIR } from '@batchwise/protocol';
import { parseTraceConfigFlags } from '../packages/server/src/trace/trace-config-flags.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES } from './support/repository.ts';
import { postJson, startTestServer } from './support/server.ts';
import { upstreamClients, type AnyClient } from './support/upstream-grpc.ts';

interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: Record<string, unknown> }[];
  events?: { name: string }[];
  resource: Record<string, unknown>;
}

/** An OTLP HTTP traces receiver: every span of every POST /v1/traces (OTLP JSON), with its resource's attributes. */
class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        if (request.method === 'POST' && request.url === '/v1/traces') {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          for (const resourceSpans of body.resourceSpans ?? []) {
            const resource = attributesOf(resourceSpans.resource?.attributes ?? []);
            for (const scope of resourceSpans.scopeSpans ?? [])
              for (const span of scope.spans ?? []) this.spans.push({ ...span, resource });
          }
          response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } else response.writeHead(404).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}/v1/traces`;
  }

  /** Waits (polling, up to 20 s on a loaded machine) until `count` spans of the trace have arrived. */
  async trace(traceId: string, count: number): Promise<ReceivedSpan[]> {
    for (let i = 0; i < 400; i++) {
      const spans = this.spans.filter((s) => s.traceId === traceId);
      if (spans.length >= count) return spans;
      await new Promise((r) => setTimeout(r, 50));
    }
    return this.spans.filter((s) => s.traceId === traceId);
  }

  close(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

function attributesOf(list: { key: string; value: Record<string, unknown> }[]): Record<string, unknown> {
  return Object.fromEntries(list.map(({ key, value }) => [key, Object.values(value)[0]]));
}

const INFER = {
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Array(16).fill(1) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Array(16).fill(2) },
  ],
};
const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const PHASES = ['queue', 'compute_input', 'compute_infer', 'compute_output'];
const W3C = /^00-([\da-f]{32})-([\da-f]{16})-01$/;

/** The request span and its phase spans, checked for parents, names, attributes and time order. */
function checkRequestTrace(spans: ReceivedSpan[], model: string, requestId: string): ReceivedSpan {
  const request = spans.find((s) => s.name === 'InferRequest' && attributesOf(s.attributes)['triton.model_name'] === model)!;
  expect(request).toBeDefined();
  expect(attributesOf(request.attributes)).toMatchObject({
    'triton.model_name': model,
    'triton.model_version': '1',
    'triton.request_id': requestId,
  });
  expect(attributesOf(request.attributes)['triton.trace_id']).toBeDefined();
  expect(request.resource).toMatchObject({ 'service.name': 'batchwise', 'deployment.environment': 'test' });
  expect(request.events?.map((e) => e.name)).toEqual([
    'REQUEST_START',
    'QUEUE_START',
    'COMPUTE_START',
    'COMPUTE_INPUT_END',
    'COMPUTE_OUTPUT_START',
    'COMPUTE_END',
    'REQUEST_END',
  ]);
  const phases = PHASES.map((name) => spans.find((s) => s.name === name && s.parentSpanId === request.spanId)!);
  expect(phases.every(Boolean)).toBe(true);
  const times = [
    request.startTimeUnixNano,
    ...phases.flatMap((p) => [p.startTimeUnixNano, p.endTimeUnixNano]),
    request.endTimeUnixNano,
  ].map(BigInt);
  expect([...times].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(times);
  // Phases follow each other: each starts where the previous one ended.
  for (let i = 1; i < phases.length; i++) expect(phases[i]!.startTimeUnixNano).toBe(phases[i - 1]!.endTimeUnixNano);
  return request;
}

describe('trace mode opentelemetry', () => {
  const receiver = new OtlpReceiver();
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let inference: AnyClient;

  beforeAll(async () => {
    const url = await receiver.start();
    server = await startTestServer([EXAMPLES], {
      traceConfig: [
        'mode=opentelemetry',
        `opentelemetry,url=${url}`,
        'opentelemetry,resource=deployment.environment=test',
        'opentelemetry,bsp_schedule_delay=20',
        'level=TIMESTAMPS',
        'rate=1',
      ],
    });
    inference = upstreamClients(`127.0.0.1:${server.grpcPort}`, PROTO_DIR).inference;
  });
  afterAll(async () => {
    inference?.close();
    await server?.close();
    await receiver.close();
  });

  it('reports trace_mode opentelemetry, which the API cannot change', async () => {
    expect(await (await fetch(`${server.url}/v2/trace/setting`)).json()).toMatchObject({ trace_mode: 'opentelemetry', trace_rate: '1' });
    expect((await postJson(`${server.url}/v2/trace/setting`, { trace_mode: 'triton' })).status).toBe(501);
  });

  it('HTTP with a sampled traceparent: the caller trace goes on, the request span is a child of the caller span', async () => {
    const response = await fetch(`${server.url}/v2/models/simple/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`, tracestate: 'vendor=x' },
      body: JSON.stringify({ id: 'http-parent', ...INFER }),
    });
    expect(response.status).toBe(200);
    const [, traceId, spanId] = W3C.exec(response.headers.get('traceparent') ?? '')!;
    expect(traceId).toBe(CALLER_TRACE);
    const request = checkRequestTrace(await receiver.trace(CALLER_TRACE, 5), 'simple', 'http-parent');
    expect(request.parentSpanId).toBe(CALLER_SPAN);
    expect(request.spanId).toBe(spanId);
  });

  it("a JavaScript model's call to another model (inferModel) is a child of the calling request's span", async () => {
    const response = await fetch(`${server.url}/v2/models/bls_router/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'bls', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], data: [500, 1, 2] }] }),
    });
    expect(response.status).toBe(200);
    const [, traceId, spanId] = W3C.exec(response.headers.get('traceparent') ?? '')!;
    const spans = await receiver.trace(traceId!, 10);
    const router = checkRequestTrace(spans, 'bls_router', 'bls');
    expect(router.spanId).toBe(spanId);
    const called = spans.find((s) => s.name === 'InferRequest' && attributesOf(s.attributes)['triton.model_name'] === 'scaler')!;
    expect(called).toBeDefined();
    expect(called.parentSpanId).toBe(router.spanId);
    expect(attributesOf(called.attributes)['triton.model_version']).toBe('2');
  });

  it('HTTP without a traceparent: a new trace whose id the response carries', async () => {
    const response = await fetch(`${server.url}/v2/models/simple/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'http-root', ...INFER }),
    });
    const [, traceId, spanId] = W3C.exec(response.headers.get('traceparent') ?? '')!;
    const request = checkRequestTrace(await receiver.trace(traceId!, 5), 'simple', 'http-root');
    expect(request.parentSpanId ?? '').toBe('');
    expect(request.spanId).toBe(spanId);
  });

  it('gRPC with traceparent metadata: the trace goes on and the initial metadata carries the request span', async () => {
    const metadata = new Metadata();
    metadata.set('traceparent', `00-${CALLER_TRACE.replace(/^4/, '5')}-${CALLER_SPAN}-01`);
    const request = {
      id: 'grpc-parent',
      model_name: 'simple',
      inputs: INFER.inputs.map(({ name, datatype, shape, data }) => ({ name, datatype, shape, contents: { int_contents: data } })),
    };
    let received: Metadata | undefined;
    await new Promise((resolve, reject) => {
      const call = inference.ModelInfer!(request, metadata, (error: unknown, response: unknown) =>
        error ? reject(error) : resolve(response),
      );
      call.on('metadata', (m: Metadata) => (received = m));
    });
    const [, traceId, spanId] = W3C.exec(String(received?.get('traceparent')[0]))!;
    expect(traceId).toBe(CALLER_TRACE.replace(/^4/, '5'));
    const span = checkRequestTrace(await receiver.trace(traceId!, 5), 'simple', 'grpc-parent');
    expect(span.parentSpanId).toBe(CALLER_SPAN);
    expect(span.spanId).toBe(spanId);
  });

  it("gRPC ModelStreamInfer: every request of the stream continues the trace of the stream's traceparent", async () => {
    const traceId = CALLER_TRACE.replace(/^4/, '6');
    const metadata = new Metadata();
    metadata.set('traceparent', `00-${traceId}-${CALLER_SPAN}-01`);
    const call = inference.ModelStreamInfer!(metadata);
    const answers: unknown[] = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on('data', (answer: unknown) => answers.push(answer));
      call.on('end', () => resolve());
      call.on('error', reject);
    });
    for (const id of ['stream-a', 'stream-b']) {
      call.write({
        id,
        model_name: 'simple',
        inputs: INFER.inputs.map(({ name, datatype, shape, data }) => ({ name, datatype, shape, contents: { int_contents: data } })),
      });
    }
    call.end();
    await done;
    expect(answers).toHaveLength(2);
    const spans = await receiver.trace(traceId, 10);
    for (const id of ['stream-a', 'stream-b']) {
      const span = checkRequestTrace(
        spans.filter((s) => s.name !== 'InferRequest' || attributesOf(s.attributes)['triton.request_id'] === id),
        'simple',
        id,
      );
      expect(span.parentSpanId).toBe(CALLER_SPAN);
    }
  });

  it('gRPC without traceparent: a new trace, its id in the initial metadata', async () => {
    const request = {
      id: 'grpc-root',
      model_name: 'simple',
      inputs: INFER.inputs.map(({ name, datatype, shape, data }) => ({ name, datatype, shape, contents: { int_contents: data } })),
    };
    let received: Metadata | undefined;
    await new Promise((resolve, reject) => {
      const call = inference.ModelInfer!(request, new Metadata(), (error: unknown, response: unknown) =>
        error ? reject(error) : resolve(response),
      );
      call.on('metadata', (m: Metadata) => (received = m));
    });
    const [, traceId] = W3C.exec(String(received?.get('traceparent')[0]))!;
    const span = checkRequestTrace(await receiver.trace(traceId!, 5), 'simple', 'grpc-root');
    expect(span.parentSpanId ?? '').toBe('');
  });

  it("an ensemble's steps are children of the ensemble's request span, in the caller's trace", async () => {
    const trace = 'a'.repeat(32);
    const response = await fetch(`${server.url}/v2/models/text_classification/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${trace}-${CALLER_SPAN}-01` },
      body: JSON.stringify({ id: 'ens', inputs: [{ name: 'text', datatype: 'BYTES', shape: [1, 1], data: ['a fine day'] }] }),
    });
    expect(response.status).toBe(200);
    // The ensemble's span, and a span per step with their phases: the ensemble's ends last, so it
    // may come in a later export than its steps'. Wait for it and for the four steps'.
    const isRequest = (s: ReceivedSpan) => s.name === 'InferRequest';
    let spans: ReceivedSpan[] = [];
    for (let i = 0; i < 400 && spans.filter(isRequest).length < 5; i++) {
      spans = await receiver.trace(trace, 1);
      if (spans.filter(isRequest).length < 5) await new Promise((r) => setTimeout(r, 50));
    }
    const requests = spans.filter(isRequest);
    const ensemble = requests.find((s) => attributesOf(s.attributes)['triton.model_name'] === 'text_classification')!;
    expect(ensemble.parentSpanId).toBe(CALLER_SPAN);
    const steps = requests.filter((s) => s !== ensemble);
    expect(steps.length).toBeGreaterThanOrEqual(2);
    for (const step of steps) {
      expect(step.parentSpanId).toBe(ensemble.spanId);
      expect(BigInt(step.startTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(ensemble.startTimeUnixNano));
      expect(BigInt(step.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(ensemble.endTimeUnixNano));
    }
  });

  it('sampling: an unsampled traceparent is not traced; a sampled one is even when the rate skips the request', async () => {
    expect((await postJson(`${server.url}/v2/models/simple/trace/setting`, { trace_rate: '1000' })).status).toBe(200);
    const infer = (traceparent?: string) =>
      fetch(`${server.url}/v2/models/simple/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(traceparent && { traceparent }) },
        body: JSON.stringify(INFER),
      });
    // The first request after the update is the one in 1000 the rate picks.
    expect((await infer()).headers.get('traceparent')).toMatch(W3C);
    expect((await infer()).headers.get('traceparent')).toBeNull();
    expect((await infer(`00-${'b'.repeat(32)}-${CALLER_SPAN}-00`)).headers.get('traceparent')).toBeNull();
    expect((await infer(`00-${'c'.repeat(32)}-${CALLER_SPAN}-01`)).headers.get('traceparent')).toMatch(
      new RegExp(`^00-${'c'.repeat(32)}-`),
    );
    await postJson(`${server.url}/v2/models/simple/trace/setting`, { trace_rate: null });
  });
});

describe('--trace-config for opentelemetry', () => {
  it("takes Triton's keys", () => {
    const config = parseTraceConfigFlags([
      'mode=opentelemetry',
      'opentelemetry,url=collector:4318/v1/traces',
      'opentelemetry,resource=service.name=ranker',
      'opentelemetry,resource=team=search',
      'opentelemetry,bsp_max_export_batch_size=64',
      'opentelemetry,bsp_schedule_delay=100',
      'opentelemetry,bsp_max_queue_size=4096',
      'rate=100',
      'level=TIMESTAMPS',
      'count=5',
    ]);
    expect(config.settings).toEqual({ trace_mode: 'opentelemetry', trace_rate: 100, trace_level: ['TIMESTAMPS'], trace_count: 5 });
    expect(config.opentelemetry).toEqual({
      url: 'http://collector:4318/v1/traces',
      resource: { 'service.name': 'ranker', team: 'search' },
      bspMaxExportBatchSize: 64,
      bspScheduleDelayMs: 100,
      bspMaxQueueSize: 4096,
    });
    // An opentelemetry key chooses the mode.
    expect(parseTraceConfigFlags(['opentelemetry,url=http://127.0.0.1:4318/v1/traces']).settings.trace_mode).toBe('opentelemetry');
  });

  it('refuses unknown keys and mixed modes, naming them', () => {
    expect(() => parseTraceConfigFlags(['opentelemetry,endpoint=x'])).toThrow(/unknown key 'endpoint' for mode opentelemetry/);
    expect(() => parseTraceConfigFlags(['opentelemetry,file=/tmp/t.json'])).toThrow(/unknown key 'file' for mode opentelemetry/);
    expect(() => parseTraceConfigFlags(['triton,url=x'])).toThrow(/unknown key 'url' for mode triton/);
    expect(() => parseTraceConfigFlags(['zipkin,url=x'])).toThrow(/unknown trace mode 'zipkin'/);
    expect(() => parseTraceConfigFlags(['mode=triton', 'opentelemetry,url=x'])).toThrow(/opentelemetry key 'url' given with mode=triton/);
    expect(() => parseTraceConfigFlags(['mode=opentelemetry', 'file=/tmp/t.json'])).toThrow(
      /triton key 'file' given with mode opentelemetry/,
    );
    expect(() => parseTraceConfigFlags(['opentelemetry,bsp_max_queue_size=0'])).toThrow(/bsp_max_queue_size must be an integer >= 1/);
    expect(() => parseTraceConfigFlags(['opentelemetry,resource=novalue'])).toThrow(/resource takes <key>=<value>/);
    expect(() => parseTraceConfigFlags(['mode=jaeger'])).toThrow(/trace_mode must be 'triton' or 'opentelemetry'/);
  });
});
