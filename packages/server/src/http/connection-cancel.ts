import { setMaxListeners } from 'node:events';
import type { Socket } from 'node:net';
import { listenedAbortController } from '../protocol/abort-listeners.ts';

/**
 * What the HTTP frontend keeps per connection rather than per request (issue 34): one AbortSignal,
 * aborted when the connection closes, shared by the requests it carries (a request on a connection
 * that closed before its reply went is cancelled; one that was answered no longer listens), and the
 * callbacks of requests that hold something until then. A keep-alive connection carries thousands of
 * requests; none of them pays for an AbortController or a close listener of its own.
 */
export interface Connection {
  readonly signal: AbortSignal;
  /** Called once when the connection closes; delete a callback once it is no longer needed. */
  readonly onClose: Set<() => void>;
}

const connections = new WeakMap<Socket, Connection>();

export function connectionOf(socket: Socket): Connection {
  let connection = connections.get(socket);
  if (connection) return connection;
  const cancel = listenedAbortController();
  // Pipelined requests each listen while in flight: no warning past ten.
  setMaxListeners(0, cancel.signal);
  const created: Connection = { signal: cancel.signal, onClose: new Set() };
  connections.set(socket, created);
  socket.once('close', () => {
    cancel.abort();
    for (const callback of created.onClose) callback();
    created.onClose.clear();
  });
  return created;
}
