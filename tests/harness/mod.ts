// The one test harness: import from here. See common.ts for what each module holds.
export * from "./binary.ts";
export * from "./bwrap.ts";
export * from "./common.ts";
export * from "./runtime.ts";
export * from "./procs.ts";
export * from "./session.ts";
export * from "./sshd.ts";
export * from "./tmux.ts";
export * from "./worker.ts";
