export interface Sluice {
  host: string;
  port: number;
  url: string;
  /**
   * The server's Unix socket, in its private directory (cheaper round trips than TCP):
   * `new Redis({ path: sluice.socketPath })`. Undefined where that directory's path is too
   * long for a Unix socket, or when `args` named a `--unixsocket` of their own.
   */
  socketPath?: string;
  /** The server's private temporary directory (its `dir`), removed by stop(). */
  dir: string;
  process: import("node:child_process").ChildProcess;
  readonly alive: boolean;
  command(...args: (string | number)[]): Promise<unknown>;
  /**
   * TESTMODE RESET: the server as it started (empty, clock on real time, no faults...).
   * Without a client, on the helper's own connection, resolved when done (one round trip).
   * With the test's ioredis or node-redis client: queued on it ahead of the test's first
   * command and resolved at once (no round trip of its own); the helper's own commands wait
   * for its reply, and a failure rejects the helper's next call and is thrown unhandled.
   */
  reset(): Promise<string>;
  reset(client: { call(...args: string[]): Promise<unknown> } | { sendCommand(args: string[]): Promise<unknown> }): Promise<void>;
  freeze(): Promise<number>;
  advance(ms: number): Promise<number>;
  set(unixMs: number): Promise<number>;
  resume(): Promise<number>;
  now(): Promise<number>;
  stop(): Promise<void>;
  unref(): void;
  killNow(): void;
}
export function binaryPath(): string;
export interface StartOptions {
  args?: string[];
  bin?: string;
  timeoutMs?: number;
}
/** A server of the caller's own, in a private temporary directory. */
export function startSluice(options?: StartOptions): Promise<Sluice>;
/** The server this process (worker thread) shares between its tests; reset it before each. */
export function sharedSluice(options?: StartOptions): Promise<Sluice>;
