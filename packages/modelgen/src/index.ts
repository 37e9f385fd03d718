export * from './graph-builder.ts';
export * from './prng.ts';
export * from './models.ts';
export * from './examples.ts';
