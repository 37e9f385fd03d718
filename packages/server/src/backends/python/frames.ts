/**
 * The frames of protocol.ts on the socket to a stub: `uint32 LE headerBytes | uint32 LE dataBytes |
 * header JSON | data`. FrameReader cuts a stream of chunks into frames without copying a frame that
 * arrived in one chunk.
 */
const PREFIX_BYTES = 8;

/** A frame's parts, ready for a socket's writes (a large data buffer is never concatenated). */
export function encodeFrame(header: unknown, data?: Uint8Array): Buffer[] {
  const json = Buffer.from(JSON.stringify(header));
  const prefix = Buffer.allocUnsafe(PREFIX_BYTES);
  prefix.writeUInt32LE(json.byteLength, 0);
  prefix.writeUInt32LE(data?.byteLength ?? 0, 4);
  if (!data || data.byteLength === 0) return [Buffer.concat([prefix, json])];
  // Small data joins the header: one write, one wake-up of the reader.
  if (data.byteLength <= 4096) return [Buffer.concat([prefix, json, data])];
  return [Buffer.concat([prefix, json]), Buffer.from(data.buffer, data.byteOffset, data.byteLength)];
}

export interface Frame {
  readonly header: unknown;
  /** The frame's data (empty when none): a view on the chunk it came in when it came in one, 8-byte aligned. */
  readonly data: Buffer;
}

/**
 * Data whose tensors any typed array can view: its slices start at multiples of 8 from its start,
 * so the data itself must too (a frame's data sits anywhere in the chunk it came in: copied then).
 */
function aligned(data: Buffer): Buffer {
  if (data.byteOffset % 8 === 0) return data;
  const copy = Buffer.allocUnsafeSlow(data.byteLength);
  data.copy(copy);
  return copy;
}

export class FrameReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  /** Every complete frame the chunk finishes, in order. */
  push(chunk: Buffer): Frame[] {
    let buffer = chunk;
    if (this.pendingBytes > 0) {
      this.pending.push(chunk);
      buffer = Buffer.concat(this.pending, this.pendingBytes + chunk.byteLength);
      this.pending = [];
      this.pendingBytes = 0;
    }
    const frames: Frame[] = [];
    let offset = 0;
    while (buffer.byteLength - offset >= PREFIX_BYTES) {
      const headerBytes = buffer.readUInt32LE(offset);
      const dataBytes = buffer.readUInt32LE(offset + 4);
      const end = offset + PREFIX_BYTES + headerBytes + dataBytes;
      if (end > buffer.byteLength) break;
      const headerStart = offset + PREFIX_BYTES;
      const header: unknown = JSON.parse(buffer.toString('utf8', headerStart, headerStart + headerBytes));
      frames.push({ header, data: aligned(buffer.subarray(headerStart + headerBytes, end)) });
      offset = end;
    }
    if (offset < buffer.byteLength) {
      const rest = buffer.subarray(offset);
      this.pending.push(rest);
      this.pendingBytes = rest.byteLength;
    }
    return frames;
  }
}
