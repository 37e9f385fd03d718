import { DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';

export const S3_BUCKET = 'models';

/** The SDK's default provider chain finds these, as an ECS task role's would be found. */
export function useS3rverCredentials(): void {
  process.env['AWS_ACCESS_KEY_ID'] = 'S3RVER';
  process.env['AWS_SECRET_ACCESS_KEY'] = 'S3RVER';
  process.env['AWS_REGION'] = 'us-east-1';
}

export interface TestS3 {
  readonly port: number;
  readonly client: S3Client;
  /** Every request this S3 server received (other clients' as well as the test's), in order of arrival. */
  readonly requests: readonly { readonly method: string; readonly url: string }[];
  /** s3://127.0.0.1:<port>/<bucket>/<prefix> */
  location(prefix: string): string;
  put(key: string, body: Uint8Array | string): Promise<unknown>;
  remove(key: string): Promise<unknown>;
  close(): Promise<void>;
}

/** A real S3-protocol server (s3rver) on 127.0.0.1 with one bucket, and a client for it. */
export async function startTestS3(directory: string, port = 0, bucket = S3_BUCKET): Promise<TestS3> {
  const server = new S3rver({ address: '127.0.0.1', port, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const bound = ((await server.run()) as { port: number }).port;
  const requests: { method: string; url: string }[] = [];
  server.httpServer.on('request', (request: { method?: string; url?: string }) =>
    requests.push({ method: request.method ?? '', url: request.url ?? '' }),
  );
  const client = new S3Client({
    endpoint: `http://127.0.0.1:${bound}`,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return {
    port: bound,
    client,
    requests,
    location: (prefix) => `s3://127.0.0.1:${bound}/${bucket}/${prefix}`,
    put: (key, body) => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body })),
    remove: (key) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })),
    close: async () => {
      client.destroy();
      // close() alone waits for keep-alive connections to go idle, and a server polling the bucket every
      // second may keep one busy for good (it hung a clean-clone run): S3 going away drops them all.
      const closed = server.close();
      server.httpServer.closeAllConnections();
      await closed;
    },
  };
}

export { waitFor } from './wait-for.ts';
