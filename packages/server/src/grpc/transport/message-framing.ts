/**
 * gRPC's length-prefixed messages: a 1-byte compressed flag, a 4-byte big-endian length, then the
 * message. A call's DATA chunks are cut wherever the sender's frames were cut: a message may span
 * chunks and a chunk may hold several messages (a stream's), or end inside a prefix.
 */

export const PREFIX_BYTES = 5;

/** Where the reader hands on each whole message, still compressed when its flag says so. */
export interface MessageSink {
  framedMessage(message: Buffer, compressed: boolean): void;
}

/**
 * Cuts a call's DATA chunks into messages. A message that arrives in one chunk is handed on as a
 * view on that chunk (no copy, the common case for unary calls); one that spans chunks is
 * concatenated once, when its last byte has arrived (nothing is allocated for the length a prefix
 * declares before the bytes are there).
 */
export class MessageReader {
  readonly #maxBytes: number;
  readonly #sink: MessageSink;
  /** Bytes of a prefix cut by a chunk's end (0 while none). */
  #prefix: Buffer | undefined;
  #prefixBytes = 0;
  /** The message being gathered: its length, flag, and the parts so far (undefined between messages). */
  #length = -1;
  #compressed = false;
  #parts: Buffer[] = [];
  #partBytes = 0;

  constructor(maxBytes: number, sink: MessageSink) {
    this.#maxBytes = maxBytes;
    this.#sink = sink;
  }

  /** Whether bytes of an unfinished message (or prefix) are held: a call that ends here ended mid-message. */
  get midMessage(): boolean {
    return this.#prefixBytes > 0 || this.#length >= 0;
  }

  /**
   * Takes one chunk, handing on each message it completes. Returns the error text when a prefix
   * declares a message over the limit (grpc-js's wording); the reader is then of no further use.
   */
  push(chunk: Buffer): string | undefined {
    let offset = 0;
    const end = chunk.length;
    while (offset < end) {
      if (this.#length < 0) {
        // A prefix: read in place when whole in this chunk, else gathered.
        let length: number;
        let flag: number;
        if (this.#prefixBytes === 0 && end - offset >= PREFIX_BYTES) {
          flag = chunk[offset]!;
          length = chunk.readUInt32BE(offset + 1);
          offset += PREFIX_BYTES;
        } else {
          const prefix = (this.#prefix ??= Buffer.allocUnsafe(PREFIX_BYTES));
          const take = Math.min(PREFIX_BYTES - this.#prefixBytes, end - offset);
          chunk.copy(prefix, this.#prefixBytes, offset, offset + take);
          this.#prefixBytes += take;
          offset += take;
          if (this.#prefixBytes < PREFIX_BYTES) return undefined;
          this.#prefixBytes = 0;
          flag = prefix[0]!;
          length = prefix.readUInt32BE(1);
        }
        if (length > this.#maxBytes) return `Received message larger than max (${length} vs ${this.#maxBytes})`;
        const compressed = flag !== 0;
        if (end - offset >= length) {
          this.#sink.framedMessage(chunk.subarray(offset, offset + length), compressed);
          offset += length;
          continue;
        }
        this.#length = length;
        this.#compressed = compressed;
      }
      const take = Math.min(this.#length - this.#partBytes, end - offset);
      this.#parts.push(chunk.subarray(offset, offset + take));
      this.#partBytes += take;
      offset += take;
      if (this.#partBytes === this.#length) {
        const message = Buffer.concat(this.#parts, this.#length);
        const compressed = this.#compressed;
        this.#parts = [];
        this.#partBytes = 0;
        this.#length = -1;
        this.#sink.framedMessage(message, compressed);
      }
    }
    return undefined;
  }
}

/** One message with its prefix (uncompressed), as sent. */
export function frameMessage(message: Uint8Array): Buffer {
  const framed = Buffer.allocUnsafe(PREFIX_BYTES + message.byteLength);
  framed[0] = 0;
  framed.writeUInt32BE(message.byteLength, 1);
  framed.set(message, PREFIX_BYTES);
  return framed;
}
