/** A repository refused what was asked of it: a missing model or version, bytes that fail verification, a bad name. */
export class RepositoryError extends Error {
  override readonly name = 'RepositoryError';
  constructor(
    readonly code: 'NOT_FOUND' | 'INTEGRITY' | 'INVALID',
    message: string,
  ) {
    super(message);
  }
}
