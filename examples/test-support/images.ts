/** Test images encoded with pngjs and jpeg-js: every pixel painted by a function of its position. */
import jpeg from 'jpeg-js';
import pngjs from 'pngjs';

export type Rgba = readonly [number, number, number, number];
export const RED: Rgba = [255, 0, 0, 255];
export const BLUE: Rgba = [0, 0, 255, 255];

function rgbaPixels(width: number, height: number, paint: (x: number, y: number) => Rgba): Buffer {
  const data = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) data.set(paint(x, y), (y * width + x) * 4);
  return data;
}

export function png(width: number, height: number, paint: (x: number, y: number) => Rgba): Buffer {
  const image = new pngjs.PNG({ width, height });
  rgbaPixels(width, height, paint).copy(image.data);
  return pngjs.PNG.sync.write(image);
}

export function jpegFile(width: number, height: number, paint: (x: number, y: number) => Rgba): Buffer {
  return jpeg.encode({ width, height, data: rgbaPixels(width, height, paint) }, 95).data;
}
