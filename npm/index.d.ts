export interface Sluice {
  host: string;
  port: number;
  url: string;
  command(...args: (string | number)[]): Promise<unknown>;
  freeze(): Promise<number>;
  advance(ms: number): Promise<number>;
  set(unixMs: number): Promise<number>;
  resume(): Promise<number>;
  now(): Promise<number>;
  stop(): Promise<void>;
}
export function binaryPath(): string;
export function startSluice(options?: { args?: string[]; bin?: string; timeoutMs?: number }): Promise<Sluice>;
