/**
 * The smallest useful ONNX model (FP32 Identity, INPUT0 -> OUTPUT0, shape [batch, 1]), as
 * written by `@batchwise/modelgen`'s `identity('FP32', [1])`. `batchwise doctor` loads it to
 * learn whether an execution provider really works, without any model repository at hand.
 * A test checks it still equals the generator's output.
 */
export const PROBE_MODEL_BASE64 =
  'CAgSEmJhdGNod2lzZS1tb2RlbGdlbhoFMC4xLjAyADp3CicKBklOUFVUMBIHT1VUUFVUMBoKSWRlbnRpdHlfMCIISWRlbnRpdHkSDWlkZW50aXR5X2ZwMzJaHQoGSU5QVVQwEhMKEQgBEg0KBxIFYmF0Y2gKAggBYh4KB09VVFBVVDASEwoRCAESDQoHEgViYXRjaAoCCAFCBAoAEBE=';

export function probeModelBytes(): Uint8Array {
  return new Uint8Array(Buffer.from(PROBE_MODEL_BASE64, 'base64'));
}
