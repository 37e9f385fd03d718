import path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { MODEL_CONFIG_PROTO_PATH, modelConfigRoot, parseModelConfig } from './index.ts';
import { arbitraryModelConfig } from '../../test-support/model-config-arbitrary.ts';
import { describeWithTritonProtocol, TRITON_PROTOCOL_DIR } from '../../test-support/triton-protocol.ts';

const upstreamProto = path.join(TRITON_PROTOCOL_DIR, 'model_config.proto');

function allTypes(ns: protobuf.NamespaceBase): (protobuf.Type | protobuf.Enum)[] {
  const out: (protobuf.Type | protobuf.Enum)[] = [];
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type || nested instanceof protobuf.Enum) out.push(nested);
    if (nested instanceof protobuf.Namespace) out.push(...allTypes(nested));
  }
  return out;
}

function describeField(field: protobuf.Field) {
  const resolved = field.resolve().resolvedType;
  return {
    name: field.name,
    id: field.id,
    type: resolved ? resolved.fullName : field.type,
    repeated: field.repeated,
    map: field.map,
    keyType: field instanceof protobuf.MapField ? field.keyType : undefined,
    oneof: field.partOf?.name,
  };
}

const bytesOf = (type: protobuf.Type, value: object) => Buffer.from(type.encode(type.fromObject(value)).finish());

describe('model_config.proto is wire-identical to Triton (our proto file)', () => {
  it('loads with @grpc/proto-loader (keepCase)', () => {
    const definition = protoLoader.loadSync(MODEL_CONFIG_PROTO_PATH, { keepCase: true });
    expect(definition['inference.ModelConfig']).toBeDefined();
    expect(definition['inference.ModelDynamicBatching']).toBeDefined();
  });
});

describeWithTritonProtocol('model_config.proto is wire-identical to Triton (upstream reference)', () => {
  const ours = modelConfigRoot();
  const upstream = new protobuf.Root().loadSync(upstreamProto, { keepCase: true });
  upstream.resolveAll();
  const oursType = ours.lookupType('inference.ModelConfig');
  const upType = upstream.lookupType('inference.ModelConfig');

  it('declares the same messages and enums', () => {
    const names = (root: protobuf.Root) =>
      allTypes(root)
        .map((t) => t.fullName)
        .sort();
    expect(names(ours)).toEqual(names(upstream));
    expect(names(upstream).length).toBeGreaterThan(50);
  });

  it('declares every upstream field with the same name, number, type, label, map key and oneof', () => {
    for (const up of allTypes(upstream)) {
      const mine = ours.lookup(up.fullName);
      if (up instanceof protobuf.Enum) {
        expect(mine, up.fullName).toBeInstanceOf(protobuf.Enum);
        expect((mine as protobuf.Enum).values, up.fullName).toEqual(up.values);
        continue;
      }
      expect(mine, up.fullName).toBeInstanceOf(protobuf.Type);
      const mineType = mine as protobuf.Type;
      const fields = (t: protobuf.Type) => t.fieldsArray.map(describeField).sort((a, b) => a.id - b.id);
      expect(fields(mineType), up.fullName).toEqual(fields(up));
      const oneofs = (t: protobuf.Type) => Object.fromEntries(t.oneofsArray.map((o) => [o.name, o.fieldsArray.map((f) => f.name).sort()]));
      expect(oneofs(mineType), up.fullName).toEqual(oneofs(up));
    }
  });

  it('encodes a rich config identically and decodes it with the other definition', () => {
    const config = parseModelConfig(`
      name: "densenet" platform: "onnxruntime_onnx" backend: "onnxruntime" max_batch_size: 16
      version_policy { specific { versions: [ 1, 3 ] } }
      input [ { name: "x" data_type: TYPE_FP16 format: FORMAT_NCHW dims: [ 3, -1 ] reshape { shape: [ 1, 3, -1 ] } optional: true } ]
      output [ { name: "y" data_type: TYPE_STRING dims: [ 5 ] label_filename: "labels.txt" } ]
      dynamic_batching {
        preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 priority_levels: 2 default_priority_level: 2
        priority_queue_policy { key: 1 value { timeout_action: DELAY default_timeout_microseconds: 7 max_queue_size: 3 } }
      }
      instance_group [ { name: "g" kind: KIND_GPU count: 2 gpus: [ 0, 1 ] rate_limiter { resources { name: "r" count: 2 } priority: 1 } } ]
      optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" parameters { key: "precision_mode" value: "FP16" } } ] } }
      parameters { key: "threads" value { string_value: "2" } }
      model_warmup [ { name: "w" batch_size: 2 count: 3 inputs { key: "x" value { data_type: TYPE_FP16 dims: [ 3, 4 ] random_data: true } } } ]
      model_metrics { metric_control [ { metric_identifier { family: "f" } histogram_options { buckets: [ 0.5, 1.5 ] } } ] }
    `);
    const ourBytes = bytesOf(oursType, config);
    expect(bytesOf(upType, config).equals(ourBytes)).toBe(true);

    const decoded = upType.toObject(upType.decode(ourBytes), { enums: String, longs: Number });
    const policy = decoded.dynamic_batching.priority_queue_policy as Record<string, unknown>;
    // protobufjs keys 64-bit map entries by an 8-byte hash; turn them back into numbers.
    decoded.dynamic_batching.priority_queue_policy = Object.fromEntries(
      Object.entries(policy).map(([hash, v]) => [String(protobuf.util.LongBits.fromHash(hash).toNumber(true)), v]),
    );
    expect(decoded).toEqual(config);
  });

  it('encodes any config of the schema to the same bytes with either definition (fast-check)', () => {
    fc.assert(
      fc.property(arbitraryModelConfig(), (config) => {
        const ourBytes = bytesOf(oursType, config);
        expect(bytesOf(upType, config).equals(ourBytes)).toBe(true);
        const viaUpstream = upType.toObject(upType.decode(ourBytes), { longs: Number, enums: String });
        const viaOurs = oursType.toObject(oursType.decode(ourBytes), { longs: Number, enums: String });
        expect(viaUpstream).toEqual(viaOurs);
      }),
      { numRuns: 200 },
    );
  });
});
