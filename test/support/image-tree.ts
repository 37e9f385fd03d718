/**
 * The server image's runtime tree, built here as the Dockerfile builds it (no Docker engine on
 * these machines): the build context staged as `cdk deploy` stages it (the repository narrowed by
 * .dockerignore), every RUN of the build stage replayed in it, the runtime stage's files put where
 * the image puts them, and its ENTRYPOINT and CMD read back. Build arguments are given as
 * `docker build --build-arg` gives them: the ARGs before the first FROM, with their defaults, name
 * the stage the last one starts from (`FROM ${SERVER_IMAGE}`). Each instruction is either replayed
 * or skipped for a reason written here; an instruction this file does not know fails the plan,
 * naming its line, so a new Dockerfile step cannot go untested.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { DockerfileParser, type Instruction, type JSONInstruction } from 'dockerfile-ast';
import { FileSystem, IgnoreMode } from 'aws-cdk-lib';

export const REPOSITORY_ROOT = new URL('../../', import.meta.url).pathname;

/** One step of the plan: what the test does for one Dockerfile instruction. */
export type ReplayStep =
  | {
      readonly kind: 'run';
      readonly line: number;
      readonly stage: string;
      readonly command: string;
      readonly workdir: string;
      /** The stage's ARGs and ENV at this RUN, as Docker gives them to its command. */
      readonly env: Readonly<Record<string, string>>;
    }
  | { readonly kind: 'copy-context'; readonly line: number; readonly stage: string; readonly destination: string }
  | {
      readonly kind: 'copy-stage';
      readonly line: number;
      readonly stage: string;
      readonly from: string;
      readonly source: string;
      readonly destination: string;
    }
  | { readonly kind: 'check-pnpm'; readonly line: number; readonly stage: string; readonly version: string }
  | { readonly kind: 'skip'; readonly line: number; readonly stage: string; readonly text: string; readonly reason: string };

/** Build arguments, as `docker build --build-arg NAME=value` passes them. */
export type BuildArgs = Readonly<Record<string, string>>;

export interface ImagePlan {
  /** The stages built, in the file's order, each with the image or stage its FROM names (build arguments substituted). */
  readonly stages: readonly { readonly name: string; readonly from: string }[];
  readonly steps: readonly ReplayStep[];
  /** The image's own top folders (WORKDIRs, stage copies): a RUN may name paths under these only. */
  readonly imageFolders: readonly string[];
  /** The last stage: the image that runs. */
  readonly runtime: {
    readonly workdir: string;
    readonly env: Readonly<Record<string, string>>;
    readonly entrypoint: readonly string[];
    readonly cmd: readonly string[];
    readonly exposedPorts: readonly number[];
  };
}

/**
 * RUN steps that cannot run here, each with why. A RUN not listed is replayed as written.
 * Each reason says what covers the step instead, or why nothing needs to.
 */
const NOT_REPLAYED: readonly { readonly pattern: RegExp; readonly reason: string }[] = [
  {
    pattern: /ONNXRUNTIME_NODE_INSTALL=cuda12 node script\/install/,
    reason:
      "fetches onnxruntime-node's CUDA 12 execution provider from NuGet, which is not reachable here; only GPU hosts load it (the CPU provider ships in the npm package)",
  },
  {
    pattern: /apt-get install -y --no-install-recommends libvulkan1\b/,
    reason:
      "installs Debian's Vulkan loader into the webgpu image; the tree runs without one, as a host without a GPU does (a webgpu model fails to load, naming the loader: test/gpu-accelerators.test.ts)",
  },
  {
    pattern: /apt-get install -y --no-install-recommends python3 python3-numpy\b/,
    reason:
      "installs python3 and numpy (the Python backend's interpreter) into the cuda image; the tree runs on this machine's, which `pnpm test` installs (scripts/python-backend-deps.sh)",
  },
  {
    pattern: /^groupadd .*&& useradd /,
    reason: "creates the image's unprivileged user; the tree runs as this machine's user (USER is a numeric uid, checked below)",
  },
];

