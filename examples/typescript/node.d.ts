// The little of Node's API the example uses, declared here so that `tsc` type-checks it
// without @types/node (only the compiler itself needs installing; see docs/integration.md).
declare const process: {
  env: Record<string, string | undefined>;
  exit(code: number): never;
};
declare const __dirname: string;
declare module "node:fs" {
  export function readFileSync(path: string, encoding: "utf8"): string;
}
declare module "node:path" {
  export function join(...parts: string[]): string;
}
