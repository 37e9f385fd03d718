export const MODEL_FILTER_FLAG = '--model-filter';

/**
 * --model-filter: the models of the repositories this server serves, by name or by prefix
 * (`resnet50,bert-*`). A model outside it is never listed, loaded or looked up here, so it answers
 * as a model the repositories do not have. One fleet's groups share one repository this way, each
 * serving its own models (infra's `modelGroups`).
 */
export interface ModelFilter {
  admits(modelName: string): boolean;
  /** The entries as given, for messages: `resnet50, bert-*`. */
  readonly description: string;
}

/** One entry: a model's name, or a prefix followed by `*` (`*` alone admits every model). */
const ENTRY = /^[^*,\s]*\*?$/;

/**
 * The filter of the flag's values (each a comma-separated list, the flag repeatable); undefined
 * when none was given. Throws naming the flag on an empty entry or a `*` anywhere but at the end.
 */
export function parseModelFilter(values: readonly string[]): ModelFilter | undefined {
  if (values.length === 0) return undefined;
  const entries = values.flatMap((value) => value.split(',')).map((entry) => entry.trim());
  for (const entry of entries) {
    if (entry === '' || !ENTRY.test(entry)) {
      throw new Error(
        `${MODEL_FILTER_FLAG} '${values.join(',')}': '${entry}' is neither a model name nor a prefix followed by * ` +
          '(entries are separated by commas)',
      );
    }
  }
  const names = new Set(entries.filter((entry) => !entry.endsWith('*')));
  const prefixes = entries.filter((entry) => entry.endsWith('*')).map((entry) => entry.slice(0, -1));
  return {
    admits: (modelName) => names.has(modelName) || prefixes.some((prefix) => modelName.startsWith(prefix)),
    description: entries.join(', '),
  };
}
