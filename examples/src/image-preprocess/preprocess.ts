/**
 * PNG or JPEG bytes -> the conv net's input: FP32 planar RGB [3, height, width], each value
 * x / 127.5 - 1 (so 0..255 maps to -1..1, what color_net's prototypes are written in).
 */
import { decodeImage } from './decode.ts';
import { resizeToPlanarRgb } from './resize.ts';

export function normalize(planar: Float32Array): Float32Array {
  for (let i = 0; i < planar.length; i++) planar[i] = planar[i] / 127.5 - 1;
  return planar;
}

export function preprocessImage(bytes: Buffer, width: number, height: number): Float32Array {
  return normalize(resizeToPlanarRgb(decodeImage(bytes), width, height));
}
