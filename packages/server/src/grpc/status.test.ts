import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { InferenceServerError, type ErrorCode } from '../core/index.ts';
import { grpcStatusOf, callStatusOf } from './status.ts';

describe('grpcStatusOf', () => {
  it.each([
    ['INVALID_ARG', status.INVALID_ARGUMENT],
    ['NOT_FOUND', status.NOT_FOUND],
    ['UNAVAILABLE', status.UNAVAILABLE],
    ['RESOURCE_EXHAUSTED', status.RESOURCE_EXHAUSTED],
    ['UNSUPPORTED', status.UNIMPLEMENTED],
    ['INTERNAL', status.INTERNAL],
    ['ALREADY_EXISTS', status.ALREADY_EXISTS],
    ['UNKNOWN', status.UNKNOWN],
    ['CANCELLED', status.CANCELLED],
    ['PERMISSION_DENIED', status.PERMISSION_DENIED],
  ] as [ErrorCode, status][])('%s -> %s', (code, expected) => {
    expect(grpcStatusOf(code)).toBe(expected);
  });
});

describe('callStatusOf', () => {
  it('keeps the message as details', () => {
    const e = callStatusOf(new InferenceServerError('NOT_FOUND', 'no such model'));
    expect(e).toEqual({ code: status.NOT_FOUND, details: 'no such model' });
  });
  it('anything else is INTERNAL', () => {
    expect(callStatusOf(new TypeError('boom'))).toEqual({ code: status.INTERNAL, details: 'boom' });
  });
});
