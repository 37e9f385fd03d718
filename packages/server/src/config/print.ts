import protobuf from 'protobufjs';
import { InferenceServerError } from '../errors/errors.ts';
import type { ModelConfig } from './model-config.ts';
import { INTEGER_RANGE, isFloatType, isIntegerType, isStringType } from './scalar-types.ts';
import { modelConfigType, typeName } from './schema.ts';

const INDENT = '  ';
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Canonical config.pbtxt: fields in schema order, two-space indent, messages as
 * `name { ... }`, repeated messages as `name [ {...}, {...} ]`, repeated scalars on one
 * line, maps as one `{ key: ... value: ... }` entry each.
 */
export function printModelConfig(config: ModelConfig): string {
  const lines: string[] = [];
  const type = modelConfigType();
  const top = { ...config } as Record<string, unknown>;
  // Always present after parsing, so an empty list needs no text.
  if (Array.isArray(top.input) && top.input.length === 0) delete top.input;
  if (Array.isArray(top.output) && top.output.length === 0) delete top.output;
  printFields(top, type, '', lines, 'ModelConfig');
  return lines.join('\n') + '\n';
}

function invalid(path: string, message: string): InferenceServerError {
  return new InferenceServerError('INVALID_ARG', `cannot print model config: ${path}: ${message}`);
}

function printFields(obj: unknown, type: protobuf.Type, indent: string, lines: string[], path: string): void {
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) {
    throw invalid(path, `expected an object for ${typeName(type)}`);
  }
  const record = obj as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (record[key] !== undefined && !Object.hasOwn(type.fields, key)) {
      throw invalid(`${path}.${key}`, `not a field of ${typeName(type)}`);
    }
  }
  for (const oneof of type.oneofsArray) {
    const set = oneof.fieldsArray.filter((f) => record[f.name] !== undefined).map((f) => f.name);
    if (set.length > 1) throw invalid(path, `${set.join(' and ')} both set, but oneof '${oneof.name}' allows one`);
  }
  for (const field of type.fieldsArray) {
    const value = record[field.name];
    if (value === undefined) continue;
    const fieldPath = `${path}.${field.name}`;
    const resolved = field.resolve().resolvedType;
    if (field instanceof protobuf.MapField) {
      printMap(value, field, indent, lines, fieldPath);
    } else if (field.repeated) {
      if (!Array.isArray(value)) throw invalid(fieldPath, 'expected an array');
      if (resolved instanceof protobuf.Type) {
        if (value.length === 0) {
          lines.push(`${indent}${field.name} []`);
          continue;
        }
        lines.push(`${indent}${field.name} [`);
        value.forEach((item, i) => {
          lines.push(`${indent}${INDENT}{`);
          printFields(item, resolved, indent + INDENT + INDENT, lines, `${fieldPath}[${i}]`);
          lines.push(`${indent}${INDENT}}${i < value.length - 1 ? ',' : ''}`);
        });
        lines.push(`${indent}]`);
      } else {
        const items = value.map((v, i) => formatScalar(v, field.type, resolved, `${fieldPath}[${i}]`));
        lines.push(`${indent}${field.name}: [${items.length ? ` ${items.join(', ')} ` : ''}]`);
      }
    } else if (resolved instanceof protobuf.Type) {
      printMessage(field.name, value, resolved, indent, lines, fieldPath);
    } else {
      lines.push(`${indent}${field.name}: ${formatScalar(value, field.type, resolved, fieldPath)}`);
    }
  }
}

function printMessage(name: string, value: unknown, type: protobuf.Type, indent: string, lines: string[], path: string): void {
  const inner: string[] = [];
  printFields(value, type, indent + INDENT, inner, path);
  if (inner.length === 0) {
    lines.push(`${indent}${name} {}`);
  } else {
    lines.push(`${indent}${name} {`, ...inner, `${indent}}`);
  }
}

function printMap(value: unknown, field: protobuf.MapField, indent: string, lines: string[], path: string): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(path, 'expected an object for a map');
  }
  const entries = Object.entries(value);
  if (entries.length === 0) {
    lines.push(`${indent}${field.name}: []`);
    return;
  }
  const valueType = field.resolve().resolvedType;
  for (const [key, entryValue] of entries) {
    const entryPath = `${path}[${JSON.stringify(key)}]`;
    lines.push(`${indent}${field.name} {`);
    lines.push(`${indent}${INDENT}key: ${formatKey(key, field.keyType, entryPath)}`);
    if (valueType instanceof protobuf.Type) {
      printMessage('value', entryValue, valueType, indent + INDENT, lines, entryPath);
    } else {
      lines.push(`${indent}${INDENT}value: ${formatScalar(entryValue, field.type, valueType, entryPath)}`);
    }
    lines.push(`${indent}}`);
  }
}

function formatKey(key: string, keyType: string, path: string): string {
  if (isStringType(keyType)) return formatScalar(key, keyType, null, path);
  if (keyType === 'bool') {
    if (key !== 'true' && key !== 'false') throw invalid(path, 'expected map key true or false');
    return key;
  }
  if (!/^(0|-?[1-9][0-9]*)$/.test(key)) throw invalid(path, `expected an integer map key (${keyType})`);
  return formatScalar(Number(key), keyType, null, path);
}

function formatScalar(value: unknown, type: string, resolved: protobuf.ReflectionObject | null, path: string): string {
  if (resolved instanceof protobuf.Enum) {
    if (typeof value === 'string' && Object.hasOwn(resolved.values, value)) return value;
    throw invalid(path, `expected a value name of enum ${typeName(resolved)}, got ${JSON.stringify(value)}`);
  }
  if (isStringType(type)) {
    if (typeof value !== 'string') throw invalid(path, `expected a string, got ${typeof value}`);
    if (LONE_SURROGATE.test(value)) throw invalid(path, 'string is not well-formed Unicode');
    return quote(value);
  }
  if (type === 'bool') {
    if (typeof value !== 'boolean') throw invalid(path, `expected a boolean, got ${typeof value}`);
    return String(value);
  }
  if (isIntegerType(type)) {
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
      throw invalid(path, `expected a safe integer (${type}), got ${String(value)}`);
    }
    const [min, max] = INTEGER_RANGE[type]!;
    if (BigInt(value) < min || BigInt(value) > max) throw invalid(path, `${value} is out of range for ${type}`);
    return String(value === 0 ? 0 : value);
  }
  if (isFloatType(type)) {
    if (typeof value !== 'number') throw invalid(path, `expected a number, got ${typeof value}`);
    if (Number.isNaN(value)) return 'nan';
    if (value === Infinity) return 'inf';
    if (value === -Infinity) return '-inf';
    return Object.is(value, -0) ? '-0' : String(value);
  }
  throw invalid(path, `unsupported field type ${type}`);
}

function quote(value: string): string {
  let out = '"';
  for (const c of value) {
    const code = c.codePointAt(0)!;
    if (c === '"') out += '\\"';
    else if (c === '\\') out += '\\\\';
    else if (c === '\n') out += '\\n';
    else if (c === '\r') out += '\\r';
    else if (c === '\t') out += '\\t';
    else if (code < 0x20 || code === 0x7f) out += `\\${code.toString(8).padStart(3, '0')}`;
    else out += c;
  }
  return out + '"';
}
