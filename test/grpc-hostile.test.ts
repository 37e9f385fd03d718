import { PROTO_DIR } from '@batchwise/protocol';
import {
  credentials,
  loadPackageDefinition,
  Metadata,
  status,
  type Client,
  type ServiceClientConstructor,
  type ServiceError,
} from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity } from '@batchwise/modelgen';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;
type AnyClient = Client & Record<string, Function>;

const i32 = (n: number) => Buffer.from(new Int32Array(n).fill(1).buffer);
const simpleInputs = (input1: Record<string, unknown> = {}) => [
  { name: 'INPUT0', datatype: 'INT32', shape: ['1', '16'] },
  { name: 'INPUT1', datatype: 'INT32', shape: ['1', '16'], ...input1 },
];

describe('hostile input over gRPC: INVALID_ARGUMENT naming the problem, and the server stays SERVING', () => {
  let server: Server;
  let remove: () => Promise<void>;
  let client: AnyClient;
  let health: AnyClient;
  beforeAll(async () => {
    const repo = await makeRepository([{ name: 'id_bytes', model: identity('BYTES', [2]) }]);
    remove = repo.remove;
    server = await startTestServer([EXAMPLES, repo.dir], { grpcMaxMessageBytes: 1024 * 1024 });
    const definition = loadSync(['grpc_service.proto', 'health.proto'], {
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [PROTO_DIR],
    });
    const root = loadPackageDefinition(definition) as any;
    const address = `127.0.0.1:${server.grpcPort}`;
    client = new (root.inference.GRPCInferenceService as ServiceClientConstructor)(address, credentials.createInsecure(), {
      'grpc.max_send_message_length': 8 * 1024 * 1024,
    }) as AnyClient;
    health = new (root.grpc.health.v1.Health as ServiceClientConstructor)(address, credentials.createInsecure()) as AnyClient;
  });
  afterAll(async () => {
    client.close();
    health.close();
    await server.close();
    await remove();
  });

  const infer = (request: Record<string, unknown>) =>
    new Promise<ServiceError | undefined>((resolve) =>
      client['ModelInfer']!(request, (error: ServiceError | null) => resolve(error ?? undefined)),
    );
  const serving = () =>
    new Promise<string>((resolve, reject) =>
      health['Check']!({ service: '' }, (error: ServiceError | null, r: { status: string }) => (error ? reject(error) : resolve(r.status))),
    );

  const simple = (inputs: unknown[], raw: Buffer[], extra: Record<string, unknown> = {}) => ({
    model_name: 'simple',
    inputs,
    raw_input_contents: raw,
    ...extra,
  });

  const cases: [string, Record<string, unknown>, RegExp, number?][] = [
    ['raw contents shorter than the shape', simple(simpleInputs(), [i32(16), i32(15)]), /INPUT1/],
    ['raw contents longer than the shape', simple(simpleInputs(), [i32(16), i32(17)]), /INPUT1/],
    ['raw contents for only some inputs', simple(simpleInputs(), [i32(16)]), /raw_input_contents/],
    [
      'BYTES length prefixes that run past the end',
      {
        model_name: 'id_bytes',
        inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: ['1', '2'] }],
        raw_input_contents: [Buffer.from([1, 0, 0, 0, 0x61, 9, 0, 0, 0])],
      },
      /INPUT0/,
    ],
    ['a negative dimension', simple(simpleInputs({ shape: ['1', '-16'] }), [i32(16), i32(16)]), /INPUT1/],
    ['a huge dimension', simple(simpleInputs({ shape: ['1', '4503599627370496'] }), [i32(16), i32(16)]), /INPUT1/],
    [
      'an element count whose byte size overflows',
      simple(simpleInputs({ shape: ['65536', '65536', '65536'] }), [i32(16), i32(16)]),
      /INPUT1/,
    ],
    ['an unknown datatype', simple(simpleInputs({ datatype: 'INT33' }), [i32(16), i32(16)]), /INT33/],
    [
      'FP16 in typed contents',
      {
        model_name: 'simple',
        inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: ['1', '16'], contents: { fp32_contents: new Array(16).fill(1) } }],
      },
      /FP16|INPUT0/,
    ],
    ['duplicate input names', simple([simpleInputs()[0], simpleInputs()[0]], [i32(16), i32(16)]), /INPUT0/],
    [
      'duplicate output names',
      simple(simpleInputs(), [i32(16), i32(16)], { outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT0' }] }),
      /OUTPUT0/,
    ],
    [
      'an input the model does not have',
      simple([...simpleInputs(), { name: 'EXTRA', datatype: 'INT32', shape: ['1', '16'] }], [i32(16), i32(16), i32(16)]),
      /EXTRA/,
    ],
    ['a missing input', simple([simpleInputs()[0]], [i32(16)]), /INPUT1/],
    [
      'a batch larger than max_batch_size',
      simple(
        simpleInputs({ shape: ['9', '16'] }).map((i) => ({ ...i, shape: ['9', '16'] })),
        [i32(144), i32(144)],
      ),
      /batch-size must be <= 8/,
    ],
    ['an unknown model', { model_name: 'nope', inputs: [] }, /unknown model: 'nope'/],
    ['a message over the maximum size', simple(simpleInputs(), [i32(16), Buffer.alloc(2 * 1024 * 1024)]), /./, status.RESOURCE_EXHAUSTED],
  ];

  for (const [what, request, message, code] of cases) {
    it(what, async () => {
      const error = await infer(request);
      expect(error, 'the request must fail').toBeDefined();
      expect(error!.code).toBe(code ?? status.INVALID_ARGUMENT);
      expect(error!.details).toMatch(message);
      expect(await serving()).toBe('SERVING');
    });
  }

  it('malformed protobuf bytes', async () => {
    const error = await new Promise<ServiceError | undefined>((resolve) => {
      client.makeUnaryRequest(
        '/inference.GRPCInferenceService/ModelInfer',
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]),
        new Metadata(),
        {},
        (e) => resolve(e ?? undefined),
      );
    });
    expect(error).toBeDefined();
    expect([status.INTERNAL, status.INVALID_ARGUMENT]).toContain(error!.code);
    expect(await serving()).toBe('SERVING');
  });

  it('still answers a good request correctly afterwards', async () => {
    const response = await new Promise<{ raw_output_contents: Buffer[] }>((resolve, reject) =>
      client['ModelInfer']!(simple(simpleInputs(), [i32(16), i32(16)]), (e: ServiceError | null, r: { raw_output_contents: Buffer[] }) =>
        e ? reject(e) : resolve(r),
      ),
    );
    const sum = new Int32Array(new Uint8Array(response.raw_output_contents[0]!).buffer);
    expect(Array.from(sum)).toEqual(new Array(16).fill(2));
  });
});
