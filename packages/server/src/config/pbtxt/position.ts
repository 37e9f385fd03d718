import { InferenceServerError } from '../../errors/errors.ts';

/** 1-based line and column (in UTF-16 code units) of a token in the source text. */
export interface Pos {
  readonly line: number;
  readonly col: number;
}

export function errorAt(fileName: string, pos: Pos, message: string): InferenceServerError {
  return new InferenceServerError('INVALID_ARG', `${fileName}:${pos.line}:${pos.col}: ${message}`);
}
