import { describe, expect, it } from 'vitest';
import { describeEndpoint, isLoopbackAddress, isModelControlExposed } from './model-control-exposure.ts';
import { parseRestrictions } from './restricted-api.ts';

describe('model-control exposure', () => {
  it('knows the loopback addresses, and takes every other address for one others can reach', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1'])
      expect(isLoopbackAddress(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.5', 'batchwise.internal', '128.0.0.1']) expect(isLoopbackAddress(host), host).toBe(false);
  });

  it('is exposed on a non-loopback address without a key on the model-repository group', () => {
    const open = parseRestrictions([]);
    const keyed = parseRestrictions(['model-repository:batchwise-key=secret']);
    const otherGroup = parseRestrictions(['inference:batchwise-key=secret']);
    expect(isModelControlExposed({ protocol: 'http', host: '0.0.0.0', port: 8000, restrictions: open })).toBe(true);
    expect(isModelControlExposed({ protocol: 'http', host: '0.0.0.0', port: 8000, restrictions: otherGroup })).toBe(true);
    expect(isModelControlExposed({ protocol: 'grpc', host: '0.0.0.0', port: 8001, restrictions: keyed })).toBe(false);
    expect(isModelControlExposed({ protocol: 'grpc', host: '127.0.0.1', port: 8001, restrictions: open })).toBe(false);
    expect(describeEndpoint({ protocol: 'grpc', host: '::', port: 8001 })).toBe('grpc [::]:8001');
  });
});
