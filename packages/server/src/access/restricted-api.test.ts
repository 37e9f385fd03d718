import { describe, expect, it } from 'vitest';
import { isAllowed, parseRestrictions } from './restricted-api.ts';

describe('restricted API flags', () => {
  it('parses groups, key and value; open groups stay open', () => {
    const table = parseRestrictions(['model-repository,model-config:Admin-Key=s3cret', 'inference:x=y']);
    expect(table.get('model-repository')?.header).toBe('admin-key');
    expect(table.get('model-config')?.header).toBe('admin-key');
    expect(isAllowed(table, 'model-repository', 's3cret')).toBe(true);
    expect(isAllowed(table, 'model-repository', 's3cre')).toBe(false);
    expect(isAllowed(table, 'model-repository', undefined)).toBe(false);
    expect(isAllowed(table, 'inference', 'y')).toBe(true);
    expect(isAllowed(table, 'health', undefined)).toBe(true);
  });

  it('adds the gRPC header prefix', () => {
    const table = parseRestrictions(['inference:key=v'], 'triton-grpc-protocol-');
    expect(table.get('inference')?.header).toBe('triton-grpc-protocol-key');
  });

  it('keeps values containing = and :', () => {
    const table = parseRestrictions(['logging:k=a=b:c']);
    expect(isAllowed(table, 'logging', 'a=b:c')).toBe(true);
  });

  it('rejects malformed flags without echoing the secret', () => {
    expect(() => parseRestrictions(['model-repository'])).toThrow(/<api>/);
    expect(() => parseRestrictions(['model-repository:key='])).toThrow(/<api>/);
    expect(() => parseRestrictions(['nope:key=v'])).toThrow(/unknown API group 'nope'/);
    expect(() => parseRestrictions(['inference:a=1', 'inference:b=2'])).toThrow(/more than once/);
    try {
      parseRestrictions(['model-repository:key']);
    } catch (e) {
      expect((e as Error).message).not.toContain('secret');
    }
  });
});
