/**
 * The example model repository (`examples/model_repository`), in Triton's layout:
 * `<model>/config.pbtxt` and `<model>/<version>/model.onnx` (or `model.mjs` for JavaScript
 * models, `model.py` for Python ones). Everything here is generated and committed; a test checks
 * that regenerating it gives the same bytes. A few JavaScript models and the Python models are
 * written by hand instead (ExampleModel.handWritten), and the JavaScript models with npm
 * dependencies are bundled from examples/src.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { bundleModel } from './bundle.ts';
import { COLOR_LABELS, colorNet } from './colors.ts';
import { serializeModel, tritonConfigType, type ModelProto, type TensorDatatype } from './graph-builder.ts';
import { convNet, identity, scaler, simpleAddSub, simpleAddSubThroughInt32 } from './models.ts';
import { EMBEDDING_SIZE, SENTIMENT_LABELS, sentimentClassifier, sentimentEncoder, vocabularyText } from './sentiment.ts';
import { CONTEXT_LENGTH, CORPUS, nextTokenModel, VOCABULARY } from './text-generation.ts';
import { runningSum, tritonSimpleDynaSequence, tritonSimpleSequence } from './sequence-models.ts';

/** Where the bundled JavaScript models' sources are. */
export const EXAMPLE_SOURCES = new URL('../../../examples/src/', import.meta.url).pathname;

interface TensorConfig {
  readonly name: string;
  readonly datatype: TensorDatatype;
  readonly dims: readonly number[];
}

interface ConfigSpec {
  readonly name: string;
  readonly maxBatchSize: number;
  readonly inputs: readonly TensorConfig[];
  readonly outputs: readonly TensorConfig[];
  readonly maxQueueDelayMicroseconds?: number;
  readonly instanceCount?: number;
  /** A backend instead of the ONNX Runtime platform, e.g. 'js'. */
  readonly backend?: string;
  /** Triton's `parameters`, all as string_value. */
  readonly parameters?: Readonly<Record<string, string>>;
  /** Serve every version in the folder instead of the latest one. */
  readonly allVersions?: boolean;
  /** model_transaction_policy { decoupled: true }: a request gets zero, one or many responses. */
  readonly decoupled?: boolean;
}

function tensorsText(key: 'input' | 'output', tensors: readonly TensorConfig[]): string {
  const items = tensors.map(
    (t) => `  {\n    name: "${t.name}"\n    data_type: ${tritonConfigType(t.datatype)}\n    dims: [ ${t.dims.join(', ')} ]\n  }`,
  );
  return `${key} [\n${items.join(',\n')}\n]\n`;
}

function parametersText(parameters: Readonly<Record<string, string>>): string {
  return Object.entries(parameters)
    .map(([key, value]) => `parameters {\n  key: "${key}"\n  value: { string_value: "${value}" }\n}\n`)
    .join('');
}

/** `count` CPU instances, in Triton's formatting. */
function instanceGroupText(count: number): string {
  return `instance_group [\n  {\n    count: ${count}\n    kind: KIND_CPU\n  }\n]\n`;
}

/** config.pbtxt text in Triton's usual formatting. */
export function configPbtxt(spec: ConfigSpec): string {
  const runner = spec.backend === undefined ? 'platform: "onnxruntime_onnx"' : `backend: "${spec.backend}"`;
  let text = `name: "${spec.name}"\n${runner}\nmax_batch_size: ${spec.maxBatchSize}\n`;
  if (spec.allVersions) text += 'version_policy: { all { } }\n';
  if (spec.decoupled) text += 'model_transaction_policy {\n  decoupled: true\n}\n';
  text += tensorsText('input', spec.inputs);
  text += tensorsText('output', spec.outputs);
  if (spec.maxQueueDelayMicroseconds !== undefined) {
    text += `dynamic_batching {\n  max_queue_delay_microseconds: ${spec.maxQueueDelayMicroseconds}\n}\n`;
  }
  text += instanceGroupText(spec.instanceCount ?? 1);
  if (spec.parameters !== undefined) text += parametersText(spec.parameters);
  return text;
}

