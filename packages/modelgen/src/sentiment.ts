/**
 * The text_classification example's models: a WordPiece vocabulary and the two ONNX models that
 * read its ids. The weights mean something instead of being noise: every vocabulary entry has a
 * two-dimensional embedding (how positive, how negative), taken from a small sentiment lexicon;
 * the encoder averages the embeddings of a sentence's real tokens (the attention mask), and the
 * classifier calls a sentence positive or negative when one side leads by more than
 * NEUTRAL_MARGIN, neutral otherwise. It is a bag of words: "not good" counts as good.
 */
import { GraphBuilder, type ModelProto } from './graph-builder.ts';
import { BATCH_DIM } from './models.ts';

/** The special tokens first, with BERT's names; [PAD] is 0, as the tokenizer pads with it. */
const SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];

/** Every punctuation mark the basic tokenizer splits off as a token of its own (ASCII ones). */
const PUNCTUATION = Array.from('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~');

const NEUTRAL_WORDS = `a an the i you he she it we they me him her them my your his its our their this that these those
is are was were be been being am do does did have has had will would can could should
of to in on at for with from by about as into over after before than
and or but not no so very really too just also only again ever never all some any more most much
what who when where why how there here
movie film show book story plot actor actors acting music song scene ending
time day night year food place service people one thing way
watch see saw read go went make made get got feel felt think thought like look play`.split(/\s+/);

/** Word -> [positive, negative]. */
const POLAR_WORDS: Readonly<Record<string, readonly [number, number]>> = {
  love: [1, 0],
  loved: [1, 0],
  good: [1, 0],
  great: [1, 0],
  wonderful: [1, 0],
  excellent: [1, 0],
  amazing: [1, 0],
  fantastic: [1, 0],
  best: [1, 0],
  beautiful: [1, 0],
  brilliant: [1, 0],
  happy: [1, 0],
  enjoy: [1, 0],
  fun: [1, 0],
  perfect: [1, 0],
  nice: [1, 0],
  awesome: [1, 0],
  delightful: [1, 0],
  recommend: [1, 0],
  hate: [0, 1],
  hated: [0, 1],
  bad: [0, 1],
  terrible: [0, 1],
  awful: [0, 1],
  boring: [0, 1],
  worst: [0, 1],
  waste: [0, 1],
  poor: [0, 1],
  horrible: [0, 1],
  sad: [0, 1],
  dull: [0, 1],
  disappointing: [0, 1],
  annoying: [0, 1],
  ugly: [0, 1],
  mess: [0, 1],
  stupid: [0, 1],
};

/** Word endings as WordPiece continuations ("movies" = "movie" "##s"). */
const CONTINUATIONS = ['##s', '##ed', '##ing', '##ly', '##er', '##able', '##ful', '##ness', '##less'];

/** The labels in the classifier's output order. */
export const SENTIMENT_LABELS = ['negative', 'neutral', 'positive'] as const;

/** Positive minus negative (per token, averaged over the sentence) beyond which a sentence is not neutral. */
export const NEUTRAL_MARGIN = 0.05;
/** Logit scale, so a clear sentence gets a clear probability. */
const SHARPNESS = 10;

export const EMBEDDING_SIZE = 2;

/** The vocabulary in id order (a token's id is its index). */
export function sentimentVocabulary(): string[] {
  const vocabulary = [...SPECIAL_TOKENS, ...PUNCTUATION, ...NEUTRAL_WORDS, ...Object.keys(POLAR_WORDS), ...CONTINUATIONS];
  const repeated = vocabulary.filter((token, id) => vocabulary.indexOf(token) !== id);
  if (repeated.length > 0) throw new Error(`vocabulary lists ${repeated.join(', ')} twice`);
  return vocabulary;
}

/** vocab.txt as BERT writes it: one token per line. */
export function vocabularyText(): string {
  return sentimentVocabulary().join('\n') + '\n';
}

function embeddingTable(vocabulary: readonly string[]): Float32Array {
  const table = new Float32Array(vocabulary.length * EMBEDDING_SIZE);
  vocabulary.forEach((token, id) => table.set(POLAR_WORDS[token] ?? [0, 0], id * EMBEDDING_SIZE));
  return table;
}

/**
 * input_ids, attention_mask INT64 [batch, sequence] -> embedding FP32 [batch, 2]: the mean of
 * the ids' embeddings over the positions whose mask is 1 (Gather, masked sum, divided by the
 * mask's sum, at least 1).
 */
export function sentimentEncoder(): ModelProto {
  const vocabulary = sentimentVocabulary();
  const g = new GraphBuilder('encoder');
  const dims = [BATCH_DIM, 'sequence'];
  g.input('input_ids', 'INT64', dims);
  g.input('attention_mask', 'INT64', dims);
  g.initializer('embeddings', 'FP32', [vocabulary.length, EMBEDDING_SIZE], embeddingTable(vocabulary));
  g.initializer('axis_1', 'INT64', [1], new BigInt64Array([1n]));
  g.initializer('axis_2', 'INT64', [1], new BigInt64Array([2n]));
  g.initializer('one', 'FP32', [], new Float32Array([1]));
  g.op('Gather', ['embeddings', 'input_ids'], 'token_embeddings', { axis: 0 });
  g.op('Cast', ['attention_mask'], 'mask', { to: 1 /* FLOAT */ });
  g.op('Unsqueeze', ['mask', 'axis_2'], 'mask_3d');
  g.op('Mul', ['token_embeddings', 'mask_3d'], 'masked');
  g.op('ReduceSum', ['masked', 'axis_1'], 'sum', { keepdims: 0 });
  g.op('ReduceSum', ['mask_3d', 'axis_1'], 'count', { keepdims: 0 });
  g.op('Max', ['count', 'one'], 'count_at_least_1');
  g.op('Div', ['sum', 'count_at_least_1'], 'embedding');
  g.output('embedding', 'FP32', [BATCH_DIM, EMBEDDING_SIZE]);
  return g.build({ docString: 'masked mean of sentiment embeddings [positive, negative]' });
}

/**
 * embedding FP32 [batch, 2] -> logits FP32 [batch, 3] over SENTIMENT_LABELS:
 * negative = k(neg - pos), neutral = k * NEUTRAL_MARGIN, positive = k(pos - neg).
 */
export function sentimentClassifier(): ModelProto {
  const k = SHARPNESS;
  const g = new GraphBuilder('classifier');
  g.input('embedding', 'FP32', [BATCH_DIM, EMBEDDING_SIZE]);
  g.initializer('weights', 'FP32', [SENTIMENT_LABELS.length, EMBEDDING_SIZE], new Float32Array([-k, k, 0, 0, k, -k]));
  g.initializer('bias', 'FP32', [SENTIMENT_LABELS.length], new Float32Array([0, k * NEUTRAL_MARGIN, 0]));
  g.op('Gemm', ['embedding', 'weights', 'bias'], 'logits', { transB: 1 });
  g.output('logits', 'FP32', [BATCH_DIM, SENTIMENT_LABELS.length]);
  return g.build({ docString: `logits over ${SENTIMENT_LABELS.join(', ')}` });
}
