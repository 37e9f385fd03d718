/**
 * The image_classification example's conv net: a dominant-colour classifier whose weights are
 * written down, not trained, so its answers can be stated. Pixels come in normalized to [-1, 1]
 * (x / 127.5 - 1, as image_preprocess does). A 1x1 convolution scores every pixel against each
 * colour prototype (a corner of the RGB cube, or mid gray): -|pixel - prototype|^2 scaled, which
 * is linear in the pixel up to a term all colours share. A softmax over the colours turns those
 * scores into a near one-hot vote per pixel, global average pooling counts the votes, and the
 * output is the log of each colour's share of the pixels, so a softmax of it (the
 * postprocess's) gives back the shares: a picture 70% red and 30% blue scores red 0.7, blue 0.3.
 */
import { GraphBuilder, type ModelProto } from './graph-builder.ts';
import { BATCH_DIM } from './models.ts';

/** Colour name -> prototype in normalized RGB, in output order. */
const PROTOTYPES: ReadonlyArray<readonly [string, readonly [number, number, number]]> = [
  ['black', [-1, -1, -1]],
  ['white', [1, 1, 1]],
  ['gray', [0, 0, 0]],
  ['red', [1, -1, -1]],
  ['green', [-1, 1, -1]],
  ['blue', [-1, -1, 1]],
  ['yellow', [1, 1, -1]],
  ['cyan', [-1, 1, 1]],
  ['magenta', [1, -1, 1]],
];

export const COLOR_LABELS: readonly string[] = PROTOTYPES.map(([name]) => name);

/** How sharply a pixel votes for its nearest prototype. */
const SHARPNESS = 8;
/** Keeps the log finite for colours no pixel voted for. */
const EPSILON = 1e-6;

/** pixels FP32 [batch, 3, size, size] -> logits FP32 [batch, 9], log shares of COLOR_LABELS. */
export function colorNet(size = 32): ModelProto {
  const classes = PROTOTYPES.length;
  // -s|x - p|^2 = s(2 x.p - |p|^2) - s|x|^2; the last term is the same for every colour.
  const weights = new Float32Array(classes * 3);
  const bias = new Float32Array(classes);
  PROTOTYPES.forEach(([, p], k) => {
    weights.set(
      p.map((c) => 2 * SHARPNESS * c),
      k * 3,
    );
    bias[k] = -SHARPNESS * (p[0] ** 2 + p[1] ** 2 + p[2] ** 2);
  });
  const g = new GraphBuilder('color_net');
  g.input('pixels', 'FP32', [BATCH_DIM, 3, size, size]);
  g.initializer('prototype_weights', 'FP32', [classes, 3, 1, 1], weights);
  g.initializer('prototype_bias', 'FP32', [classes], bias);
  g.initializer('epsilon', 'FP32', [], new Float32Array([EPSILON]));
  g.op('Conv', ['pixels', 'prototype_weights', 'prototype_bias'], 'pixel_scores', { kernel_shape: [1, 1] });
  g.op('Softmax', ['pixel_scores'], 'pixel_votes', { axis: 1 });
  g.op('GlobalAveragePool', ['pixel_votes'], 'shares_4d');
  g.op('Flatten', ['shares_4d'], 'shares', { axis: 1 });
  g.op('Add', ['shares', 'epsilon'], 'shares_positive');
  g.op('Log', ['shares_positive'], 'logits');
  g.output('logits', 'FP32', [BATCH_DIM, classes]);
  return g.build({ docString: `dominant colour: log share of pixels nearest to ${COLOR_LABELS.join(', ')}` });
}
