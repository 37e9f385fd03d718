/**
 * Bilinear resize of RGBA pixels into planar RGB (channel, row, column), composited over white
 * where the image is transparent. Hand-written because the pure-JavaScript resizers on npm are
 * either parts of large image toolkits (jimp, image-js) or browser-first (pica), and sharp needs
 * native libvips binaries: one small function keeps the model a single dependency-light bundle.
 *
 * Sample positions use pixel centres (OpenCV's INTER_LINEAR, PIL without antialiasing): output
 * pixel x reads source position (x + 0.5) * sourceWidth / width - 0.5, clamped to the edges.
 */
import type { RgbaImage } from './decode.ts';

/** Values 0..255, length 3 * width * height. */
export function resizeToPlanarRgb(image: RgbaImage, width: number, height: number): Float32Array {
  const out = new Float32Array(3 * width * height);
  const plane = width * height;
  const xs = samplePositions(image.width, width);
  const ys = samplePositions(image.height, height);
  const pixel = (x: number, y: number, channel: number): number => {
    const at = (y * image.width + x) * 4;
    const alpha = image.data[at + 3] / 255;
    return image.data[at + channel] * alpha + 255 * (1 - alpha);
  };
  for (let y = 0; y < height; y++) {
    const { low: y0, high: y1, weight: wy } = ys[y];
    for (let x = 0; x < width; x++) {
      const { low: x0, high: x1, weight: wx } = xs[x];
      for (let c = 0; c < 3; c++) {
        const top = pixel(x0, y0, c) * (1 - wx) + pixel(x1, y0, c) * wx;
        const bottom = pixel(x0, y1, c) * (1 - wx) + pixel(x1, y1, c) * wx;
        out[c * plane + y * width + x] = top * (1 - wy) + bottom * wy;
      }
    }
  }
  return out;
}

interface Sample {
  readonly low: number;
  readonly high: number;
  /** Weight of `high`; `low` gets 1 - weight. */
  readonly weight: number;
}

function samplePositions(sourceSize: number, size: number): Sample[] {
  const scale = sourceSize / size;
  return Array.from({ length: size }, (_, i) => {
    const position = Math.min(Math.max((i + 0.5) * scale - 0.5, 0), sourceSize - 1);
    const low = Math.floor(position);
    return { low, high: Math.min(low + 1, sourceSize - 1), weight: position - low };
  });
}
