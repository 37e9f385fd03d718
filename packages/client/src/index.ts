export { BatchwiseClientError } from './errors.ts';
export { HttpClient, type GenerateOptions, type HttpClientOptions } from './http-client.ts';
export { GrpcClient, type GrpcClientOptions } from './grpc-client.ts';
/** gRPC status codes, to compare with BatchwiseClientError.grpcCode. */
export { status as GrpcStatus } from '@grpc/grpc-js';
export { DEFAULT_PROTO_DIR } from './grpc-protos.ts';
export { deserializeBytes, serializeBytes } from './tensor-data.ts';
/** The KServe v2 HTTP body of a request as HttpClient sends it, for load generators that pre-encode their requests. */
export { encodeHttpInferRequest, type HttpInferBody } from './http-infer-codec.ts';
export type * from './types.ts';
