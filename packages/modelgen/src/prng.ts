/**
 * mulberry32: a tiny seeded PRNG. Integer arithmetic plus one exact division, so the same seed
 * gives the same numbers (and the same model bytes) on every platform and Node version.
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` floats uniform in [-limit, limit), from `next`. */
export function uniformFloat32(next: () => number, count: number, limit: number): Float32Array {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = (next() * 2 - 1) * limit;
  return out;
}
