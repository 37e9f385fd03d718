import type { ErrorCode } from '../core/index.ts';

/** The HTTP status of each error code, as Triton's HTTP frontend maps them. */
export function httpStatusOf(code: ErrorCode): number {
  switch (code) {
    case 'INVALID_ARG':
    case 'ALREADY_EXISTS':
    case 'UNKNOWN':
    case 'CANCELLED':
      return 400;
    case 'PERMISSION_DENIED':
      return 403;
    case 'NOT_FOUND':
      return 404;
    case 'UNAVAILABLE':
    case 'RESOURCE_EXHAUSTED':
      return 503;
    case 'UNSUPPORTED':
      return 501;
    case 'INTERNAL':
      return 500;
  }
}
