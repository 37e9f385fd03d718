import { readFileSync } from 'node:fs';
import { App, Validations } from 'aws-cdk-lib';
import type { PolicyViolation } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { BatchwiseStack } from '../lib/batchwise-stack.ts';
import { stackPropsFromContext } from '../lib/config.ts';

/** The feature flags of the real app, so tests synthesize what `cdk synth` does. */
const CDK_JSON_CONTEXT = (
  JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')) as {
    context: Record<string, unknown>;
  }
).context;

export const CERTIFICATE_ARN = 'arn:aws:acm:us-east-1:123456789012:certificate/example';
export const IMAGE_URI = 'public.ecr.aws/example/batchwise:1.0.0';
/** A documentation range (RFC 5737): the clients' network the tests allow in. */
export const INGRESS_CIDR = '203.0.113.0/24';
/** The context keys without a default. */
export const REQUIRED = { certificateArn: CERTIFICATE_ARN, allowedIngressCidr: INGRESS_CIDR } as const;

export interface Synthesized {
  readonly stack: BatchwiseStack;
  readonly template: Template;
  /** cdk-nag AwsSolutions findings left unacknowledged: errors and warnings. */
  readonly violations: PolicyViolation[];
}

export interface SynthOptions {
  /** @default 'us-east-1' (what the CLI passes as CDK_DEFAULT_REGION); null for region-agnostic */
  readonly region?: string | null;
}

/** Builds the app as bin/app.ts does, from context, with cdk-nag registered. */
export function buildApp(context: Record<string, unknown>, options: SynthOptions = {}): { app: App; stack: BatchwiseStack } {
  const app = new App({ context: { ...CDK_JSON_CONTEXT, ...context } });
  const props = stackPropsFromContext(app.node);
  const region = options.region === undefined ? 'us-east-1' : options.region;
  const stack = new BatchwiseStack(app, 'Batchwise-test', { ...props, env: region ? { region } : undefined });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, stack };
}

/** Synthesizes once (cdk-nag errors make synthesis throw) and collects remaining findings. */
export function synth(context: Record<string, unknown>, options: SynthOptions = {}): Synthesized {
  const { app, stack } = buildApp(context, options);
  const template = Template.fromStack(stack);
  const violations = new AwsSolutionsChecks().validateScope(app).violations;
  return { stack, template, violations };
}

export function memo<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}

/** The one resource of a type, with its properties. */
export function only(template: Template, type: string): { logicalId: string; props: Record<string, any> } {
  const found = template.findResources(type);
  const ids = Object.keys(found);
  if (ids.length !== 1) throw new Error(`expected one ${type}, found ${ids.length}`);
  return { logicalId: ids[0]!, props: found[ids[0]!]!.Properties as Record<string, any> };
}
