import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { etagIsContentMd5 } from './snapshot.ts';

const md5 = createHash('md5').update('model bytes').digest('hex');

describe('etagIsContentMd5', () => {
  it('trusts a 32-hex ETag of an unencrypted or SSE-S3 object as the MD5 of its bytes', () => {
    expect(etagIsContentMd5({ etag: md5 })).toBe(true);
    expect(etagIsContentMd5({ etag: md5.toUpperCase(), serverSideEncryption: '' })).toBe(true);
    expect(etagIsContentMd5({ etag: md5, serverSideEncryption: 'AES256' })).toBe(true);
  });

  it('does not for SSE-KMS, DSSE-KMS or SSE-C objects, whose 32-hex ETags are not MD5s', () => {
    expect(etagIsContentMd5({ etag: md5, serverSideEncryption: 'aws:kms' })).toBe(false);
    expect(etagIsContentMd5({ etag: md5, serverSideEncryption: 'aws:kms:dsse' })).toBe(false);
    expect(etagIsContentMd5({ etag: md5, sseCustomerAlgorithm: 'AES256' })).toBe(false);
    expect(etagIsContentMd5({ etag: md5, serverSideEncryption: 'AES256', sseCustomerAlgorithm: 'AES256' })).toBe(false);
  });

  it('does not for multipart ETags or anything else that is not 32 hex digits', () => {
    expect(etagIsContentMd5({ etag: `${md5}-3` })).toBe(false);
    expect(etagIsContentMd5({ etag: '' })).toBe(false);
    expect(etagIsContentMd5({ etag: 'mtime:1700000000000' })).toBe(false);
    expect(etagIsContentMd5({ etag: md5.slice(1) })).toBe(false);
  });
});
