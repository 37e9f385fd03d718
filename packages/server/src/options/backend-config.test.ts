import { describe, expect, it } from 'vitest';
import { backendByteSetting, parseBackendConfigFlags, unappliedBackendSettings } from './backend-config.ts';

describe('--backend-config', () => {
  it("reads Triton's forms, by backend and for all", () => {
    const config = parseBackendConfigFlags([
      'python,shm-default-byte-size=4194304',
      'python,shm-growth-byte-size=65536',
      'default-max-batch-size=8',
    ]);
    expect(backendByteSetting(config, 'python', 'shm-default-byte-size')).toBe(4194304);
    expect(backendByteSetting(config, 'python', 'shm-growth-byte-size')).toBe(65536);
    expect(backendByteSetting(config, 'onnxruntime', 'shm-default-byte-size')).toBeUndefined();
    expect(unappliedBackendSettings(config)).toEqual(['default-max-batch-size']);
  });

  it('names what it does not apply, and refuses what it cannot read', () => {
    expect(unappliedBackendSettings(parseBackendConfigFlags(['onnxruntime,enable-global-threadpool=1']))).toEqual([
      'onnxruntime,enable-global-threadpool',
    ]);
    expect(() => parseBackendConfigFlags(['python'])).toThrow(/must be <backend>,<setting>=<value>/);
    expect(() =>
      backendByteSetting(parseBackendConfigFlags(['python,shm-default-byte-size=1MB']), 'python', 'shm-default-byte-size'),
    ).toThrow(/positive number of bytes/);
  });
});
