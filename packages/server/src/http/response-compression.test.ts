import { describe, expect, it } from 'vitest';
import { negotiateResponseEncoding } from './response-compression.ts';

describe('negotiateResponseEncoding, as Triton chooses', () => {
  it.each([
    [undefined, undefined],
    ['', undefined],
    ['gzip', 'gzip'],
    ['deflate', 'deflate'],
    ['gzip, deflate', 'gzip'],
    ['deflate, gzip', 'deflate'],
    ['gzip;q=0.5, deflate', 'deflate'],
    ['identity, gzip;q=0.9', undefined],
    ['identity;q=0.5, gzip', 'gzip'],
    ['gzip;q=0', undefined],
    ['br, zstd', undefined],
    ['*', undefined],
    ['GZIP', 'gzip'],
    ['gzip;q=abc, deflate;q=0.1', 'deflate'],
    ['gzip; q=0.2, deflate; q=0.1', 'gzip'],
  ])('%j -> %j', (accept, expected) => {
    expect(negotiateResponseEncoding(accept)).toBe(expected);
  });
});