/** Stage names the Dockerfile may copy from, and what each gives. */
const STAGE_SOURCES: Readonly<Record<string, string>> = {
  node: "the official Node binary; the tree runs on this machine's node instead (the image's is Node 22, this one may be 20)",
};

function fail(instruction: Instruction, why: string): never {
  const line = instruction.getRange().start.line + 1;
  throw new Error(`Dockerfile:${line} ${instruction.getKeyword()} ${instruction.getArgumentsContent() ?? ''}: ${why}`);
}

function jsonArray(instruction: Instruction): string[] {
  const strings = (instruction as JSONInstruction).getJSONStrings?.() ?? [];
  if (strings.length === 0) fail(instruction, 'only the exec (JSON array) form is replayed');
  return strings.map((s) => s.getJSONValue());
}

/** One stage of the Dockerfile as read: its steps, what it needs of other stages, and its image settings. */
interface StagePlan {
  readonly name: string;
  /** What its FROM names, build arguments substituted. */
  readonly from: string;
  /** Stages this one starts from or copies from. */
  readonly needs: Set<string>;
  readonly steps: ReplayStep[];
  readonly runs: { instruction: Instruction; command: string }[];
  readonly folders: Set<string>;
  workdir: string;
  /** The ARGs declared in the stage, with their values (an ARG's scope ends with its stage). */
  args: Record<string, string>;
  env: Record<string, string>;
  entrypoint: string[];
  cmd: string[];
  exposedPorts: number[];
}

/**
 * Reads the Dockerfile into the plan of its last stage, what `docker build --build-arg ...` builds
 * with these build arguments: the steps of that stage and of the stages it needs, in the file's
 * order, as BuildKit builds them. Throws naming the first instruction, of any stage, it cannot
 * replay, and on a build argument no ARG declares.
 */
export function planImage(dockerfileText: string, buildArgs: BuildArgs = {}): ImagePlan {
  const stages = readStages(dockerfileText, buildArgs);
  const chosen = stages.at(-1)!;
  // The image's own folders (WORKDIRs, stage copies) over the whole file, as a stage's RUN may write
  // where a later stage copies from.
  const topFolder = (path: string) => `/${path.split('/')[1]}`;
  const imageFolders = new Set(stages.flatMap((s) => [...s.folders]));
  // Replayed RUNs write under the tree's root: a path outside the image's own folders would be this
  // machine's. Checked for every stage, so that no target escapes the check.
  for (const { instruction, command } of stages.flatMap((s) => s.runs)) {
    for (const [, , path] of command.matchAll(ABSOLUTE_PATH)) {
      if (!imageFolders.has(topFolder(path!))) {
        fail(instruction, `names ${path}, outside the image's folders (${[...imageFolders].join(', ')}) that the test maps into its tree`);
      }
    }
  }
  const included = stagesFor(stages, chosen.name);
  const { workdir, env, entrypoint, cmd, exposedPorts } = chosen;
  return {
    stages: included.map(({ name, from }) => ({ name, from })),
    steps: included.flatMap((s) => s.steps),
    imageFolders: [...imageFolders],
    runtime: { workdir, env, entrypoint, cmd, exposedPorts },
  };
}

/** The stage `name` and those it needs, in the file's order. */
function stagesFor(stages: readonly StagePlan[], name: string): StagePlan[] {
  const needed = new Set<string>();
  const visit = (stage: string) => {
    if (needed.has(stage)) return;
    needed.add(stage);
    for (const other of stages.find((s) => s.name === stage)?.needs ?? []) visit(other);
  };
  visit(name);
  return stages.filter((s) => needed.has(s.name));
}

