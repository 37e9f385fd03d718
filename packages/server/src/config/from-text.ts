import protobuf from 'protobufjs';
import type { ModelConfig } from './model-config.ts';
import type { FieldNode, MessageNode, ScalarNode, ValueNode } from './pbtxt/parser.ts';
import { errorAt, type Pos } from './pbtxt/position.ts';
import { defineEntry, INTEGER_RANGE, isFloatType, isIntegerType, isStringType } from './scalar-types.ts';
import { typeName } from './schema.ts';

type Obj = Record<string, unknown>;

/** Where a value goes, for error messages: field `dims` of inference.ModelInput. */
interface Target {
  readonly field: string;
  readonly message: string;
}

const where = (t: Target) => `field '${t.field}' of ${t.message}`;

/**
 * Converts the syntax tree of a config.pbtxt into a ModelConfig, checking every field
 * against the schema: enums become their names, 64-bit integers JS numbers, maps plain
 * objects. Omitted fields stay absent, except the ones ModelConfig requires.
 */
export function modelConfigFromText(tree: MessageNode, type: protobuf.Type, fileName: string): ModelConfig {
  const config = convertMessage(tree, type);
  config.name ??= '';
  config.max_batch_size ??= 0;
  config.input ??= [];
  config.output ??= [];
  return config as ModelConfig;

  function fail(pos: Pos, message: string): never {
    throw errorAt(fileName, pos, message);
  }

  function convertMessage(node: MessageNode, type: protobuf.Type): Obj {
    const out: Obj = {};
    const seen = new Map<string, Pos>();
    const oneofSet = new Map<string, string>();
    for (const entry of node.fields) {
      const field = type.fields[entry.name];
      if (!field) {
        fail(entry.pos, `unknown field '${entry.name}' in ${typeName(type)}${suggest(entry.name, type)}`);
      }
      const target = { field: field.name, message: typeName(type) };
      if (field.partOf) {
        const other = oneofSet.get(field.partOf.name);
        if (other !== undefined && other !== field.name) {
          fail(entry.pos, `${where(target)} is set along with '${other}'; both belong to oneof '${field.partOf.name}'`);
        }
        oneofSet.set(field.partOf.name, field.name);
      }
      if (field instanceof protobuf.MapField) {
        const map = (out[field.name] ??= {}) as Obj;
        for (const item of items(entry)) convertMapEntry(item, field, target, map);
      } else if (field.repeated) {
        const list = (out[field.name] ??= []) as unknown[];
        for (const item of items(entry)) list.push(convertValue(item, entry, field, target));
      } else {
        if (entry.value.kind === 'list') {
          fail(entry.value.pos, `${where(target)} is not repeated; a list [...] is not allowed`);
        }
        const first = seen.get(field.name);
        if (first) {
          fail(entry.pos, `${where(target)} is set more than once (first at ${first.line}:${first.col})`);
        }
        seen.set(field.name, entry.pos);
        out[field.name] = convertValue(entry.value, entry, field, target);
      }
    }
    return out;
  }

  function items(entry: FieldNode): readonly (ScalarNode | MessageNode)[] {
    return entry.value.kind === 'list' ? entry.value.items : [entry.value];
  }

  function convertValue(value: ValueNode, entry: FieldNode, field: protobuf.Field, target: Target): unknown {
    const resolved = field.resolve().resolvedType;
    if (resolved instanceof protobuf.Type) {
      if (value.kind !== 'message') fail(value.pos, `expected '{' for message ${where(target)}`);
      return convertMessage(value, resolved);
    }
    if (value.kind !== 'scalar') {
      fail(value.pos, `${where(target)} is a ${field.type}, not a message`);
    }
    if (!entry.colon) fail(entry.value.pos, `expected ':' after field name '${entry.name}'`);
    return convertScalar(value, field.type, resolved instanceof protobuf.Enum ? resolved : null, target);
  }

  function convertMapEntry(item: ScalarNode | MessageNode, field: protobuf.MapField, target: Target, map: Obj): void {
    if (item.kind !== 'message') {
      fail(item.pos, `expected '{ key: ... value: ... }' for map ${where(target)}`);
    }
    const valueType = field.resolve().resolvedType;
    let key: unknown;
    let value: unknown;
    const seen = new Set<string>();
    for (const part of item.fields) {
      if (part.name !== 'key' && part.name !== 'value') {
        fail(part.pos, `unknown field '${part.name}' in an entry of map ${where(target)}; expected 'key' or 'value'`);
      }
      if (seen.has(part.name)) fail(part.pos, `'${part.name}' is set more than once in an entry of map ${where(target)}`);
      seen.add(part.name);
      if (part.value.kind === 'list') fail(part.value.pos, `a list is not allowed as map ${part.name} of ${where(target)}`);
      const partTarget = { field: `${field.name}.${part.name}`, message: target.message };
      if (part.name === 'key') {
        if (part.value.kind !== 'scalar') fail(part.value.pos, `map key of ${where(target)} must be a ${field.keyType}`);
        if (!part.colon) fail(part.value.pos, `expected ':' after field name 'key'`);
        key = convertScalar(part.value, field.keyType, null, partTarget);
      } else if (valueType instanceof protobuf.Type) {
        if (part.value.kind !== 'message') fail(part.value.pos, `expected '{' for the value of map ${where(target)}`);
        value = convertMessage(part.value, valueType);
      } else {
        if (part.value.kind !== 'scalar') fail(part.value.pos, `the value of map ${where(target)} is a ${field.type}, not a message`);
        if (!part.colon) fail(part.value.pos, `expected ':' after field name 'value'`);
        value = convertScalar(part.value, field.type, valueType instanceof protobuf.Enum ? valueType : null, partTarget);
      }
    }
    key ??= isStringType(field.keyType) ? '' : field.keyType === 'bool' ? false : 0;
    value ??= valueType instanceof protobuf.Type ? {} : defaultScalar(field.type, valueType);
    defineEntry(map, String(key), value);
  }

  function convertScalar(node: ScalarNode, type: string, enumType: protobuf.Enum | null, target: Target): unknown {
    const found = node.token === 'string' ? 'a string' : `'${node.negative ? '-' : ''}${node.text}'`;
    const expected = (what: string): never => fail(node.pos, `expected ${what} for ${where(target)}, found ${found}`);

    if (enumType) {
      if (node.token === 'ident' && !node.negative) {
        if (Object.hasOwn(enumType.values, node.text)) return node.text;
        fail(
          node.pos,
          `unknown value '${node.text}' for enum ${where(target)}; expected one of ${Object.keys(enumType.values).join(', ')}`,
        );
      }
      if (node.token === 'number' && !node.isFloat) {
        const n = Number(parseInteger(node));
        const name = enumType.valuesById[n];
        if (name !== undefined) return name;
        fail(node.pos, `unknown number ${n} for enum ${where(target)}`);
      }
      return expected(`an enum name of ${typeName(enumType)}`);
    }
    if (isStringType(type)) {
      return node.token === 'string' ? node.text : expected('a quoted string');
    }
    if (type === 'bool') {
      if (!node.negative && node.token === 'ident') {
        if (['true', 'True', 't'].includes(node.text)) return true;
        if (['false', 'False', 'f'].includes(node.text)) return false;
      }
      if (!node.negative && node.token === 'number' && (node.text === '1' || node.text === '0')) {
        return node.text === '1';
      }
      return expected('true or false');
    }
    if (isIntegerType(type)) {
      if (node.token !== 'number' || node.isFloat) return expected(`an integer (${type})`);
      const value = parseInteger(node);
      const [min, max] = INTEGER_RANGE[type]!;
      if (value < min || value > max) fail(node.pos, `value ${value} is out of range for ${type} ${where(target)}`);
      if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < -BigInt(Number.MAX_SAFE_INTEGER)) {
        fail(
          node.pos,
          `value ${value} of ${where(target)} is beyond Number.MAX_SAFE_INTEGER (${Number.MAX_SAFE_INTEGER}) and cannot be represented exactly`,
        );
      }
      return value === 0n ? 0 : Number(value);
    }
    if (isFloatType(type)) {
      const sign = node.negative ? -1 : 1;
      if (node.token === 'ident') {
        const word = node.text.toLowerCase();
        if (word === 'inf' || word === 'infinity') return sign * Infinity;
        if (word === 'nan') return NaN;
        return expected(`a number (${type})`);
      }
      if (node.token !== 'number') return expected(`a number (${type})`);
      if (!node.isFloat) return sign * Number(parseInteger({ ...node, negative: false }));
      return sign * Number(node.text.replace(/[fF]$/, ''));
    }
    return fail(node.pos, `unsupported field type ${type} for ${where(target)}`);
  }
}

function parseInteger(node: ScalarNode): bigint {
  const text = node.text;
  const magnitude = /^0[0-7]+$/.test(text) ? BigInt(`0o${text.slice(1)}`) : BigInt(text);
  return node.negative ? -magnitude : magnitude;
}

function defaultScalar(type: string, resolved: protobuf.ReflectionObject | null): unknown {
  if (resolved instanceof protobuf.Enum) return resolved.valuesById[0] ?? Object.keys(resolved.values)[0];
  if (isStringType(type)) return '';
  if (type === 'bool') return false;
  return 0;
}

function suggest(name: string, type: protobuf.Type): string {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of Object.keys(type.fields)) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best ? ` (did you mean '${best}'?)` : '';
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}
