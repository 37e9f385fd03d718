import type { FieldNode, MessageNode, ScalarNode } from './parser.ts';
import type { Pos } from './position.ts';

/**
 * The position of the value at `path` (field names, list indexes, map keys) in a text-format
 * tree, or of the deepest part of the path found. Schema-free: a string after a field whose
 * entries are `{ key: ... value: ... }` is taken as a map key.
 */
export function positionOf(tree: MessageNode, path: readonly (string | number)[]): Pos {
  let message: MessageNode | undefined = tree;
  let found: Pos = tree.pos;
  for (let i = 0; i < path.length && message; i++) {
    const name = path[i];
    const entries: FieldNode[] = message.fields.filter((f) => f.name === name);
    if (entries.length === 0) break;
    found = entries[0]!.pos;
    const items: (ScalarNode | MessageNode)[] = entries.flatMap((f) => (f.value.kind === 'list' ? f.value.items : [f.value]));
    let item: ScalarNode | MessageNode | undefined = items[0];
    const next = path[i + 1];
    if (typeof next === 'number') {
      item = items[next];
      i++;
    } else if (typeof next === 'string' && items.some((it) => it.kind === 'message' && it.fields.some((f) => f.name === 'key'))) {
      const entry = items.find((it) => it.kind === 'message' && it.fields.some((f) => f.name === 'key' && keyText(f) === next));
      const value = entry?.kind === 'message' ? entry.fields.find((f) => f.name === 'value') : undefined;
      item = value && value.value.kind !== 'list' ? value.value : undefined;
      i++;
    }
    if (!item) break;
    found = item.pos;
    message = item.kind === 'message' ? item : undefined;
  }
  return found;
}

function keyText(field: FieldNode): string | undefined {
  return field.value.kind === 'scalar' ? field.value.text : undefined;
}
