import { join } from 'node:path';
import protobuf from 'protobufjs';
import { expect, it } from 'vitest';
import { describeWithTritonProtocol, TRITON_PROTOCOL_DIR } from '../../test-support/triton-protocol.ts';
import { PROTO_DIR } from './protos.ts';

function load(dir: string): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(dir, target);
  root.loadSync(['grpc_service.proto', 'health.proto'], { keepCase: true });
  root.resolveAll();
  return root;
}

/** Everything that decides the wire format of a type, nested types included. */
function wireShape(type: protobuf.ReflectionObject): unknown {
  if (type instanceof protobuf.Enum) return { enum: type.values };
  if (type instanceof protobuf.Service) {
    return Object.fromEntries(
      type.methodsArray.map((m) => [
        m.name,
        {
          request: m.resolvedRequestType!.fullName,
          response: m.resolvedResponseType!.fullName,
          requestStream: !!m.requestStream,
          responseStream: !!m.responseStream,
        },
      ]),
    );
  }
  const t = type as protobuf.Type;
  return {
    fields: Object.fromEntries(
      t.fieldsArray.map((f) => [
        f.name,
        {
          id: f.id,
          type: f.resolvedType ? f.resolvedType.fullName : f.type,
          repeated: f.repeated,
          map: f instanceof protobuf.MapField ? f.keyType : undefined,
          oneof: f.partOf?.name,
        },
      ]),
    ),
    nested: Object.fromEntries(t.nestedArray.map((n) => [n.name, wireShape(n)])),
  };
}

/** Top-level types and services declared in one of the two files (not model_config.proto). */
function declared(root: protobuf.Root): Map<string, protobuf.ReflectionObject> {
  const out = new Map<string, protobuf.ReflectionObject>();
  const visit = (ns: protobuf.NamespaceBase) => {
    for (const n of ns.nestedArray) {
      if (
        (n instanceof protobuf.Type || n instanceof protobuf.Service || n instanceof protobuf.Enum) &&
        /(grpc_service|health)\.proto$/.test(n.filename ?? '')
      ) {
        out.set(n.fullName, n);
      } else if (n instanceof protobuf.Namespace) visit(n);
    }
  };
  visit(root);
  return out;
}

describeWithTritonProtocol('our protos are wire-identical to Triton upstream', () => {
  const ours = load(PROTO_DIR);
  const upstream = load(TRITON_PROTOCOL_DIR);

  it('declares every upstream message, enum and service, with identical fields and methods', () => {
    const mine = declared(ours);
    const theirs = declared(upstream);
    expect(theirs.size).toBeGreaterThan(50);
    expect([...mine.keys()].sort()).toEqual([...theirs.keys()].sort());
    for (const [name, type] of theirs) {
      expect(wireShape(mine.get(name)!), name).toEqual(wireShape(type));
    }
  });

  it('a request encoded with upstream decodes identically with ours, and back', () => {
    const value = {
      model_name: 'simple',
      model_version: '1',
      id: 'x',
      parameters: { priority: { uint64_param: 3 }, flag: { bool_param: true } },
      inputs: [
        { name: 'A', datatype: 'INT64', shape: [2, 3], contents: { int64_contents: ['-9007199254740993', '5'] } },
        { name: 'B', datatype: 'BYTES', shape: [1], contents: { bytes_contents: [Buffer.from('hi')] } },
      ],
      outputs: [{ name: 'O', parameters: { classification: { int64_param: 2 } } }],
      raw_input_contents: [Buffer.from([1, 2, 3])],
    };
    const opts = { longs: String, bytes: Array, oneofs: true } as const;
    for (const [from, to] of [
      [upstream, ours],
      [ours, upstream],
    ] as const) {
      const encode = from.lookupType('inference.ModelInferRequest');
      const decode = to.lookupType('inference.ModelInferRequest');
      const bytes = encode.encode(encode.fromObject(value)).finish();
      expect(decode.toObject(decode.decode(bytes), opts)).toEqual(encode.toObject(encode.decode(bytes), opts));
    }
  });
});
