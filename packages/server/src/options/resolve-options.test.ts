import { describe, expect, it } from 'vitest';
import { attributeOf, resolveServerOptions, serveOptionsFrom } from './resolve-options.ts';
import { SERVE_FLAGS } from './serve-flags.ts';

describe('serve options, from the one declaration', () => {
  it('gives startServer the declared defaults for whatever is unset', () => {
    const options = resolveServerOptions({ modelRepositories: ['/models'], grpcPort: 0 });
    expect(options).toMatchObject({
      modelRepositories: ['/models'],
      grpcPort: 0,
      httpPort: 8000,
      metricsPort: 8002,
      host: '0.0.0.0',
      grpcKeepaliveTimeMs: 30_000,
      grpcKeepaliveTimeoutMs: 20_000,
      grpcMaxMessageBytes: 256 * 1024 * 1024,
      maxBodyBytes: 256 * 1024 * 1024,
      modelLoadFilesMaxBytes: 128 * 1024 * 1024,
      httpKeepAliveTimeoutMs: 65_000,
      exitTimeoutMs: 30_000,
      shutdownGraceMs: 5000,
      requestTimeoutMs: 60_000,
      modelControlMode: 'none',
      strictReadiness: true,
      exitOnError: false,
      strictModelConfig: false,
      loadModels: [],
      cacheConfig: [],
    });
    expect(options.grpcHost).toBeUndefined();
    expect(options.maxRequestElements).toBeUndefined();
  });

  it('reads flags under their attribute names, converting units', () => {
    const options = serveOptionsFrom(
      { modelRepository: ['/a', '/b'], httpKeepAliveTimeoutSecs: 90, shutdownGraceSecs: 0.5, grpcKeepaliveTime: 100, logVerbose: 1 },
      {},
    );
    expect(options).toMatchObject({
      modelRepositories: ['/a', '/b'],
      httpKeepAliveTimeoutMs: 90_000,
      shutdownGraceMs: 500,
      grpcKeepaliveTimeMs: 100,
      logVerboseLevel: 1,
      logInfo: true,
    });
  });

  it('combines flags that set one option as Triton does: --http-max-input-size wins, --disable-auto-complete-config ORs, --response-cache-byte-size appends', () => {
    expect(serveOptionsFrom({ httpMaxBodyBytes: 10, httpMaxInputSize: 20 }, {}).maxBodyBytes).toBe(20);
    expect(serveOptionsFrom({ httpMaxBodyBytes: 10 }, {}).maxBodyBytes).toBe(10);
    expect(serveOptionsFrom({ strictModelConfig: true, disableAutoCompleteConfig: false }, {}).strictModelConfig).toBe(true);
    expect(serveOptionsFrom({ strictModelConfig: false, disableAutoCompleteConfig: true }, {}).strictModelConfig).toBe(true);
    expect(serveOptionsFrom({ cacheConfig: ['local,size=100'], responseCacheByteSize: 50 }, {}).cacheConfig).toEqual([
      'local,size=100',
      'local,size=50',
    ]);
    expect(serveOptionsFrom({ responseCacheByteSize: 50 }, {}).cacheConfig).toEqual(['local,size=50']);
  });

  it('takes BATCHWISE_CLOUDWATCH_METRICS and BATCHWISE_MODEL_REPOSITORY_KEY from the environment', () => {
    expect(serveOptionsFrom({}, { BATCHWISE_CLOUDWATCH_METRICS: '1' }).cloudwatchMetrics).toBe(true);
    expect(serveOptionsFrom({ cloudwatchMetrics: false }, { BATCHWISE_CLOUDWATCH_METRICS: '1' }).cloudwatchMetrics).toBe(false);
    expect(serveOptionsFrom({}, {}).cloudwatchMetrics).toBe(false);
    const keyed = serveOptionsFrom({ httpRestrictedApi: ['inference:k=v'] }, { BATCHWISE_MODEL_REPOSITORY_KEY: 's3cret' });
    expect(keyed.httpRestrictedApi).toEqual(['inference:k=v', 'model-repository:batchwise-key=s3cret']);
    expect(keyed.grpcRestrictedProtocol).toEqual(['model-repository:batchwise-key=s3cret']);
  });

  it('declares each flag once, with a meaning, and a default or a reason for none', () => {
    const flags = SERVE_FLAGS.map((d) => d.flag);
    expect(new Set(flags).size).toBe(flags.length);
    expect(new Set(flags.map(attributeOf)).size).toBe(flags.length);
    for (const declaration of SERVE_FLAGS) {
      expect(declaration.meaning, declaration.flag).not.toBe('');
      const described = 'default' in declaration || 'defaultText' in declaration || 'required' in declaration;
      expect(described, `${declaration.flag} has a default, a default in words, or is required`).toBe(true);
    }
  });
});
