import { describe, expect, it } from 'vitest';
import { DEFAULT_ROLLBACK, parseCanaryDeclaration, printCanaryDeclaration } from './canary-declaration.ts';

const minimal = { stable_version: '1', canary_version: '2', canary_weight: 5 };
const parse = (json: unknown) => parseCanaryDeclaration(JSON.stringify(json), 'm/canary.json');

describe('canary.json', () => {
  it('reads a minimal declaration with the default stickiness and rollback thresholds', () => {
    expect(parse(minimal)).toEqual({
      stableVersion: '1',
      canaryVersion: '2',
      canaryWeight: 5,
      stickiness: 'header',
      rollback: DEFAULT_ROLLBACK,
    });
  });

  it('reads every field, and numbers as versions', () => {
    const full = {
      stable_version: 3,
      canary_version: '04',
      canary_weight: 12.5,
      stickiness: 'parameter',
      rollback: { window_seconds: 30, min_requests: 20, max_error_rate_increase: 0.01, max_p99_ratio: 1.5 },
    };
    expect(parse(full)).toEqual({
      stableVersion: '3',
      canaryVersion: '4',
      canaryWeight: 12.5,
      stickiness: 'parameter',
      rollback: { windowSeconds: 30, minRequests: 20, maxErrorRateIncrease: 0.01, maxP99Ratio: 1.5 },
    });
  });

  it('prints what it parses', () => {
    const declaration = parse({ ...minimal, stickiness: 'none', rollback: { min_requests: 7 } });
    expect(parseCanaryDeclaration(printCanaryDeclaration(declaration))).toEqual(declaration);
  });

  it.each([
    ['{', /m\/canary.json: not valid JSON/],
    ['[]', /the declaration must be a JSON object/],
    [JSON.stringify({ ...minimal, weight: 5 }), /unknown field 'weight'/],
    [JSON.stringify({ ...minimal, rollback: { window: 5 } }), /unknown field 'rollback.window'/],
    [JSON.stringify({ canary_version: '2', canary_weight: 5 }), /stable_version must be a version number/],
    [JSON.stringify({ ...minimal, canary_version: 'two' }), /canary_version must be a version number such as "2", not "two"/],
    [JSON.stringify({ ...minimal, canary_version: '1' }), /canary_version must differ from stable_version/],
    [JSON.stringify({ ...minimal, canary_weight: 101 }), /canary_weight must be between 0 and 100, not 101/],
    [JSON.stringify({ ...minimal, canary_weight: '5' }), /canary_weight must be a number, not "5"/],
    [JSON.stringify({ ...minimal, stickiness: 'cookie' }), /stickiness must be "header", "parameter" or "none", not "cookie"/],
    [JSON.stringify({ ...minimal, rollback: 3 }), /rollback must be a JSON object/],
    [JSON.stringify({ ...minimal, rollback: { min_requests: 2.5 } }), /rollback.min_requests must be a whole number/],
    [JSON.stringify({ ...minimal, rollback: { max_error_rate_increase: 2 } }), /rollback.max_error_rate_increase must be between 0 and 1/],
    [JSON.stringify({ ...minimal, rollback: { max_p99_ratio: 0.5 } }), /rollback.max_p99_ratio must be between 1 and/],
    [JSON.stringify({ ...minimal, rollback: { window_seconds: 0 } }), /rollback.window_seconds must be between 0.1 and/],
  ])('refuses %s, naming the field', (text, message) => {
    expect(() => parseCanaryDeclaration(text, 'm/canary.json')).toThrow(message);
  });
});
