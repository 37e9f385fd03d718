import { parseTritonJson } from '@batchwise/protocol';
import { BatchwiseClientError } from './errors.ts';
import { inputToJsonText, outputFromJson } from './json-tensor.ts';
import { deserializeBytes, fromRawBytes, toRawBytes } from './tensor-data.ts';
import { sharedMemoryParameters } from './shared-memory.ts';
import type { DataType, InferInput, InferRequest, InferRequestedOutput, InferResult, Parameters, SharedMemoryLocation } from './types.ts';

export const HEADER_LENGTH = 'inference-header-content-length';

export interface HttpInferBody {
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

/**
 * An InferRequest as a KServe v2 HTTP body: JSON, or with the binary tensor extension a
 * JSON header (its length in Inference-Header-Content-Length) followed by the tensors.
 */
export function encodeHttpInferRequest(request: InferRequest): HttpInferBody {
  const binary = request.binary ?? true;
  const outputs = (request.outputs ?? []).map((o): InferRequestedOutput => (typeof o === 'string' ? { name: o } : o));
  const parameters: Parameters = { ...request.parameters };
  if (binary && outputs.length === 0) parameters['binary_data_output'] = true;
  const header: Record<string, unknown> = {
    ...(request.id !== undefined && { id: request.id }),
    ...(Object.keys(parameters).length > 0 && { parameters }),
    outputs: outputs.map((o) => ({
      name: o.name,
      ...(o.sharedMemory
        ? { parameters: { ...o.parameters, ...sharedMemoryParameters(o.sharedMemory) } }
        : binary || o.parameters
          ? { parameters: { ...o.parameters, ...(binary && { binary_data: true }) } }
          : {}),
    })),
  };
  if (outputs.length === 0) delete header['outputs'];

  if (!binary) {
    // Placeholders keep INT64 digits exact: the data arrays are spliced in as text.
    const nonce = Math.random().toString(36).slice(2);
    const texts = request.inputs.map((i) => (i.sharedMemory ? '' : inputToJsonText(i.name, i.datatype, i.data)));
    header['inputs'] = request.inputs.map((i, n) =>
      i.sharedMemory
        ? sharedMemoryInput(i)
        : {
            name: i.name,
            shape: i.shape,
            datatype: i.datatype,
            ...(i.parameters && { parameters: i.parameters }),
            data: `@bw${nonce}:${n}@`,
          },
    );
    const json = JSON.stringify(header).replace(new RegExp(`"@bw${nonce}:(\\d+)@"`, 'g'), (_m, n: string) => texts[Number(n)]!);
    return { headers: { 'content-type': 'application/json' }, body: Buffer.from(json) };
  }

  const tensors: Uint8Array[] = [];
  header['inputs'] = request.inputs.map((i) => {
    if (i.sharedMemory) return sharedMemoryInput(i);
    const bytes = toRawBytes(i.name, i.datatype, i.data);
    tensors.push(bytes);
    return { name: i.name, shape: i.shape, datatype: i.datatype, parameters: { ...i.parameters, binary_data_size: bytes.byteLength } };
  });
  const json = Buffer.from(JSON.stringify(header));
  return {
    headers: { 'content-type': 'application/octet-stream', [HEADER_LENGTH]: String(json.byteLength) },
    body: Buffer.concat([json, ...tensors]),
  };
}

/**
 * A raw binary request (Triton's binary tensor data extension with Inference-Header-Content-Length
 * 0): the body is the bytes of the request's one input, whose name and shape the server deduces
 * from the model config; a BYTES input is its one element, without a length prefix. There is no
 * JSON, so no id, outputs or parameters; every output comes back binary.
 */
export function encodeRawHttpInferRequest(request: InferRequest): HttpInferBody {
  const [input, ...others] = request.inputs;
  if (!input || others.length > 0 || input.sharedMemory) {
    throw new BatchwiseClientError('a raw request carries exactly one input, sent in the request');
  }
  if (request.id !== undefined || request.outputs?.length || Object.keys(request.parameters ?? {}).length > 0) {
    throw new BatchwiseClientError('a raw request has no JSON: it cannot carry an id, outputs or parameters');
  }
  let bytes = toRawBytes(input.name, input.datatype, input.data);
  if (input.datatype === 'BYTES') {
    const elements = deserializeBytes(input.name, bytes);
    if (elements.length !== 1)
      throw new BatchwiseClientError(`a raw BYTES input holds one element; '${input.name}' has ${elements.length}`);
    bytes = elements[0]!;
  }
  return {
    headers: { 'content-type': 'application/octet-stream', [HEADER_LENGTH]: '0' },
    body: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  };
}

function sharedMemoryInput(input: InferInput & { sharedMemory: SharedMemoryLocation }): Record<string, unknown> {
  const { name, shape, datatype } = input;
  return { name, shape, datatype, parameters: { ...input.parameters, ...sharedMemoryParameters(input.sharedMemory) } };
}

interface JsonOutput {
  name: string;
  datatype: DataType;
  shape: number[];
  parameters?: Parameters;
  data?: unknown;
}

/** A KServe v2 HTTP infer response (JSON, or JSON header + binary tensors) -> InferResult. */
export function decodeHttpInferResponse(body: Buffer, headerLength: string | undefined): InferResult {
  const jsonLength = headerLength === undefined ? body.byteLength : Number(headerLength);
  if (!Number.isInteger(jsonLength) || jsonLength < 0 || jsonLength > body.byteLength) {
    throw new BatchwiseClientError(`bad ${HEADER_LENGTH} '${headerLength}' for a body of ${body.byteLength} bytes`);
  }
  const json = parseTritonJson(body.subarray(0, jsonLength).toString('utf8')) as {
    model_name: string;
    model_version?: string;
    id?: string;
    parameters?: Parameters;
    outputs?: JsonOutput[];
  };
  let offset = jsonLength;
  const outputs = (json.outputs ?? []).map((o) => {
    const size = o.parameters?.['binary_data_size'];
    let data;
    if (typeof size === 'number') {
      if (offset + size > body.byteLength)
        throw new BatchwiseClientError(`output '${o.name}': binary data runs past the end of the response`);
      data = fromRawBytes(o.name, o.datatype, body.subarray(offset, offset + size));
      offset += size;
    } else if (o.data === undefined) {
      // Written into shared memory: described, not sent.
      data = fromRawBytes(o.name, o.datatype, new Uint8Array(0));
    } else {
      data = outputFromJson(o.name, o.datatype, o.data);
    }
    return { name: o.name, datatype: o.datatype, shape: o.shape, data };
  });
  return {
    modelName: json.model_name,
    modelVersion: json.model_version ?? '',
    ...(json.id !== undefined && { id: json.id }),
    ...(json.parameters !== undefined && { parameters: json.parameters }),
    outputs,
  };
}
