import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import type { S3RepositoryLocation } from './repository-url.ts';

export interface S3ClientOptions {
  /**
   * Static credentials (tests). @default - the SDK's default provider chain: environment,
   * shared config and SSO profiles, web identity (GitHub OIDC), ECS task role, EC2 instance role.
   */
  readonly credentials?: S3ClientConfig['credentials'];
  /** @default - AWS_REGION, else AWS_DEFAULT_REGION (as Triton reads it), else the SDK's profile; 'us-east-1' with an explicit endpoint */
  readonly region?: string;
  /** SDK attempts per request (its own retries with backoff). @default 3 */
  readonly maxAttempts?: number;
}

/**
 * One S3 client for a repository location. Checksums are computed and validated only when
 * the operation requires them: with stream bodies the SDK's default (aws-chunked framing
 * with trailing CRC) is stored verbatim into objects by some S3-compatible servers. Integrity
 * is checked by us instead: Content-MD5 on upload, size and MD5 ETag on download (where the
 * ETag is an MD5, see etagIsContentMd5), and the object's own checksum where it has one.
 */
export function createS3Client(location: S3RepositoryLocation, options: S3ClientOptions = {}): S3Client {
  const region =
    options.region ??
    process.env.AWS_REGION ??
    process.env.AWS_DEFAULT_REGION ??
    (location.endpoint !== undefined ? 'us-east-1' : undefined);
  const client = new S3Client({
    ...(region !== undefined && { region }),
    ...(location.endpoint !== undefined && { endpoint: location.endpoint }),
    forcePathStyle: location.forcePathStyle,
    // A bucket in another region than the client's answers with a redirect; follow it.
    followRegionRedirects: location.endpoint === undefined,
    ...(options.credentials !== undefined && { credentials: options.credentials }),
    ...(options.maxAttempts !== undefined && { maxAttempts: options.maxAttempts }),
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  // Outermost, around the SDK's retries and signing, where a missing credential surfaces.
  client.middlewareStack.add(
    (next) => async (args) => {
      try {
        return await next(args);
      } catch (error) {
        throw explainMissingCredentials(error, location);
      }
    },
    { step: 'initialize', name: 'batchwiseCredentialsHint' },
  );
  return client;
}

/**
 * The SDK's `Could not load credentials from any providers` names nothing to set. Said instead in
 * one line: the variables or the profile, and for an S3-compatible endpoint the key pair it wants.
 * The error keeps its name (CredentialsProviderError, which start-up retries as transient: a task
 * role's credentials may come a moment later) and the SDK's error as its cause.
 */
export function explainMissingCredentials(error: unknown, location: S3RepositoryLocation): unknown {
  const e = error as { name?: unknown; message?: unknown };
  if (e?.name !== 'CredentialsProviderError' || typeof e.message !== 'string') return error;
  const what =
    location.endpoint !== undefined
      ? `no credentials for ${location.url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to the access key pair ` +
        `the S3-compatible server at ${location.endpoint} was started with (or AWS_PROFILE to a profile that holds it)`
      : `no AWS credentials for ${location.url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN ` +
        'for temporary ones), or AWS_PROFILE to a profile of ~/.aws/config (after `aws sso login` for an SSO profile); ' +
        'on ECS or EC2 the task or instance role provides them';
  return Object.assign(new Error(`${what} (AWS SDK: ${e.message.split('\n')[0]})`, { cause: error }), { name: e.name });
}

/** S3 answered that the object (or bucket) does not exist. */
export function isNotFound(error: unknown): boolean {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

/** S3 refused a conditional request: the object is no longer the one named by If-Match. */
export function isPreconditionFailed(error: unknown): boolean {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'PreconditionFailed' || e?.$metadata?.httpStatusCode === 412;
}
