import { describe, expect, it } from 'vitest';
import { isGrpcContentType } from './grpc-server.ts';
import { parseGrpcTimeout } from './grpc-timeout.ts';

describe('parseGrpcTimeout', () => {
  it.each([
    ['1H', 3_600_000],
    ['2M', 120_000],
    ['3S', 3000],
    ['250m', 250],
    ['1500u', 1.5],
    ['2000000n', 2],
    ['99999999S', 99_999_999_000],
    [' 5 m ', 5],
  ])('%s -> %d ms', (value, ms) => {
    expect(parseGrpcTimeout(value)).toBe(ms);
  });

  it.each(['', '5', 'm', '123456789S', '5s', '-1S', '1.5S', '5mm'])('refuses %j', (value) => {
    expect(parseGrpcTimeout(value)).toBeUndefined();
  });
});

describe('isGrpcContentType', () => {
  it.each(['application/grpc', 'application/grpc+proto', 'application/grpc; charset=utf-8', 'Application/GRPC+proto;x=y'])(
    'takes %s',
    (value) => {
      expect(isGrpcContentType(value)).toBe(true);
    },
  );
  it.each([undefined, '', 'application/json', 'application/grpc-web', 'application/grpc+json', 'application/grpcx'])(
    'refuses %s',
    (value) => {
      expect(isGrpcContentType(value)).toBe(false);
    },
  );
});
