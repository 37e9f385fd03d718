/**
 * Server-Sent Events as the generate extension sends them (`data: <json>` events separated by a
 * blank line): the data of each event, in order, from a body that arrives in chunks of any size.
 */
export async function* sseData(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of body) {
    pending += decoder.decode(chunk, { stream: true });
    for (let end = eventEnd(pending); end; end = eventEnd(pending)) {
      const data = dataOf(pending.slice(0, end.at));
      pending = pending.slice(end.at + end.length);
      if (data !== undefined) yield data;
    }
  }
  const last = dataOf(pending + decoder.decode());
  if (last !== undefined) yield last;
}

/** Where the first event of `text` ends (a blank line, in any of the line endings SSE allows). */
function eventEnd(text: string): { at: number; length: number } | undefined {
  const match = /\r\n\r\n|\n\n|\r\r/.exec(text);
  return match ? { at: match.index, length: match[0].length } : undefined;
}

/** The `data` of one event (its data lines joined), or undefined when it has none (a comment, a blank). */
function dataOf(event: string): string | undefined {
  const lines = event.split(/\r\n|\n|\r/).filter((line) => line.startsWith('data:'));
  if (lines.length === 0) return undefined;
  return lines.map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n');
}
