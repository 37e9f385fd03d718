/**
 * A bare fastify endpoint that answers a KServe binary infer request with the same bytes it
 * received, shaped like the server's reply: the floor of what any HTTP server on Node costs.
 * Run as a child process; prints {"port": N} when listening.
 */
import { servePeer } from './peer-server.ts';

await servePeer((input) => ({ name: 'OUTPUT0', datatype: input.datatype, shape: input.shape, bytes: input.bytes }));