/** The ARGs before the first FROM (those a FROM may use), each with its default (undefined: none). */
export function globalArgs(dockerfileText: string): Record<string, string | undefined> {
  const args: Record<string, string | undefined> = {};
  for (const instruction of DockerfileParser.parse(dockerfileText).getInstructions()) {
    if (instruction.getKeyword() !== 'ARG') break;
    for (const [name, value] of argDeclarations(instruction)) args[name] = value;
  }
  return args;
}

/** An ARG's declarations: NAME or NAME=default, one or more. */
function argDeclarations(instruction: Instruction): [string, string | undefined][] {
  const declarations = instruction.getArguments().map((a) => a.getValue());
  if (declarations.length === 0) fail(instruction, 'declares nothing');
  return declarations.map((declaration) => {
    const [name, ...value] = declaration.split('=');
    if (!/^[A-Za-z_]\w*$/.test(name!)) fail(instruction, `only ARG NAME and ARG NAME=default are replayed, not ${declaration}`);
    return [name!, value.length === 0 ? undefined : value.join('=')];
  });
}

/**
 * A FROM's image with the global ARGs' values in place of $NAME and ${NAME}, as BuildKit substitutes
 * them; any other use of `$` fails, naming the line.
 */
function substitute(instruction: Instruction, image: string, globals: Readonly<Record<string, string | undefined>>): string {
  const substituted = image.replace(/\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)/g, (_, braced?: string, bare?: string) => {
    const name = (braced ?? bare)!;
    if (!(name in globals)) fail(instruction, `names $${name}, which no ARG before the first FROM declares`);
    const value = globals[name];
    if (value === undefined || value === '')
      fail(instruction, `$${name} has no value: its ARG has no default and no build argument gives one`);
    return value;
  });
  if (substituted.includes('$')) fail(instruction, 'only $NAME and ${NAME} of an ARG before the first FROM are replayed in FROM');
  return substituted;
}

