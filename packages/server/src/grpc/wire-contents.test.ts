import { loadSync } from '@grpc/proto-loader';
import { loadPackageDefinition, type ServiceDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { decodeInferMessage } from './infer-message.ts';
import { PROTO_DIR, PROTO_LOADER_OPTIONS } from './protos.ts';
import { contentsToRaw } from './tensor-contents.ts';
import { encodeInferRequest } from '../../test-support/grpc-wire.ts';

const le = (view: ArrayBufferView) => [...new Uint8Array(view.buffer, view.byteOffset, view.byteLength)];

/** A request with one input whose contents are the bytes `write` puts in its InferTensorContents. */
function withContents(datatype: string, write: (w: protobuf.Writer) => void, times = 1): Buffer {
  const input = protobuf.Writer.create();
  input
    .uint32((1 << 3) | 2)
    .string('IN')
    .uint32((2 << 3) | 2)
    .string(datatype);
  for (let i = 0; i < times; i++) {
    const contents = protobuf.Writer.create();
    write(contents);
    input.uint32((5 << 3) | 2).bytes(contents.finish());
  }
  return Buffer.from(
    protobuf.Writer.create()
      .uint32((5 << 3) | 2)
      .bytes(input.finish())
      .finish(),
  );
}

const decodeOnly = (message: Buffer) => {
  const { request } = decodeInferMessage(message);
  const input = request.inputs[0]!;
  return contentsToRaw(input.name, input.datatype as 'FP32', input.contents!);
};

describe('ModelInferRequest contents read on the wire', () => {
  it('unpacked elements decode as packed ones do', () => {
    const unpacked = withContents('FP32', (w) =>
      w
        .uint32((6 << 3) | 5)
        .float(1.5)
        .uint32((6 << 3) | 5)
        .float(-2),
    );
    const packed = encodeInferRequest({ inputs: [{ name: 'IN', datatype: 'FP32', contents: { fp32_contents: [1.5, -2] } }] });
    expect([...decodeOnly(unpacked)]).toEqual(le(Float32Array.of(1.5, -2)));
    expect([...decodeOnly(packed)]).toEqual(le(Float32Array.of(1.5, -2)));
    const ints = withContents('INT64', (w) =>
      w
        .uint32((3 << 3) | 0)
        .int64(-5)
        .uint32((3 << 3) | 0)
        .int64('9007199254740993'),
    );
    expect([...decodeOnly(ints)]).toEqual(le(BigInt64Array.of(-5n, 9007199254740993n)));
  });

  it('contents sent twice in one input are merged in order, as protobuf merges a message field', () => {
    const twice = withContents('BYTES', (w) => w.uint32((8 << 3) | 2).bytes(Buffer.from('ab')), 2);
    expect([...decodeOnly(twice)]).toEqual([2, 0, 0, 0, 0x61, 0x62, 2, 0, 0, 0, 0x61, 0x62]);
  });

  it('counts what decoding will create before anything is decoded', () => {
    const message = encodeInferRequest({
      model_name: 'm',
      inputs: [
        {
          name: 'TEXT',
          datatype: 'BYTES',
          shape: [3],
          contents: { bytes_contents: [Buffer.from('a'), Buffer.from(''), Buffer.from('xyz')] },
        },
        { name: 'X', datatype: 'FP32', shape: [2], contents: { fp32_contents: [1, 2] } },
        { name: 'ID', datatype: 'INT64', shape: [2], contents: { int64_contents: ['1', '-300'] } },
        { name: 'RAW', datatype: 'INT32', shape: [1] },
      ],
    });
    expect(decodeInferMessage(message).census).toEqual({
      elements: 7,
      stringElements: 3,
      stringBytes: 4,
      inputs: [
        { name: 'TEXT', elements: 3 },
        { name: 'X', elements: 2 },
        { name: 'ID', elements: 2 },
      ],
      decodeBytes: 3 * 4 + 4 + 2 * 4 + 2 * 8,
    });
  });

  it('decodes every other field exactly as @grpc/proto-loader does', () => {
    const request = {
      model_name: 'm',
      model_version: '2',
      id: 'r',
      parameters: { priority: { uint64_param: '3' }, sequence_id: { string_param: 's' } },
      inputs: [
        { name: 'A', datatype: 'INT32', shape: ['1', '4'], parameters: { binary_data_size: { int64_param: '16' } } },
        { name: 'B', datatype: 'FP32', shape: ['2'], contents: { fp32_contents: [1, 2] } },
      ],
      outputs: [{ name: 'O', parameters: { classification: { int64_param: '2' } } }],
      raw_input_contents: [Buffer.alloc(16, 1)],
    };
    const message = encodeInferRequest(request);
    const definition = loadSync('grpc_service.proto', { ...PROTO_LOADER_OPTIONS, includeDirs: [PROTO_DIR] });
    const service = (loadPackageDefinition(definition) as any).inference.GRPCInferenceService.service as ServiceDefinition;
    const expected = service['ModelInfer']!.requestDeserialize(message) as { inputs: { contents?: unknown }[] };
    const decoded = decodeInferMessage(message).request;
    for (const input of expected.inputs) delete input.contents;
    for (const input of decoded.inputs) delete input.contents;
    expect(decoded).toEqual(expected);
  });

  it.each([
    ['a length past the end', Buffer.from([0x2a, 0x09, 0x0a])],
    ['a varint past the end', Buffer.from([0x2a, 0x02, 0x2a, 0x80])],
    ['a packed FP32 run of 5 bytes', withContents('FP32', (w) => w.uint32((6 << 3) | 2).bytes(Buffer.alloc(5)))],
    ['BYTES elements as varints', withContents('BYTES', (w) => w.uint32((8 << 3) | 0).uint32(1))],
  ])('refuses %s as INVALID_ARG', (_what, message) => {
    expect(() => decodeInferMessage(message)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARG', message: expect.stringMatching(/^malformed ModelInferRequest/) }),
    );
  });
});
