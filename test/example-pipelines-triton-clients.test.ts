/**
 * Both example pipelines called as Triton's own clients call them: gRPC ModelInfer from a
 * client built from Triton's .proto files (BYTES as typed `bytes_contents` and as
 * `raw_input_contents`), and the HTTP request Triton's HTTP client sends (JSON header plus binary
 * tensor data, outputs asked as binary). Needs Triton's protocol files for the gRPC part
 * (skipped without them, failed in CI).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BLUE, RED, png } from '../examples/test-support/images.ts';
import { SENTENCES } from '../examples/test-support/sentences.ts';
import { EXAMPLES } from './support/repository.ts';
import { postBinary, splitBinaryResponse, startTestServer } from './support/server.ts';
import { describeWithTritonProtocol, unaryCall, upstreamClients, type AnyClient } from './support/upstream-grpc.ts';

const TEXTS = Object.keys(SENTENCES);
const LABELS = Object.values(SENTENCES);
const lengthPrefixed = (elements: readonly Buffer[]) =>
  Buffer.concat(elements.flatMap((e) => [Buffer.from(Uint32Array.of(e.length).buffer), e]));

/** Splits a BYTES tensor's bytes (the KServe layout) into its elements as strings. */
function strings(raw: Buffer): string[] {
  const out: string[] = [];
  for (let offset = 0; offset < raw.length;) {
    const length = raw.readUInt32LE(offset);
    out.push(raw.subarray(offset + 4, offset + 4 + length).toString());
    offset += 4 + length;
  }
  return out;
}

let server: Awaited<ReturnType<typeof startTestServer>>;
beforeAll(async () => {
  server = await startTestServer([EXAMPLES]);
});
afterAll(async () => {
  await server?.close();
});

describeWithTritonProtocol('example pipelines through a client built from the upstream Triton protos', () => {
  let inference: AnyClient;
  beforeAll(() => {
    inference = upstreamClients(`127.0.0.1:${server.grpcPort}`).inference;
  });
  afterAll(() => inference?.close());

  it('text_classification: typed bytes_contents in, labels out as raw contents', async () => {
    const r = await unaryCall(inference, 'ModelInfer', {
      model_name: 'text_classification',
      inputs: [
        { name: 'text', datatype: 'BYTES', shape: [TEXTS.length, 1], contents: { bytes_contents: TEXTS.map((t) => Buffer.from(t)) } },
      ],
      outputs: [{ name: 'labels' }],
    });
    expect(r.model_name).toBe('text_classification');
    const labels = r.outputs.find((o: any) => o.name === 'labels');
    const k = Number(labels.shape[1]);
    expect(labels.shape.map(Number)).toEqual([TEXTS.length, k]);
    const all = strings(r.raw_output_contents[0]);
    expect(all.filter((_, i) => i % k === 0)).toEqual(LABELS);
  });

  it('image_classification: a PNG as raw_input_contents, its dominant colour first', async () => {
    const file = png(8, 8, (x) => (x < 6 ? RED : BLUE));
    const r = await unaryCall(inference, 'ModelInfer', {
      model_name: 'image_classification',
      inputs: [{ name: 'image', datatype: 'BYTES', shape: [1, 1] }],
      raw_input_contents: [lengthPrefixed([file])],
    });
    const index = r.outputs.findIndex((o: any) => o.name === 'labels');
    expect(strings(r.raw_output_contents[index]).slice(0, 2)).toEqual(['red', 'blue']);
  });
});

describe("example pipelines through Triton's HTTP client request layout", () => {
  it('text_classification: JSON header, BYTES input and outputs as binary tensor data', async () => {
    const data = lengthPrefixed(TEXTS.map((t) => Buffer.from(t)));
    const header = {
      inputs: [{ name: 'text', datatype: 'BYTES', shape: [TEXTS.length, 1], parameters: { binary_data_size: data.length } }],
      outputs: [{ name: 'labels', parameters: { binary_data: true } }],
    };
    const response = await postBinary(`${server.url}/v2/models/text_classification/infer`, header, [data]);
    expect(response.status).toBe(200);
    const { json, binary } = splitBinaryResponse(response);
    const k = json.outputs[0].shape[1];
    expect(strings(binary).filter((_, i) => i % k === 0)).toEqual(LABELS);
  });
});