function readStages(dockerfileText: string, buildArgs: BuildArgs): StagePlan[] {
  const stages: StagePlan[] = [];
  let current: StagePlan | undefined;
  const topFolder = (path: string) => `/${path.split('/')[1]}`;
  /** The global ARGs' values: a build argument, else the default. */
  const globals: Record<string, string | undefined> = {};
  const declared = new Set<string>();
  for (const instruction of DockerfileParser.parse(dockerfileText).getInstructions()) {
    const line = instruction.getRange().start.line + 1;
    const args = instruction.getArguments().map((a) => a.getValue());
    const flags =
      'getFlags' in instruction ? (instruction as unknown as { getFlags(): { toString(): string }[] }).getFlags().map(String) : [];
    const text = instruction.getArgumentsContent() ?? '';
    if (instruction.getKeyword() === 'ARG') {
      for (const [name, value] of argDeclarations(instruction)) {
        declared.add(name);
        if (!current) globals[name] = buildArgs[name] ?? value;
        else {
          // In a stage: a build argument, else its own default, else the global ARG's value.
          const inStage = buildArgs[name] ?? value ?? globals[name];
          if (inStage !== undefined) current.args[name] = inStage;
        }
      }
      continue;
    }
    if (instruction.getKeyword() === 'FROM') {
      const name = args[1]?.toUpperCase() === 'AS' ? args[2]! : `stage-${stages.length}`;
      const from = substitute(instruction, args[0] ?? '', globals);
      // FROM <an earlier stage> starts from that stage's files and settings.
      const base = stages.find((s) => s.name === from);
      // An image named by a build argument is a stage of this file: another would be pulled, which the replay cannot do.
      if (from !== args[0] && !base) {
        fail(
          instruction,
          `${args[0]} is '${from}', which is no stage of this Dockerfile (stages: ${stages.map((s) => s.name).join(', ')})`,
        );
      }
      current = {
        name,
        from,
        needs: new Set(base ? [base.name] : []),
        steps: [],
        runs: [],
        folders: new Set(base?.folders),
        workdir: base?.workdir ?? '/',
        args: {},
        env: { ...base?.env },
        entrypoint: [...(base?.entrypoint ?? [])],
        cmd: [...(base?.cmd ?? [])],
        exposedPorts: [...(base?.exposedPorts ?? [])],
      };
      stages.push(current);
      continue;
    }
    if (!current) fail(instruction, 'comes before the first FROM');
    const stage = current.name;
    const steps = current.steps;
    switch (instruction.getKeyword()) {
      case 'WORKDIR':
        current.workdir = args[0]!.startsWith('/') ? args[0]! : join(current.workdir, args[0]!);
        current.folders.add(topFolder(current.workdir));
        break;
      case 'ENV':
        for (const pair of args) {
          const [key, ...value] = pair.split('=');
          if (value.length === 0) fail(instruction, 'only ENV key=value is replayed');
          current.env[key!] = value.join('=');
        }
        break;
      case 'RUN': {
        const unknownFlag = flags.find((f) => !f.startsWith('--mount=type=cache,'));
        if (unknownFlag) fail(instruction, `the flag ${unknownFlag} is not replayed (only cache mounts, which change no result)`);
        const pnpm = /^npm i(?:nstall)? -g pnpm@(\S+)$/.exec(text);
        const skip = NOT_REPLAYED.find((s) => s.pattern.test(text));
        if (pnpm) steps.push({ kind: 'check-pnpm', line, stage, version: pnpm[1]! });
        else if (skip) steps.push({ kind: 'skip', line, stage, text, reason: skip.reason });
        else {
          steps.push({ kind: 'run', line, stage, command: text, workdir: current.workdir, env: { ...current.args, ...current.env } });
          current.runs.push({ instruction, command: text });
        }
        break;
      }
      case 'COPY': {
        const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
        const other = flags.find((f) => !f.startsWith('--from=') && !f.startsWith('--chown='));
        if (other) fail(instruction, `the flag ${other} is not replayed`);
        if (args.length !== 2) fail(instruction, 'only COPY <source> <destination> is replayed');
        const [source, destination] = args as [string, string];
        const target = destination.startsWith('/') ? destination : join(current.workdir, destination);
        if (from === undefined) {
          if (source !== '.') fail(instruction, 'only COPY . <destination> of the build context is replayed');
          steps.push({ kind: 'copy-context', line, stage, destination: target });
        } else if (STAGE_SOURCES[from] !== undefined) {
          steps.push({ kind: 'skip', line, stage, text, reason: STAGE_SOURCES[from] });
        } else if (stages.some((s) => s.name === from)) {
          steps.push({ kind: 'copy-stage', line, stage, from, source, destination: target });
          current.needs.add(from);
          current.folders.add(topFolder(source)).add(topFolder(target));
        } else fail(instruction, `copies from '${from}', a stage or image this test does not know`);
        break;
      }
      case 'USER':
        if (!/^\d+(:\d+)?$/.test(args[0] ?? '')) fail(instruction, 'the ECS task definition names the user by number; keep USER numeric');
        steps.push({ kind: 'skip', line, stage, text, reason: "the tree runs as this machine's user" });
        break;
      case 'EXPOSE':
        current.exposedPorts = args.map(Number);
        break;
      case 'ENTRYPOINT':
        current.entrypoint = jsonArray(instruction);
        break;
      case 'CMD':
        current.cmd = jsonArray(instruction);
        break;
      default:
        fail(
          instruction,
          'test/support/image-tree.ts does not replay this instruction: teach it to, so that the test runs what the image runs',
        );
    }
  }
  if (stages.length === 0) throw new Error('the Dockerfile has no FROM');
  const unused = Object.keys(buildArgs).filter((name) => !declared.has(name));
  if (unused.length > 0) {
    throw new Error(`no ARG of the Dockerfile declares the build argument ${unused.join(', ')} (ARGs: ${[...declared].join(', ')})`);
  }
  return stages;
}

