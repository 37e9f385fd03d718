import { describe, expect, it } from 'vitest';
import { formatRepositoryLocation, parseRepositoryLocation, RepositoryLocationError } from './repository-url.ts';

describe('parseRepositoryLocation', () => {
  it('takes local paths (relative, absolute, file://)', () => {
    expect(parseRepositoryLocation('/srv/models')).toEqual({ kind: 'local', path: '/srv/models' });
    expect(parseRepositoryLocation('models').kind).toBe('local');
    expect(parseRepositoryLocation('file:///srv/models')).toEqual({ kind: 'local', path: '/srv/models' });
  });

  it('takes s3://bucket/prefix with the SDK endpoint settings', () => {
    expect(parseRepositoryLocation('s3://my-models/prod/vision')).toEqual({
      kind: 's3',
      bucket: 'my-models',
      prefix: 'prod/vision/',
      forcePathStyle: false,
      url: 's3://my-models/prod/vision',
    });
    expect(parseRepositoryLocation('s3://my-models')).toMatchObject({ bucket: 'my-models', prefix: '' });
    expect(parseRepositoryLocation('s3://my-models/')).toMatchObject({ prefix: '' });
    expect(parseRepositoryLocation('s3://my-models//a//b/')).toMatchObject({ prefix: 'a/b/' });
  });

  it("takes Triton's s3://host:port/bucket/prefix (HTTP, path style) and s3://https://host:port/...", () => {
    expect(parseRepositoryLocation('s3://127.0.0.1:4568/models/prod')).toMatchObject({
      kind: 's3',
      bucket: 'models',
      prefix: 'prod/',
      endpoint: 'http://127.0.0.1:4568',
      forcePathStyle: true,
    });
    expect(parseRepositoryLocation('s3://minio.internal:9000/models')).toMatchObject({
      endpoint: 'http://minio.internal:9000',
      bucket: 'models',
      prefix: '',
    });
    expect(parseRepositoryLocation('s3://https://minio.internal:9443/models/a')).toMatchObject({
      endpoint: 'https://minio.internal:9443',
      bucket: 'models',
      prefix: 'a/',
      forcePathStyle: true,
    });
    expect(parseRepositoryLocation('s3://http://localhost:4568/models/a')).toMatchObject({ endpoint: 'http://localhost:4568' });
  });

  it.each([
    ['', /empty location/],
    ['s3://', /no bucket name/],
    ['s3:///prefix', /no bucket name/],
    ['s3:/bucket/prefix', /starts with 's3:\/\/'/],
    ['gs://bucket/prefix', /unsupported scheme 'gs:\/\/'/],
    ['s3://Bad_Bucket/x', /not a valid bucket name/],
    ['s3://ab/x', /not a valid bucket name/],
    ['s3://host:99999/models', /outside 1\.\.65535/],
    ['s3://https://host/models', /needs a port/],
    ['s3://host:port/models', /not a bucket name/],
    ['s3://models/a/../b', /'\.' or '\.\.'/],
    ['s3://models/a?x=1', /'\?' or '#'/],
  ])('refuses %j', (location, message) => {
    expect(() => parseRepositoryLocation(location)).toThrow(RepositoryLocationError);
    expect(() => parseRepositoryLocation(location)).toThrow(message);
  });

  it('formats locations back', () => {
    expect(formatRepositoryLocation(parseRepositoryLocation('s3://127.0.0.1:4568/models/prod'))).toBe('s3://127.0.0.1:4568/models/prod/');
    expect(formatRepositoryLocation(parseRepositoryLocation('s3://https://h:1/models'))).toBe('s3://https://h:1/models/');
    expect(formatRepositoryLocation(parseRepositoryLocation('s3://models/x'))).toBe('s3://models/x/');
  });
});