interface EnsembleStepSpec {
  readonly model: string;
  /** Step model input -> ensemble tensor. */
  readonly inputs: Readonly<Record<string, string>>;
  /** Step model output -> ensemble tensor. */
  readonly outputs: Readonly<Record<string, string>>;
}

function mapText(key: 'input_map' | 'output_map', map: Readonly<Record<string, string>>): string {
  return Object.entries(map)
    .map(([step, ensemble]) => `      ${key} {\n        key: "${step}"\n        value: "${ensemble}"\n      }\n`)
    .join('');
}

/** An ensemble's config.pbtxt (Triton's `platform: "ensemble"`), every step at its latest version. */
export function ensembleConfigPbtxt(
  spec: Omit<ConfigSpec, 'backend' | 'maxQueueDelayMicroseconds' | 'instanceCount'>,
  steps: readonly EnsembleStepSpec[],
): string {
  let text = `name: "${spec.name}"\nplatform: "ensemble"\nmax_batch_size: ${spec.maxBatchSize}\n`;
  text += tensorsText('input', spec.inputs);
  text += tensorsText('output', spec.outputs);
  const stepTexts = steps.map(
    (step) =>
      `    {\n      model_name: "${step.model}"\n      model_version: -1\n${mapText('input_map', step.inputs)}${mapText('output_map', step.outputs)}    }`,
  );
  text += `ensemble_scheduling {\n  step [\n${stepTexts.join(',\n')}\n  ]\n}\n`;
  return text;
}

export interface ExampleModel {
  readonly name: string;
  /** config.pbtxt text; absent for a model the server must auto-complete. */
  readonly config?: string;
  /** ONNX models by version folder. */
  readonly onnx?: Readonly<Record<string, () => ModelProto>>;
  /** Other generated files (vocabularies, labels), by path in the model folder. */
  readonly files?: Readonly<Record<string, string>>;
  /** JavaScript models bundled with their npm dependencies: path in the model folder -> entry point in examples/src. */
  readonly bundles?: Readonly<Record<string, string>>;
  /** Files written by hand and committed in the model folder; the generator leaves them alone. */
  readonly handWritten?: readonly string[];
}

const BATCHING_DELAY_MICROSECONDS = 500;

/** text BYTES -> input_ids and attention_mask INT64, BERT's WordPiece over the vocabulary in the version folder. */
function tokenizerModel(name: string, backend: 'js' | 'python', handWritten: readonly string[]): ExampleModel {
  return {
    name,
    config: configPbtxt({
      name,
      backend,
      maxBatchSize: 64,
      inputs: [{ name: 'text', datatype: 'BYTES', dims: [1] }],
      outputs: [
        { name: 'input_ids', datatype: 'INT64', dims: [-1] },
        { name: 'attention_mask', datatype: 'INT64', dims: [-1] },
      ],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
      parameters: { max_sequence_length: '16' },
    }),
    files: { '1/vocab.txt': vocabularyText() },
    handWritten,
  };
}

/** tokenizer -> encoder -> classifier -> postprocess, as a Triton ensemble. */
function textClassificationEnsemble(name: string, tokenizer: string, postprocess: string): ExampleModel {
  return {
    name,
    config: ensembleConfigPbtxt(
      {
        name,
        maxBatchSize: 16,
        inputs: [{ name: 'text', datatype: 'BYTES', dims: [1] }],
        outputs: [
          { name: 'labels', datatype: 'BYTES', dims: [-1] },
          { name: 'scores', datatype: 'FP32', dims: [-1] },
        ],
      },
      [
        { model: tokenizer, inputs: { text: 'text' }, outputs: { input_ids: 'input_ids', attention_mask: 'attention_mask' } },
        { model: 'encoder', inputs: { input_ids: 'input_ids', attention_mask: 'attention_mask' }, outputs: { embedding: 'embedding' } },
        { model: 'classifier', inputs: { embedding: 'embedding' }, outputs: { logits: 'logits' } },
        { model: postprocess, inputs: { logits: 'logits' }, outputs: { labels: 'labels', scores: 'scores' } },
      ],
    ),
    files: { '1/.gitkeep': '' },
  };
}