/** An absolute path in a shell command: at the start, after blanks, quotes or `=`. */
const ABSOLUTE_PATH = /(^|[\s"'=])(\/[\w.-]+(?:\/[\w.@-]*)*)/g;

export interface ImageTree {
  readonly plan: ImagePlan;
  /** The image's filesystem root, as far as the tree goes: `<root>/app` is the image's /app. */
  readonly root: string;
  /** A path of the image, on this machine. */
  inImage(path: string): string;
  /** What each skipped instruction was, and why. */
  readonly skipped: readonly string[];
}

/** The build context as `cdk deploy` stages it for the image: the repository narrowed by .dockerignore. */
export function stageContext(destination: string, repositoryRoot: string = REPOSITORY_ROOT): void {
  const exclude = readFileSync(join(repositoryRoot, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  // As CDK's DockerImageAsset: the Dockerfile and .dockerignore are always sent.
  exclude.push('!Dockerfile', '!.dockerignore');
  mkdirSync(destination, { recursive: true });
  FileSystem.copyDirectory(repositoryRoot, destination, { exclude, ignoreMode: IgnoreMode.DOCKER });
}

/**
 * Builds the tree under `root` (a folder outside the workspace, so that nothing resolves into the
 * checkout): stage the context, then each step of the plan in order. `log` gets one line a step.
 */
export function buildImageTree(
  root: string,
  log: (line: string) => void,
  repositoryRoot: string = REPOSITORY_ROOT,
  buildArgs: BuildArgs = {},
): ImageTree {
  const plan = planImage(readFileSync(join(repositoryRoot, 'Dockerfile'), 'utf8'), buildArgs);
  const inImage = (path: string) => join(root, path);
  const context = join(root, '.context');
  stageContext(context, repositoryRoot);
  const skipped: string[] = [];
  for (const step of plan.steps) {
    const where = `Dockerfile:${step.line} (${step.stage})`;
    switch (step.kind) {
      case 'check-pnpm': {
        const version = execFileSync('pnpm', ['--version'], { encoding: 'utf8' }).trim();
        if (version !== step.version)
          throw new Error(`${where} installs pnpm ${step.version}; this machine has ${version} (.ci/run installs it)`);
        log(`${where}: pnpm ${version} is the one the image installs`);
        break;
      }
      case 'copy-context':
        mkdirSync(inImage(step.destination), { recursive: true });
        cpSync(context, inImage(step.destination), { recursive: true });
        log(`${where}: the context copied to ${step.destination}`);
        break;
      case 'copy-stage':
        // Stages share this one root: a copy between them is a move of the folder.
        if (step.source !== step.destination) renameSync(inImage(step.source), inImage(step.destination));
        log(`${where}: ${step.source} of stage ${step.from} to ${step.destination}`);
        break;
      case 'run': {
        log(`${where}: RUN ${step.command}`);
        const started = performance.now();
        const command = step.command.replace(ABSOLUTE_PATH, (_, before: string, path: string) => `${before}${inImage(path)}`);
        const result = spawnSync('bash', ['-euo', 'pipefail', '-c', command], {
          cwd: inImage(step.workdir),
          encoding: 'utf8',
          env: { ...buildEnvironment(), ...step.env },
          maxBuffer: 64 * 2 ** 20,
        });
        if (result.status !== 0) {
          throw new Error(
            `${where}: RUN ${step.command} failed (${result.status ?? result.signal}):\n${result.stdout.slice(-3000)}\n${result.stderr.slice(-3000)}`,
          );
        }
        log(`${where}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
        break;
      }
      case 'skip':
        skipped.push(`${where} ${step.text}: ${step.reason}`);
        log(`${where}: not replayed: ${step.reason}`);
        break;
    }
  }
  return { plan, root, inImage, skipped };
}

/** The environment of a RUN: this machine's, without what the test runner adds (an image build has none of it). */
function buildEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^(VITEST|NODE_OPTIONS$|TEST$)/.test(key)));
}
