/**
 * The server's layers, checked by `pnpm layers` (part of `pnpm test`). docs/architecture.md
 * explains them. A folder of packages/server/src may import only folders of a lower rank;
 * the frontends (http/, grpc/) reach the rest of the server only through core/index.ts, the
 * facade, and the leaves (errors/, tensor/, protocol/, access/) that every layer shares.
 */
const SRC = '^packages/server/src/';

/** Rank of each folder of packages/server/src; `.` is server.ts and index.ts. */
const RANK = {
  errors: 0,
  tensor: 1,
  access: 1,
  logging: 1,
  protocol: 2,
  config: 2,
  cache: 2,
  backends: 3,
  repository: 3,
  trace: 4,
  metrics: 4,
  'shared-memory': 4,
  promotion: 4,
  memory: 5,
  scheduler: 6,
  models: 7,
  core: 8,
  http: 9,
  grpc: 9,
  options: 10,
  '.': 11,
  cli: 12,
};
const FRONTEND_MAY_IMPORT = ['core', 'access', 'errors', 'tensor', 'protocol'];

const folders = Object.keys(RANK).filter((f) => f !== '.');
const pathOf = (folder) => (folder === '.' ? `${SRC}[^/]+\\.ts$` : `${SRC}${folder}/`);
const anyOf = (list) => `${SRC}(${list.join('|')})/`;

const layerRules = Object.entries(RANK).map(([folder, rank]) => {
  const above = folders.filter((other) => other !== folder && RANK[other] >= rank);
  const notAllowed = ['http', 'grpc'].includes(folder) ? folders.filter((f) => f !== folder && !FRONTEND_MAY_IMPORT.includes(f)) : above;
  return {
    name: `layer-${folder === '.' ? 'server' : folder}`,
    comment: `${folder}/ may import only ${['http', 'grpc'].includes(folder) ? FRONTEND_MAY_IMPORT.join(', ') : 'folders of a lower rank'} (.dependency-cruiser.cjs)`,
    severity: 'error',
    from: { path: pathOf(folder) },
    to: { path: anyOf(notAllowed.length > 0 ? notAllowed : ['$^']) },
  };
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Modules import one way: no cycles, type-only imports included.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'unranked-folder',
      comment: 'Every folder of packages/server/src has a rank in .dependency-cruiser.cjs.',
      severity: 'error',
      from: {},
      to: { path: SRC, pathNot: [`${SRC}[^/]+\\.ts$`, anyOf(folders)] },
    },
    {
      name: 'no-test-code-in-src',
      comment: 'Source never imports tests, test support (packages/*/test-support/), bench or the black-box test folder.',
      severity: 'error',
      from: { path: '^packages/[^/]+/src/', pathNot: '\\.test\\.ts$' },
      to: { path: ['\\.test\\.ts$', '^packages/[^/]+/test-support/', '^test/', '^bench/'] },
    },
    {
      name: 'protocol-package-is-a-leaf',
      comment:
        '@batchwise/protocol (packages/protocol) holds what server and client share: it imports neither of them, nor any other workspace package.',
      severity: 'error',
      from: { path: '^packages/protocol/' },
      to: { path: '^(packages/(?!protocol/)|infra/|bench/|test/)' },
    },
    {
      name: 'backend-package-is-a-leaf',
      comment:
        '@batchwise/backend (packages/backend) is what JavaScript model code imports: it may import @batchwise/protocol, never the server, the client or any other workspace package.',
      severity: 'error',
      from: { path: '^packages/backend/' },
      to: { path: '^(packages/(?!(backend|protocol)/)|infra/|bench/|test/)' },
    },
    {
      name: 'client-not-server',
      comment: 'The client shares the wire through @batchwise/protocol, never by reaching into the server package.',
      severity: 'error',
      from: { path: '^packages/client/' },
      to: { path: '^packages/server/' },
    },
    ...layerRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['\\.test\\.ts$', '/dist/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: require('node:path').join(__dirname, 'packages/server/tsconfig.json') },
  },
};
