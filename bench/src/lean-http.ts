import { connect, type Socket } from 'node:net';
import { encodeHttpInferRequest, type InferRequest } from '@batchwise/client';
import type { SendRequest } from '@batchwise/client/load';

/**
 * A lean HTTP/1.1 load client, in the spirit of wrk: keep-alive sockets (node:net), the whole
 * request (request line, headers, body) encoded once and written as it is for every request, and
 * a response parser that reads only the status line, Content-Length and the body's length. It
 * counts answers per status, which wrk cannot time apart, and costs the shared cores a fraction of
 * what undici does (bench/README.md, "The lean client"). One request at a time per connection
 * (no pipelining): `connections` is the most requests outstanding.
 */
export class LeanHttpClient {
  private readonly idle: Connection[] = [];
  private readonly all = new Set<Connection>();
  /** Answers per status code since the client was created. */
  readonly statuses = new Map<number, number>();

  constructor(
    private readonly port: number,
    private readonly host: string,
    private readonly request: Buffer,
  ) {}

  /** Sends the request on an idle connection (opening one when none is) and resolves with the status. */
  send(): Promise<number> {
    let idle = this.idle.pop();
    // A connection the server closed while it was idle is dropped here.
    while (idle?.closed) idle = this.idle.pop();
    const connection = idle ?? new Connection(this.port, this.host, (c) => this.all.delete(c));
    this.all.add(connection);
    return connection.exchange(this.request).then((status) => {
      this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
      if (!connection.closed) this.idle.push(connection);
      return status;
    });
  }

  /** Answers per status since the client was created, as a plain object. */
  statusCounts(): Record<number, number> {
    return Object.fromEntries(this.statuses);
  }

  close(): void {
    for (const c of this.all) c.destroy();
    this.all.clear();
    this.idle.length = 0;
  }
}

/** What a non-200 answer rejects with in `sendOk`: one error per status, made once (no stack trace per answer). */
const STATUS_ERRORS = new Map<number, Error>();

/** A SendRequest for `measure` (@batchwise/client/load): 200 resolves, any other status rejects. */
export function sendOk(client: LeanHttpClient): SendRequest {
  return () =>
    client.send().then((status) => {
      if (status === 200) return;
      let error = STATUS_ERRORS.get(status);
      if (!error) STATUS_ERRORS.set(status, (error = new Error(`HTTP ${status}`)));
      throw error;
    });
}

/**
 * The bytes of one HTTP/1.1 POST to `/v2/models/<model>/infer` carrying `request` as
 * @batchwise/client encodes it (with `binary: true`, the binary tensor extension both ways).
 */
export function encodeInferHttpRequest(url: string, request: InferRequest): Buffer {
  const { host } = new URL(url);
  const { headers, body } = encodeHttpInferRequest(request);
  const lines = [
    `POST /v2/models/${encodeURIComponent(request.model)}/infer HTTP/1.1`,
    `Host: ${host}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    `Content-Length: ${body.byteLength}`,
  ];
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body]);
}

/** The bench's one-row FP32 request (`INPUT0`, `[1, width]`), binary both ways. */
export function fp32InferRequest(model: string, width: number): InferRequest {
  const data = Float32Array.from({ length: width }, (_, i) => (i % 13) / 13);
  return { model, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, width], data }], binary: true };
}

/** A LeanHttpClient sending fp32InferRequest to `model` at `url`. */
export function leanFp32Client(url: string, model: string, width: number): LeanHttpClient {
  const { hostname, port } = new URL(url);
  return new LeanHttpClient(Number(port), hostname, encodeInferHttpRequest(url, fp32InferRequest(model, width)));
}

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:\s*(\d+)/i;

/** One keep-alive connection with at most one exchange outstanding. */
class Connection {
  private readonly socket: Socket;
  /** Bytes of a response head not yet complete (a head split across reads). */
  private head: Buffer | undefined;
  private bodyLeft = 0;
  private status = 0;
  private pending: { resolve(status: number): void; reject(error: Error): void } | undefined;
  closed = false;

  constructor(port: number, host: string, onClose: (c: Connection) => void) {
    this.socket = connect({ port, host, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    const fail = (error: Error) => {
      this.closed = true;
      onClose(this);
      const p = this.pending;
      this.pending = undefined;
      p?.reject(error);
    };
    this.socket.on('error', fail);
    this.socket.on('close', () => fail(new Error('connection closed')));
  }

  exchange(request: Buffer): Promise<number> {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.socket.write(request);
    });
  }

  destroy(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.bodyLeft > 0) {
        const n = Math.min(this.bodyLeft, chunk.length - offset);
        this.bodyLeft -= n;
        offset += n;
        if (this.bodyLeft === 0) this.complete();
        continue;
      }
      const rest = chunk.subarray(offset);
      const headBytes = this.head?.length ?? 0;
      const data = this.head ? Buffer.concat([this.head, rest]) : rest;
      const end = data.indexOf(HEADER_END);
      if (end < 0) {
        this.head = Buffer.from(data);
        return;
      }
      this.head = undefined;
      const text = data.toString('latin1', 0, end);
      // "HTTP/1.1 200 OK"
      this.status = Number(text.slice(9, 12));
      const length = CONTENT_LENGTH.exec(text);
      if (!length) {
        this.socket.destroy(new Error(`a response without Content-Length: ${text.split('\r\n')[0]}`));
        return;
      }
      offset += end + HEADER_END.length - headBytes;
      this.bodyLeft = Number(length[1]);
      if (this.bodyLeft === 0) this.complete();
    }
  }

  private complete(): void {
    const p = this.pending;
    this.pending = undefined;
    if (p) p.resolve(this.status);
    else this.socket.destroy(new Error('a response nobody asked for'));
  }
}
