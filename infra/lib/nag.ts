import { Stack, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/**
 * The text cdk-nag prints for a resource in an IAM5 finding: references flattened to
 * `<LogicalId.Attr>` / `<LogicalId>` (same rules as cdk-nag's flattenCfnReference).
 */
export function nagResourceText(scope: IConstruct, resource: string): string {
  const visit = (node: unknown): string => {
    if (node === undefined) return '';
    if (typeof node === 'string') return node.replace(/\$\{/g, '<').replace(/\}/g, '>');
    const obj = node as Record<string, unknown>;
    if (obj['Fn::Join']) {
      const [delimiter, items] = obj['Fn::Join'] as [string, unknown[]];
      return items.map(visit).join(delimiter);
    }
    if (obj['Fn::Sub']) return visit(obj['Fn::Sub']);
    if (obj['Fn::GetAtt']) {
      const [res, attr] = obj['Fn::GetAtt'] as [unknown, unknown];
      return `<${visit(res)}.${visit(attr)}>`;
    }
    if (obj['Ref']) return `<${visit(obj['Ref'])}>`;
    return JSON.stringify(node);
  };
  return visit(Stack.of(scope).resolve(resource));
}

/** Acknowledges AwsSolutions-IAM5 for one wildcard resource on `scope` (a role or policy). */
export function acknowledgeWildcardResource(scope: IConstruct, resource: string, reason: string): void {
  Validations.of(scope).acknowledge({ id: `AwsSolutions-IAM5[Resource::${nagResourceText(scope, resource)}]`, reason });
}
