/**
 * PNG and JPEG bytes -> RGBA pixels, with pngjs and jpeg-js (pure JavaScript, so the model needs
 * no native build and bundles into one file). The format is told by the file's magic bytes, and
 * the size in the header is checked before anything is decoded, so a huge image is refused
 * instead of exhausting the worker's heap.
 */
/// <reference path="../jpeg-js-decoder.d.ts" />
import decodeJpegFile from 'jpeg-js/lib/decoder.js';
import pngjs from 'pngjs';

export interface RgbaImage {
  readonly width: number;
  readonly height: number;
  /** 4 bytes per pixel, row-major. */
  readonly data: Uint8Array;
}

/** 16 megapixels: 64 MiB of RGBA. */
export const MAX_PIXELS = 4096 * 4096;

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export class ImageDecodeError extends Error {}

export function decodeImage(bytes: Buffer): RgbaImage {
  if (bytes.length >= 24 && bytes.subarray(0, 8).equals(PNG_SIGNATURE)) return decodePng(bytes);
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return decodeJpeg(bytes);
  throw new ImageDecodeError('image is neither PNG nor JPEG');
}

function decodePng(bytes: Buffer): RgbaImage {
  // IHDR is the first chunk: width and height are big-endian at bytes 16 and 20.
  const width = bytes.readUInt32BE(16);
  const height = bytes.readUInt32BE(20);
  checkSize(width, height);
  try {
    const png = pngjs.PNG.sync.read(bytes);
    return { width: png.width, height: png.height, data: png.data };
  } catch (err) {
    throw new ImageDecodeError(`invalid PNG: ${(err as Error).message}`);
  }
}

function decodeJpeg(bytes: Buffer): RgbaImage {
  try {
    const image = decodeJpegFile(bytes, {
      useTArray: true,
      formatAsRGBA: true,
      maxResolutionInMP: MAX_PIXELS / 1e6,
      maxMemoryUsageInMB: 256,
    });
    checkSize(image.width, image.height);
    return { width: image.width, height: image.height, data: image.data };
  } catch (err) {
    if (err instanceof ImageDecodeError) throw err;
    throw new ImageDecodeError(`invalid JPEG: ${(err as Error).message}`);
  }
}

function checkSize(width: number, height: number): void {
  if (width < 1 || height < 1) throw new ImageDecodeError(`image is ${width}x${height}`);
  if (width * height > MAX_PIXELS) throw new ImageDecodeError(`image is ${width}x${height}, more than ${MAX_PIXELS} pixels`);
}