/**
 * The four steps of text_classification and the ensemble around them, then text_classification_py: the
 * same pipeline with its tokenizer and postprocess in Triton's Python backend form (hand-written model.py
 * files giving the JavaScript models' answers) around the same ONNX encoder and classifier.
 */
const TEXT_CLASSIFICATION: readonly ExampleModel[] = [
  tokenizerModel('tokenizer', 'js', ['1/model.mjs', '1/wordpiece.mjs']),
  {
    name: 'encoder',
    onnx: { 1: sentimentEncoder },
    config: configPbtxt({
      name: 'encoder',
      maxBatchSize: 64,
      inputs: [
        { name: 'input_ids', datatype: 'INT64', dims: [-1] },
        { name: 'attention_mask', datatype: 'INT64', dims: [-1] },
      ],
      outputs: [{ name: 'embedding', datatype: 'FP32', dims: [EMBEDDING_SIZE] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
    }),
  },
  {
    name: 'classifier',
    onnx: { 1: sentimentClassifier },
    config: configPbtxt({
      name: 'classifier',
      maxBatchSize: 64,
      inputs: [{ name: 'embedding', datatype: 'FP32', dims: [EMBEDDING_SIZE] }],
      outputs: [{ name: 'logits', datatype: 'FP32', dims: [SENTIMENT_LABELS.length] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
    }),
  },
  topKLabelsModel('postprocess', SENTIMENT_LABELS),
  textClassificationEnsemble('text_classification', 'tokenizer', 'postprocess'),
  tokenizerModel('tokenizer_py', 'python', ['1/model.py']),
  topKLabelsModel('postprocess_py', SENTIMENT_LABELS, 'python'),
  textClassificationEnsemble('text_classification_py', 'tokenizer_py', 'postprocess_py'),
];

/** The three steps of image_classification and the ensemble around them. */
const IMAGE_CLASSIFICATION: readonly ExampleModel[] = [
  {
    name: 'image_preprocess',
    config: configPbtxt({
      name: 'image_preprocess',
      backend: 'js',
      maxBatchSize: 16,
      inputs: [{ name: 'image', datatype: 'BYTES', dims: [1] }],
      outputs: [{ name: 'pixels', datatype: 'FP32', dims: [3, 32, 32] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
    }),
    bundles: { '1/model.mjs': 'image-preprocess/model.ts' },
  },
  {
    name: 'color_net',
    onnx: { 1: () => colorNet(32) },
    config: configPbtxt({
      name: 'color_net',
      maxBatchSize: 16,
      inputs: [{ name: 'pixels', datatype: 'FP32', dims: [3, 32, 32] }],
      outputs: [{ name: 'logits', datatype: 'FP32', dims: [COLOR_LABELS.length] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
    }),
  },
  topKLabelsModel('image_postprocess', COLOR_LABELS),
  {
    name: 'image_classification',
    config: ensembleConfigPbtxt(
      {
        name: 'image_classification',
        maxBatchSize: 16,
        inputs: [{ name: 'image', datatype: 'BYTES', dims: [1] }],
        outputs: [
          { name: 'labels', datatype: 'BYTES', dims: [-1] },
          { name: 'scores', datatype: 'FP32', dims: [-1] },
        ],
      },
      [
        { model: 'image_preprocess', inputs: { image: 'image' }, outputs: { pixels: 'pixels' } },
        { model: 'color_net', inputs: { pixels: 'pixels' }, outputs: { logits: 'logits' } },
        { model: 'image_postprocess', inputs: { logits: 'logits' }, outputs: { labels: 'labels', scores: 'scores' } },
      ],
    ),
    files: { '1/.gitkeep': '' },
  },
];

/**
 * Softmax and top-k label names over logits, labels in the folder: in JavaScript one bundled source for
 * both pipelines, in Python a hand-written model.py.
 */
function topKLabelsModel(name: string, labels: readonly string[], backend: 'js' | 'python' = 'js'): ExampleModel {
  return {
    name,
    config: configPbtxt({
      name,
      backend,
      maxBatchSize: 64,
      inputs: [{ name: 'logits', datatype: 'FP32', dims: [-1] }],
      outputs: [
        { name: 'labels', datatype: 'BYTES', dims: [-1] },
        { name: 'scores', datatype: 'FP32', dims: [-1] },
      ],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
      parameters: { top_k: '3', labels_file: 'labels.txt' },
    }),
    files: { 'labels.txt': labels.join('\n') + '\n' },
    ...(backend === 'js' ? { bundles: { '1/model.mjs': 'postprocess/model.ts' } } : { handWritten: ['1/model.py'] }),
  };
}

/** In-server calls: bls_router sends each request to version 1 or 2 of scaler by the size of its values. */
const MODEL_SELECTION: readonly ExampleModel[] = [
  {
    name: 'scaler',
    onnx: { 1: () => scaler(2), 2: () => scaler(0.5) },
    config: configPbtxt({
      name: 'scaler',
      maxBatchSize: 8,
      allVersions: true,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [-1] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', dims: [-1] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
    }),
  },
  {
    name: 'bls_router',
    config: configPbtxt({
      name: 'bls_router',
      backend: 'js',
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [-1] }],
      outputs: [
        { name: 'OUTPUT0', datatype: 'FP32', dims: [-1] },
        { name: 'VERSION', datatype: 'BYTES', dims: [1] },
      ],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
      parameters: { model: 'scaler', threshold: '100' },
    }),
    handWritten: ['1/model.mjs'],
  },
];

/** Width of running_sum's vectors. */
const RUNNING_SUM_WIDTH = 3;

/**
 * A stateful model (Triton's sequence batcher with implicit state): a running sum per sequence, kept
 * by the server between its requests. Sequences idle for a minute lose their slot.
 */
/** One `control_input` of `sequence_batching`, in Triton's formatting. */
function controlInput(name: string, kind: string, field = 'int32_false_true: [ 0, 1 ]'): string {
  return `    {\n      name: "${name}"\n      control [\n        {\n          kind: ${kind}\n          ${field}\n        }\n      ]\n    }`;
}

/** Triton's `simple_sequence` and `simple_dyna_sequence` examples: INPUT and OUTPUT, one INT32 each. */
function tritonSequenceConfig(
  name: string,
  sequenceBatching: readonly string[],
  controls: readonly string[],
  instances: number,
  runner = 'platform: "onnxruntime_onnx"',
): string {
  const io: TensorConfig[] = [{ name: 'INPUT', datatype: 'INT32', dims: [1] }];
  return (
    `name: "${name}"\n${runner}\nmax_batch_size: 8\n` +
    `sequence_batching {\n${sequenceBatching.map((line) => `  ${line}\n`).join('')}  control_input [\n${controls.join(',\n')}\n  ]\n}\n` +
    tensorsText('input', io) +
    tensorsText('output', [{ ...io[0]!, name: 'OUTPUT' }]) +
    instanceGroupText(instances)
  );
}

const STATEFUL: readonly ExampleModel[] = [
  // Triton's sequence examples, as its clients call them (simple_*_sequence_*_client.py; `-d` for the dyna one).
  {
    name: 'simple_sequence',
    onnx: { 1: tritonSimpleSequence },
    config: tritonSequenceConfig(
      'simple_sequence',
      [],
      [controlInput('START', 'CONTROL_SEQUENCE_START'), controlInput('READY', 'CONTROL_SEQUENCE_READY')],
      1,
    ),
  },
  {
    name: 'simple_dyna_sequence',
    onnx: { 1: tritonSimpleDynaSequence },
    config: tritonSequenceConfig(
      'simple_dyna_sequence',
      [
        'max_sequence_idle_microseconds: 10000000',
        'oldest {\n    max_candidate_sequences: 1024\n    max_queue_delay_microseconds: 10000\n  }',
      ],
      [
        controlInput('START', 'CONTROL_SEQUENCE_START'),
        controlInput('END', 'CONTROL_SEQUENCE_END'),
        controlInput('READY', 'CONTROL_SEQUENCE_READY'),
        controlInput('CORRID', 'CONTROL_SEQUENCE_CORRID', 'data_type: TYPE_UINT64'),
      ],
      2,
    ),
  },
  {
    // Triton's QA model for string sequence ids (its clients' `-d` runs use it beside simple_dyna_sequence).
    name: 'simple_string_dyna_sequence',
    config: tritonSequenceConfig(
      'simple_string_dyna_sequence',
      [
        'max_sequence_idle_microseconds: 10000000',
        'oldest {\n    max_candidate_sequences: 1024\n    max_queue_delay_microseconds: 10000\n  }',
      ],
      [
        controlInput('START', 'CONTROL_SEQUENCE_START'),
        controlInput('END', 'CONTROL_SEQUENCE_END'),
        controlInput('CORRID', 'CONTROL_SEQUENCE_CORRID', 'data_type: TYPE_STRING'),
      ],
      2,
      'backend: "js"',
    ),
    handWritten: ['1/model.mjs'],
  },
  {
    name: 'running_sum',
    onnx: { 1: () => runningSum(RUNNING_SUM_WIDTH) },
    config: `name: "running_sum"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "INPUT"
    data_type: TYPE_FP32
    dims: [ ${RUNNING_SUM_WIDTH} ]
  }
]
output [
  {
    name: "OUTPUT"
    data_type: TYPE_FP32
    dims: [ ${RUNNING_SUM_WIDTH} ]
  }
]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  direct { }
  state [
    {
      input_name: "ACC_IN"
      output_name: "ACC_OUT"
      data_type: TYPE_FP32
      dims: [ ${RUNNING_SUM_WIDTH} ]
      initial_state: {
        name: "zeros"
        data_type: TYPE_FP32
        dims: [ ${RUNNING_SUM_WIDTH} ]
        zero_data: true
      }
    }
  ]
}
instance_group [
  {
    count: 1
    kind: KIND_CPU
  }
]
`,
  },
];

/**
 * Text generation whose streams batch together, as Triton users build it: text_generation, an ensemble
 * of a JavaScript tokenizer (text_tokenizer), a decoupled JavaScript generator that decodes greedily by
 * calling next_token (a character-level trigram model of a corpus shipped here) once per token
 * (token_generator), and a JavaScript detokenizer (text_detokenizer). Concurrent streams' calls meet in
 * next_token's dynamic batcher, and their tokens in the detokenizer's. text_generation_single does the
 * same in one decoupled JavaScript model (text in, characters out), the ensemble's baseline in bench.
 */
const TEXT_GENERATION: readonly ExampleModel[] = [
  {
    name: 'next_token',
    onnx: { 1: nextTokenModel },
    config: configPbtxt({
      name: 'next_token',
      maxBatchSize: 64,
      inputs: [{ name: 'context', datatype: 'INT64', dims: [CONTEXT_LENGTH] }],
      outputs: [{ name: 'logits', datatype: 'FP32', dims: [VOCABULARY.length] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
    }),
    files: { 'corpus.txt': CORPUS },
  },
  {
    name: 'text_tokenizer',
    config: configPbtxt({
      name: 'text_tokenizer',
      backend: 'js',
      maxBatchSize: 16,
      inputs: [{ name: 'text_input', datatype: 'BYTES', dims: [1] }],
      outputs: [{ name: 'input_ids', datatype: 'INT64', dims: [-1] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
    }),
    files: { '1/vocabulary.json': `${JSON.stringify(VOCABULARY)}\n` },
    handWritten: ['1/model.mjs'],
  },
  {
    name: 'token_generator',
    config: configPbtxt({
      name: 'token_generator',
      backend: 'js',
      decoupled: true,
      maxBatchSize: 16,
      inputs: [
        { name: 'input_ids', datatype: 'INT64', dims: [-1] },
        { name: 'max_tokens', datatype: 'INT32', dims: [1] },
      ],
      outputs: [{ name: 'output_ids', datatype: 'INT64', dims: [1] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
      parameters: { next_token_model: 'next_token', context_length: String(CONTEXT_LENGTH) },
    }),
    handWritten: ['1/model.mjs'],
  },
  {
    name: 'text_detokenizer',
    config: configPbtxt({
      name: 'text_detokenizer',
      backend: 'js',
      maxBatchSize: 64,
      inputs: [{ name: 'output_ids', datatype: 'INT64', dims: [1] }],
      outputs: [{ name: 'text_output', datatype: 'BYTES', dims: [1] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
    }),
    files: { '1/vocabulary.json': `${JSON.stringify(VOCABULARY)}\n` },
    handWritten: ['1/model.mjs'],
  },
  {
    name: 'text_generation',
    config: ensembleConfigPbtxt(
      {
        name: 'text_generation',
        maxBatchSize: 16,
        inputs: [
          { name: 'text_input', datatype: 'BYTES', dims: [1] },
          { name: 'max_tokens', datatype: 'INT32', dims: [1] },
        ],
        outputs: [{ name: 'text_output', datatype: 'BYTES', dims: [1] }],
      },
      [
        { model: 'text_tokenizer', inputs: { text_input: 'text_input' }, outputs: { input_ids: 'input_ids' } },
        { model: 'token_generator', inputs: { input_ids: 'input_ids', max_tokens: 'max_tokens' }, outputs: { output_ids: 'output_ids' } },
        { model: 'text_detokenizer', inputs: { output_ids: 'output_ids' }, outputs: { text_output: 'text_output' } },
      ],
    ),
    files: { '1/.gitkeep': '' },
  },
  {
    name: 'text_generation_single',
    config: configPbtxt({
      name: 'text_generation_single',
      backend: 'js',
      decoupled: true,
      maxBatchSize: 16,
      inputs: [
        { name: 'text_input', datatype: 'BYTES', dims: [1] },
        { name: 'max_tokens', datatype: 'INT32', dims: [1] },
      ],
      outputs: [{ name: 'text_output', datatype: 'BYTES', dims: [1] }],
      maxQueueDelayMicroseconds: BATCHING_DELAY_MICROSECONDS,
      parameters: { next_token_model: 'next_token' },
    }),
    files: { '1/vocabulary.json': `${JSON.stringify(VOCABULARY)}\n` },
    handWritten: ['1/model.mjs'],
  },
];

/** The models of the example repository. */
export const EXAMPLE_MODELS: readonly ExampleModel[] = [
  {
    name: 'simple',
    onnx: { 1: simpleAddSub },
    config: configPbtxt({
      name: 'simple',
      maxBatchSize: 8,
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', dims: [16] },
        { name: 'INPUT1', datatype: 'INT32', dims: [16] },
      ],
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', dims: [16] },
        { name: 'OUTPUT1', datatype: 'INT32', dims: [16] },
      ],
      maxQueueDelayMicroseconds: 100,
    }),
  },
  // Triton's `simple` on strings and on INT8, as its client examples call them (simple_*_string_infer_client.py,
  // grpc_explicit_byte_content_client.py, simple_*_shm_string_client.py, grpc_explicit_int8_content_client.py).
  ...(['BYTES', 'INT8'] as const).map((datatype): ExampleModel => {
    const name = datatype === 'BYTES' ? 'simple_string' : 'simple_int8';
    return {
      name,
      onnx: { 1: () => simpleAddSubThroughInt32(name, datatype) },
      config: configPbtxt({
        name,
        maxBatchSize: 8,
        inputs: [
          { name: 'INPUT0', datatype, dims: [16] },
          { name: 'INPUT1', datatype, dims: [16] },
        ],
        outputs: [
          { name: 'OUTPUT0', datatype, dims: [16] },
          { name: 'OUTPUT1', datatype, dims: [16] },
        ],
        maxQueueDelayMicroseconds: 100,
      }),
    };
  }),
  {
    // Triton's decoupled `repeat_int32`, in JavaScript (simple_grpc_custom_repeat.py streams from it).
    name: 'repeat_int32',
    config: configPbtxt({
      name: 'repeat_int32',
      backend: 'js',
      maxBatchSize: 0,
      decoupled: true,
      inputs: [
        { name: 'IN', datatype: 'INT32', dims: [-1] },
        { name: 'DELAY', datatype: 'UINT32', dims: [-1] },
        { name: 'WAIT', datatype: 'UINT32', dims: [1] },
      ],
      outputs: [
        { name: 'OUT', datatype: 'INT32', dims: [1] },
        { name: 'IDX', datatype: 'UINT32', dims: [1] },
      ],
    }),
    handWritten: ['1/model.mjs'],
  },
  {
    // Triton's `simple_identity`, a Python model returning its strings (the second half of simple_*_string_infer_client.py).
    name: 'simple_identity',
    config: configPbtxt({
      name: 'simple_identity',
      backend: 'python',
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', dims: [-1] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'BYTES', dims: [-1] }],
    }),
    handWritten: ['1/model.py'],
  },
  {
    name: 'identity_fp32',
    onnx: { 1: () => identity('FP32', [-1]) },
    config: configPbtxt({
      name: 'identity_fp32',
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [-1] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', dims: [-1] }],
    }),
  },
  {
    name: 'identity_bytes',
    onnx: { 1: () => identity('BYTES', [1]) },
    config: configPbtxt({
      name: 'identity_bytes',
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', dims: [1] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'BYTES', dims: [1] }],
    }),
  },
  {
    // No config.pbtxt: the server must auto-complete it from the ONNX model.
    name: 'autocomplete_fp32',
    onnx: { 1: () => identity('FP32', [4]) },
  },
  {
    name: 'convnet',
    onnx: { 1: () => convNet() },
    config: configPbtxt({
      name: 'convnet',
      maxBatchSize: 16,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [3, 32, 32] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', dims: [10] }],
      maxQueueDelayMicroseconds: 500,
    }),
  },
  ...TEXT_CLASSIFICATION,
  ...IMAGE_CLASSIFICATION,
  ...MODEL_SELECTION,
  ...STATEFUL,
  ...TEXT_GENERATION,
];

export interface WrittenFile {
  readonly model: string;
  /** Path relative to the repository folder. */
  readonly path: string;
  readonly bytes: number;
}

/**
 * Writes the example repository into `dir` (creating it). Only the example models' generated
 * files are touched; hand-written files and other models in `dir` are left alone. `onFile` is
 * called once per file written.
 */
export async function writeExampleRepository(dir: string, onFile: (file: WrittenFile) => void = () => {}): Promise<WrittenFile[]> {
  const written: WrittenFile[] = [];
  const put = async (model: string, rel: string, data: Uint8Array | string): Promise<void> => {
    const full = join(dir, rel);
    await mkdir(join(full, '..'), { recursive: true });
    await writeFile(full, data);
    const file = { model, path: rel, bytes: typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength };
    written.push(file);
    onFile(file);
  };
  const bundles = new Map<string, Promise<string>>();
  const bundle = (entry: string) => bundles.get(entry) ?? bundles.set(entry, bundleModel(EXAMPLE_SOURCES, entry)).get(entry)!;
  for (const ex of EXAMPLE_MODELS) {
    if (ex.config !== undefined) await put(ex.name, join(ex.name, 'config.pbtxt'), ex.config);
    for (const [version, model] of Object.entries(ex.onnx ?? {}))
      await put(ex.name, join(ex.name, version, 'model.onnx'), serializeModel(model()));
    for (const [rel, text] of Object.entries(ex.files ?? {})) await put(ex.name, join(ex.name, rel), text);
    for (const [rel, entry] of Object.entries(ex.bundles ?? {})) await put(ex.name, join(ex.name, rel), await bundle(entry));
  }
  return written;
}
