export * from './graph-builder.ts';
export * from './prng.ts';
export * from './models.ts';
export * from './examples.ts';
export * from './sentiment.ts';
export * from './colors.ts';
export * from './sequence-models.ts';
export * from './text-generation.ts';
