import { describe, expect, it } from 'vitest';
import { sseData } from './sse.ts';

async function collect(chunks: string[]): Promise<string[]> {
  const out: string[] = [];
  for await (const data of sseData(
    (async function* () {
      for (const c of chunks) yield Buffer.from(c);
    })(),
  ))
    out.push(data);
  return out;
}

describe('sseData', () => {
  it('reads events split anywhere across chunks, in every line ending', async () => {
    expect(await collect(['data: {"a":1}\n', '\ndata: {"b"', ':2}\n\n'])).toEqual(['{"a":1}', '{"b":2}']);
    expect(await collect(['data: x\r\n\r\ndata:y\r\rdata: z'])).toEqual(['x', 'y', 'z']);
  });

  it('joins data lines of one event and skips comments', async () => {
    expect(await collect([': keep-alive\n\ndata: one\ndata: two\n\n'])).toEqual(['one\ntwo']);
  });
});
