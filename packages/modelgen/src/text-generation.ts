/**
 * The text_generation example's next-token model: a character-level trigram model written down from
 * CORPUS, a short text shipped here (and beside the model, as corpus.txt). Given the last two
 * characters of a text (their ids in VOCABULARY), it answers a logit per character: the logarithm of
 * how often that character followed those two in the corpus (smoothed), or, for a pair the corpus
 * never had, of how often it followed the last one. Decoding greedily (the highest logit, the lowest
 * id on ties) is deterministic: the same prompt gives the same text, whoever runs the model.
 */
import { GraphBuilder, type ModelProto } from './graph-builder.ts';
import { BATCH_DIM } from './models.ts';

/** Written for this example: what the model learned to say. */
export const CORPUS = `the server takes requests from many clients and puts them in a queue.
when a model is free, the scheduler forms a batch from the requests that wait, and the model runs
the batch at once. a batch of many requests costs little more than one request, so the server
answers more requests in each second when they come together.
a stream is a request that gets many responses. a model that writes text sends one token at a
time, and the client reads each token as soon as it is sent. when many clients read streams at
the same time, their next tokens meet in the queue of the next token model, and they run as one
batch. the streams share the model, and each stream still gets its own text.
when a client goes away, the server stops the work it asked for: a request that waits leaves the
queue, and a request that runs sees that it was cancelled and ends.
`;

/** The characters the model knows, in id order: every character of the corpus but the line breaks, which read as spaces. */
export const VOCABULARY: readonly string[] = [...new Set(CORPUS.replace(/\n/g, ' '))].sort();

/** Characters of context the model reads: the last two. */
export const CONTEXT_LENGTH = 2;

/** The id of a character; one the model does not know reads as a space. */
export function charId(c: string): number {
  const id = VOCABULARY.indexOf(c.toLowerCase());
  return id >= 0 ? id : VOCABULARY.indexOf(' ');
}

/** The model's input for a text: the ids of its last CONTEXT_LENGTH characters, spaces before a shorter text. */
export function contextOf(text: string): number[] {
  const ids = [...text].map(charId);
  while (ids.length < CONTEXT_LENGTH) ids.unshift(charId(' '));
  return ids.slice(-CONTEXT_LENGTH);
}

/** The greedy choice over one row of logits: the highest, the lowest id on ties. */
export function argmax(logits: ArrayLike<number>, from = 0, count = logits.length - from): number {
  let best = 0;
  for (let i = 1; i < count; i++) if (logits[from + i]! > logits[from + best]!) best = i;
  return best;
}

/** Add-k smoothing of the counts, so every character keeps a finite logit. */
const SMOOTHING = 0.01;

/** The logits of every context pair (row a * V + b), from the corpus's trigram counts, backing off to bigrams. */
export function nextTokenLogits(): Float32Array {
  const v = VOCABULARY.length;
  const ids = [...CORPUS.replace(/\n/g, ' ')].map(charId);
  const trigrams = new Float64Array(v * v * v);
  const bigrams = new Float64Array(v * v);
  for (let i = 0; i + 2 < ids.length; i++) trigrams[(ids[i]! * v + ids[i + 1]!) * v + ids[i + 2]!]!++;
  for (let i = 0; i + 1 < ids.length; i++) bigrams[ids[i]! * v + ids[i + 1]!]!++;
  const logits = new Float32Array(v * v * v);
  for (let a = 0; a < v; a++) {
    for (let b = 0; b < v; b++) {
      const row = (a * v + b) * v;
      let seen = 0;
      for (let c = 0; c < v; c++) seen += trigrams[row + c]!;
      const counts = seen > 0 ? trigrams.subarray(row, row + v) : bigrams.subarray(b * v, b * v + v);
      let total = 0;
      for (let c = 0; c < v; c++) total += counts[c]! + SMOOTHING;
      for (let c = 0; c < v; c++) logits[row + c] = Math.log((counts[c]! + SMOOTHING) / total);
    }
  }
  return logits;
}

/**
 * `context` INT64 [batch, 2] (the ids of the last two characters) -> `logits` FP32 [batch, V]: the
 * row a * V + b of the trigram table, gathered.
 */
export function nextTokenModel(): ModelProto {
  const v = VOCABULARY.length;
  const g = new GraphBuilder('next_token');
  g.input('context', 'INT64', [BATCH_DIM, CONTEXT_LENGTH]);
  g.initializer('table', 'FP32', [v * v, v], nextTokenLogits());
  g.initializer('first', 'INT64', [], BigInt64Array.of(0n));
  g.initializer('second', 'INT64', [], BigInt64Array.of(1n));
  g.initializer('vocabulary_size', 'INT64', [], BigInt64Array.of(BigInt(v)));
  g.op('Gather', ['context', 'first'], 'a', { axis: 1 });
  g.op('Gather', ['context', 'second'], 'b', { axis: 1 });
  g.op('Mul', ['a', 'vocabulary_size'], 'a_rows');
  g.op('Add', ['a_rows', 'b'], 'row');
  g.op('Gather', ['table', 'row'], 'logits', { axis: 0 });
  g.output('logits', 'FP32', [BATCH_DIM, v]);
  return g.build({ docString: 'next-character logits of a trigram model of the text_generation example corpus' });
}
