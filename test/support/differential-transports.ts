/**
 * The four ways the differential harness sends a request: HTTP JSON and HTTP binary through
 * @batchwise/client, gRPC raw_input_contents through its GrpcClient, and gRPC typed
 * `*_contents` through a grpc-js client built from Triton's own protos.
 */
import { BatchwiseClientError, deserializeBytes, GrpcClient, GrpcStatus, HttpClient, type InferResult } from '@batchwise/client';
import { PROTO_DIR, TYPED_ARRAY_OF } from '@batchwise/protocol';
import { tritonProtocolPresent } from '@batchwise/server/test-support/triton-protocol.ts';
import type { DiffRequest, Elements, Outcome, TensorValue, Wire } from './differential.ts';
import type { ServedModels } from './server.ts';
import { unaryCall, upstreamClients } from './upstream-grpc.ts';

export type TransportName = 'http-json' | 'http-binary' | 'grpc-raw' | 'grpc-typed';

export interface Transport {
  readonly name: TransportName;
  readonly wire: Wire;
  infer(request: DiffRequest): Promise<Outcome>;
}

const BINARY: Wire = { fp16: true, floats: 'bits', bytes: 'any' };

/** gRPC codes of a request's own fault, as HTTP's 4xx. */
const CLIENT_ERROR_CODES = new Set<number>([
  GrpcStatus.INVALID_ARGUMENT,
  GrpcStatus.NOT_FOUND,
  GrpcStatus.ALREADY_EXISTS,
  GrpcStatus.FAILED_PRECONDITION,
  GrpcStatus.OUT_OF_RANGE,
  GrpcStatus.UNIMPLEMENTED,
]);

/** All four transports to served models (HTTP through their client); close() closes the gRPC clients it opened. */
export function openTransports({ server, client: http }: ServedModels): { all: Transport[]; close(): Promise<void> } {
  const grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
  // Triton's own protos where present; elsewhere ours, which the protocol tests prove wire-identical.
  const upstream = upstreamClients(`127.0.0.1:${server.grpcPort}`, tritonProtocolPresent ? undefined : PROTO_DIR).inference;
  const viaClient = (client: HttpClient | GrpcClient, binary?: boolean) => async (request: DiffRequest) =>
    caught(async () => resultOutputs(await client.infer({ ...request, ...(binary !== undefined && { binary }) })));
  const all: Transport[] = [
    { name: 'http-json', wire: { fp16: false, floats: 'finite', bytes: 'text' }, infer: viaClient(http, false) },
    { name: 'http-binary', wire: BINARY, infer: viaClient(http, true) },
    { name: 'grpc-raw', wire: BINARY, infer: viaClient(grpc) },
    {
      name: 'grpc-typed',
      wire: { fp16: false, floats: 'numbers', bytes: 'any' },
      infer: (request) => caught(async () => typedResponseOutputs(await unaryCall(upstream, 'ModelInfer', typedRequest(request)))),
    },
  ];
  return { all, close: async () => (await grpc.close(), upstream.close()) };
}

async function caught(send: () => Promise<Outcome>): Promise<Outcome> {
  try {
    return await send();
  } catch (error) {
    if (error instanceof BatchwiseClientError && error.httpStatus !== undefined) {
      const status = error.httpStatus;
      return { error: { status: `HTTP ${status}`, clientError: status >= 400 && status < 500, message: error.message } };
    }
    const code = error instanceof BatchwiseClientError ? error.grpcCode : (error as { code?: unknown }).code;
    if (typeof code === 'number') {
      const message = (error as { details?: string }).details ?? (error as Error).message;
      return { error: { status: `gRPC ${GrpcStatus[code]}`, clientError: CLIENT_ERROR_CODES.has(code), message } };
    }
    throw error; // the harness's own fault, not the server's answer
  }
}

function resultOutputs(result: InferResult): Outcome {
  return {
    outputs: result.outputs.map((o) => ({ name: o.name, datatype: o.datatype as TensorValue['datatype'], shape: o.shape, data: o.data })),
  };
}

/** Triton's InferTensorContents field for each datatype that has one. */
const CONTENTS_FIELD: Partial<Record<TensorValue['datatype'], string>> = {
  BOOL: 'bool_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
};

function typedRequest(request: DiffRequest): unknown {
  const values = (t: TensorValue): unknown[] =>
    t.datatype === 'BYTES'
      ? (t.data as Uint8Array[]).map((e) => Buffer.from(e))
      : t.datatype === 'BOOL'
        ? Array.from(t.data as Uint8Array, (b) => b !== 0)
        : Array.from(t.data as ArrayLike<number | bigint>, (v) => (typeof v === 'bigint' ? v.toString() : v));
  return {
    model_name: request.model,
    inputs: request.inputs.map((t) => ({
      name: t.name,
      datatype: t.datatype,
      shape: t.shape,
      contents: { [CONTENTS_FIELD[t.datatype]!]: values(t) },
    })),
    outputs: (request.outputs ?? []).map((name) => ({ name })),
  };
}

interface TypedResponse {
  outputs: { name: string; datatype: string; shape: string[] }[];
  raw_output_contents: Buffer[];
}

function typedResponseOutputs(response: TypedResponse): Outcome {
  return {
    outputs: response.outputs.map((o, i) => {
      const datatype = o.datatype as TensorValue['datatype'];
      return { name: o.name, datatype, shape: o.shape.map(Number), data: elementsFromRaw(datatype, response.raw_output_contents[i]!) };
    }),
  };
}

function elementsFromRaw(datatype: TensorValue['datatype'], bytes: Uint8Array): Elements {
  if (datatype === 'BYTES') return deserializeBytes(datatype, bytes);
  return new TYPED_ARRAY_OF[datatype](Uint8Array.from(bytes).buffer) as Exclude<Elements, Uint8Array[]>;
}
