import { connect, type Socket } from 'node:net';

/**
 * A lean client of Server-Sent Event streams (generate_stream), as lean-http.ts is of infer: one
 * keep-alive socket per stream at a time (node:net), the request written as bytes, the chunked
 * response read without decoding its events to text: an event is counted at its blank line, and an
 * error event (`data: {"error"...`) fails the stream with its text. undici's fetch with web streams
 * cost the shared cores about as much per token as the server did (issue 34), which capped how much
 * of the machine 16 streams could give the server.
 */
export class LeanSseClient {
  private readonly idle: SseConnection[] = [];
  private readonly all = new Set<SseConnection>();
  private readonly hostHeader: string;

  constructor(
    private readonly port: number,
    private readonly host: string,
  ) {
    this.hostHeader = `${host}:${port}`;
  }

  /**
   * POSTs `body` (JSON) to `path` and calls `onEvent` at each event as it arrives; resolves with the
   * number of events once the stream ends, or rejects with the server's error (a status other than
   * 200, or an error event).
   */
  stream(path: string, body: string, onEvent: () => void): Promise<number> {
    let idle = this.idle.pop();
    while (idle?.closed) idle = this.idle.pop();
    const connection = idle ?? new SseConnection(this.port, this.host, (c) => this.all.delete(c));
    this.all.add(connection);
    const bytes = Buffer.from(body);
    const request = Buffer.concat([
      Buffer.from(
        `POST ${path} HTTP/1.1\r\nHost: ${this.hostHeader}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n` +
          `Content-Length: ${bytes.byteLength}\r\n\r\n`,
        'latin1',
      ),
      bytes,
    ]);
    return connection.exchange(request, onEvent).finally(() => {
      if (!connection.closed) this.idle.push(connection);
    });
  }

  close(): void {
    for (const c of this.all) c.destroy();
    this.all.clear();
    this.idle.length = 0;
  }
}

const HEADER_END = Buffer.from('\r\n\r\n');
const CRLF = Buffer.from('\r\n');
/** How an error event starts (encodeGenerateError): `data: {"error":...}`. */
const ERROR_EVENT = 'data: {"error"';
const LF = 0x0a;

type State = 'head' | 'size' | 'data' | 'data-end' | 'length-body';

/** One keep-alive connection carrying one stream at a time: a chunked event stream, or an error body. */
class SseConnection {
  private readonly socket: Socket;
  private pending: { resolve(events: number): void; reject(error: Error): void; onEvent(): void } | undefined;
  /** Bytes not yet parsed: a head, a chunk-size line or an error body split across reads. */
  private carry: Buffer | undefined;
  private state: State = 'head';
  private status = 0;
  /** Bytes left of the current chunk (or of a Content-Length body). */
  private left = 0;
  private events = 0;
  /** The previous data byte was a line feed: a second one ends an event. */
  private afterLf = false;
  /** The first bytes of the event being read, up to ERROR_EVENT's length. */
  private eventHead = '';
  /** A non-200 answer's or an error event's bytes, for the message. */
  private failure: Buffer[] | undefined;
  closed = false;

  constructor(port: number, host: string, onClose: (c: SseConnection) => void) {
    this.socket = connect({ port, host, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    const fail = (error: Error) => {
      this.closed = true;
      onClose(this);
      this.settle(error);
    };
    this.socket.on('error', fail);
    this.socket.on('close', () => fail(new Error('connection closed')));
  }

  exchange(request: Buffer, onEvent: () => void): Promise<number> {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject, onEvent };
      this.state = 'head';
      this.events = 0;
      this.afterLf = false;
      this.eventHead = '';
      this.failure = undefined;
      this.socket.write(request);
    });
  }

  destroy(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    const data = this.carry ? Buffer.concat([this.carry, chunk]) : chunk;
    this.carry = undefined;
    let offset = 0;
    while (offset < data.length) {
      switch (this.state) {
        case 'head': {
          const end = data.indexOf(HEADER_END, offset);
          if (end < 0) return this.keep(data, offset);
          const head = data.toString('latin1', offset, end);
          this.status = Number(head.slice(9, 12));
          offset = end + HEADER_END.length;
          const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
          if (length) {
            this.state = 'length-body';
            this.left = Number(length[1]);
            this.failure = [];
            if (this.left === 0) this.settle(this.statusError());
          } else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
            this.state = 'size';
            if (this.status !== 200) this.failure = [];
          } else {
            this.socket.destroy(new Error(`a response neither chunked nor of a known length: ${head.split('\r\n')[0]}`));
            return;
          }
          break;
        }
        case 'size': {
          const end = data.indexOf(CRLF, offset);
          if (end < 0) return this.keep(data, offset);
          this.left = parseInt(data.toString('latin1', offset, end), 16);
          offset = end + 2;
          if (this.left === 0) {
            // The last chunk: its CRLF (no trailers) follows.
            this.state = 'data-end';
            this.left = -1;
          } else this.state = 'data';
          break;
        }
        case 'data': {
          const n = Math.min(this.left, data.length - offset);
          this.scan(data, offset, offset + n);
          offset += n;
          this.left -= n;
          if (this.left === 0) this.state = 'data-end';
          break;
        }
        case 'data-end': {
          if (data.length - offset < 2) return this.keep(data, offset);
          offset += 2;
          if (this.left === -1) {
            this.settle(this.failure ? this.statusError() : undefined);
            if (offset < data.length) this.socket.destroy(new Error('bytes after the end of a stream'));
            return;
          }
          this.state = 'size';
          break;
        }
        case 'length-body': {
          const n = Math.min(this.left, data.length - offset);
          this.failure!.push(Buffer.from(data.subarray(offset, offset + n)));
          offset += n;
          this.left -= n;
          if (this.left === 0) this.settle(this.statusError());
          break;
        }
      }
    }
  }

  /** Counts the events in data[from, to); an error event's bytes (and all after them) are kept for the message. */
  private scan(data: Buffer, from: number, to: number): void {
    if (this.failure) {
      this.failure.push(Buffer.from(data.subarray(from, to)));
      return;
    }
    for (let i = from; i < to; i++) {
      const byte = data[i]!;
      if (this.eventHead.length < ERROR_EVENT.length) {
        this.eventHead += String.fromCharCode(byte);
        if (this.eventHead === ERROR_EVENT) {
          this.failure = [Buffer.from(this.eventHead), Buffer.from(data.subarray(i + 1, to))];
          return;
        }
      }
      if (byte === LF && this.afterLf) {
        this.events++;
        this.pending?.onEvent();
        this.eventHead = '';
        this.afterLf = false;
      } else this.afterLf = byte === LF;
    }
  }

  private statusError(): Error {
    const text = Buffer.concat(this.failure ?? [])
      .toString('utf8')
      .trim();
    return new Error(this.status === 200 ? `an error event: ${text}` : `HTTP ${this.status}: ${text}`);
  }

  private keep(data: Buffer, offset: number): void {
    this.carry = Buffer.from(data.subarray(offset));
  }

  private settle(error: Error | undefined): void {
    const p = this.pending;
    this.pending = undefined;
    this.state = 'head';
    if (!p) return;
    if (error) p.reject(error);
    else p.resolve(this.events);
  }
}
