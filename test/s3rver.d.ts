// s3rver ships no types; the tests use this much of it.
declare module 's3rver' {
  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory: string;
    configureBuckets?: { name: string; configs?: unknown[] }[];
    [option: string]: unknown;
  }
  export default class S3rver {
    constructor(options: S3rverOptions);
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
    /** The node:http server it runs on (set by run()). */
    readonly httpServer: import('node:http').Server;
  }
}
