import fc from 'fast-check';
import protobuf from 'protobufjs';
import type { ModelConfig } from '../src/config/model-config.ts';
import { INTEGER_RANGE } from '../src/config/scalar-types.ts';
import { modelConfigType } from '../src/config/schema.ts';

/**
 * fast-check arbitraries of ModelConfig built from the schema itself, so every message,
 * enum, map and oneof of model_config.proto is covered. Test support only.
 */
export function arbitraryModelConfig(options: { maxLength?: number } = {}): fc.Arbitrary<ModelConfig> {
  const maxLength = options.maxLength ?? 2;
  const type = modelConfigType();
  return arbitraryMessage(type, maxLength).map((config) => ({
    ...config,
    ...withoutAccelerators(config.optimization),
    name: (config.name as string | undefined) ?? '',
    max_batch_size: (config.max_batch_size as number | undefined) ?? 0,
    input: (config.input as ModelConfig['input'] | undefined) ?? [],
    output: (config.output as ModelConfig['output'] | undefined) ?? [],
  }));
}

/**
 * The parser checks execution accelerators' names and parameters against what ONNX Runtime for
 * Node.js has (config/execution-accelerators.ts, tested there): arbitrary ones are left out.
 */
function withoutAccelerators(optimization: unknown): { optimization?: Record<string, unknown> } {
  if (typeof optimization !== 'object' || optimization === null) return {};
  const { execution_accelerators: _, ...rest } = optimization as Record<string, unknown>;
  return { optimization: rest };
}

function arbitraryMessage(type: protobuf.Type, maxLength: number): fc.Arbitrary<Record<string, unknown>> {
  const fields: Record<string, fc.Arbitrary<unknown>> = {};
  for (const field of type.fieldsArray) fields[field.name] = arbitraryField(field, maxLength);
  return fc.record(fields, { requiredKeys: [] }).map((obj) => {
    const out: Record<string, unknown> = { ...obj };
    for (const oneof of type.oneofsArray) {
      const set = oneof.fieldsArray.filter((f) => out[f.name] !== undefined);
      for (const extra of set.slice(1)) delete out[extra.name];
    }
    return out;
  });
}

function arbitraryField(field: protobuf.Field, maxLength: number): fc.Arbitrary<unknown> {
  const resolved = field.resolve().resolvedType;
  if (field instanceof protobuf.MapField) {
    const value = resolved instanceof protobuf.Type ? arbitraryMessage(resolved, maxLength) : arbitraryScalar(field.type, resolved);
    const key = field.keyType === 'string' ? arbitraryString() : (arbitraryScalar(field.keyType, null) as fc.Arbitrary<number>).map(String);
    return fc.dictionary(key, value, { maxKeys: maxLength });
  }
  const single = resolved instanceof protobuf.Type ? arbitraryMessage(resolved, maxLength) : arbitraryScalar(field.type, resolved);
  return field.repeated ? fc.array(single, { maxLength }) : single;
}

// Object.prototype's names among the strings: config keys index the parser's own tables.
function arbitraryString(): fc.Arbitrary<string> {
  return fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary', maxLength: 8 }),
    fc.constantFrom('"', "'", '\\', '#', '\n'),
    fc.constantFrom('valueOf', 'constructor', 'toString', 'hasOwnProperty', '__proto__'),
  );
}

function arbitraryScalar(type: string, resolved: protobuf.ReflectionObject | null): fc.Arbitrary<unknown> {
  if (resolved instanceof protobuf.Enum) return fc.constantFrom(...Object.keys(resolved.values));
  if (type === 'string' || type === 'bytes') return arbitraryString();
  if (type === 'bool') return fc.boolean();
  if (type === 'float' || type === 'double') return fc.double();
  const range = INTEGER_RANGE[type];
  if (!range) throw new Error(`no arbitrary for ${type}`);
  const clamp = (v: bigint) =>
    Number(
      v < -BigInt(Number.MAX_SAFE_INTEGER)
        ? -BigInt(Number.MAX_SAFE_INTEGER)
        : v > BigInt(Number.MAX_SAFE_INTEGER)
          ? BigInt(Number.MAX_SAFE_INTEGER)
          : v,
    );
  const [min, max] = [clamp(range[0]), clamp(range[1])];
  return fc.oneof(
    fc.integer({ min: Math.max(min, -1000), max: Math.min(max, 1000) }),
    fc.constantFrom(min, max),
    fc.maxSafeNat().map((n) => Math.min(n, max)),
  );
}
