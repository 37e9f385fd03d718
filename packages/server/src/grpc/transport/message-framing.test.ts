import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { frameMessage, MessageReader } from './message-framing.ts';

function reader(maxBytes = 1 << 20) {
  const messages: { message: Buffer; compressed: boolean }[] = [];
  return {
    messages,
    reader: new MessageReader(maxBytes, { framedMessage: (message, compressed) => messages.push({ message, compressed }) }),
  };
}

/** `bytes` cut at the given offsets (sorted, deduplicated, inside the buffer). */
function cut(bytes: Buffer, offsets: number[]): Buffer[] {
  const points = [...new Set(offsets.map((o) => o % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let last = 0;
  for (const p of [...points, bytes.length]) {
    if (p > last) chunks.push(bytes.subarray(last, p));
    last = Math.max(last, p);
  }
  return chunks;
}

describe('MessageReader', () => {
  it('hands on a message whole in one chunk as a view on that chunk', () => {
    const { messages, reader: r } = reader();
    const chunk = frameMessage(Buffer.from('hello'));
    expect(r.push(chunk)).toBeUndefined();
    expect(messages).toHaveLength(1);
    expect(messages[0]!.message.toString()).toBe('hello');
    expect(messages[0]!.message.buffer).toBe(chunk.buffer);
    expect(r.midMessage).toBe(false);
  });

  it('reads several messages from one chunk, and empty messages', () => {
    const { messages, reader: r } = reader();
    r.push(Buffer.concat([frameMessage(Buffer.from('a')), frameMessage(Buffer.alloc(0)), frameMessage(Buffer.from('bc'))]));
    expect(messages.map((m) => m.message.toString())).toEqual(['a', '', 'bc']);
  });

  it('reads messages however the chunks cut them, prefixes included', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        (bodies, offsets) => {
          const { messages, reader: r } = reader();
          const wire = Buffer.concat(bodies.map((b) => frameMessage(b)));
          for (const chunk of cut(wire, offsets)) expect(r.push(chunk)).toBeUndefined();
          expect(messages.map((m) => [...m.message])).toEqual(bodies.map((b) => [...b]));
          expect(r.midMessage).toBe(false);
        },
      ),
    );
  });

  it('says when the stream stops inside a prefix or a message', () => {
    const { reader: r } = reader();
    const wire = frameMessage(Buffer.from('hello'));
    r.push(wire.subarray(0, 3));
    expect(r.midMessage).toBe(true);
    r.push(wire.subarray(3, 7));
    expect(r.midMessage).toBe(true);
    r.push(wire.subarray(7));
    expect(r.midMessage).toBe(false);
  });

  it('passes the compressed flag on', () => {
    const { messages, reader: r } = reader();
    const framed = frameMessage(Buffer.from('z'));
    framed[0] = 1;
    r.push(framed);
    expect(messages[0]!.compressed).toBe(true);
  });

  it('refuses a message over the limit from its prefix, in grpc-js words, before its bytes arrive', () => {
    const { messages, reader: r } = reader(4);
    const prefix = Buffer.from([0, 0, 0, 0, 5]);
    expect(r.push(prefix)).toBe('Received message larger than max (5 vs 4)');
    expect(messages).toEqual([]);
    const { reader: exact } = reader(4);
    expect(exact.push(frameMessage(Buffer.alloc(4)))).toBeUndefined();
  });
});
