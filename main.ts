#!/usr/bin/env bun
// The awrepl executable: everything lives in lib/cli/program.ts; this file only runs it and exits with
// its status — explicitly, so a stray handle can never keep a finished command alive, and only after
// everything written to stdout/stderr has reached the OS (see lib/cli/stdio.ts).
import { main } from "./lib/cli/program.ts";
import { drainStdio } from "./lib/cli/stdio.ts";

const status = await main(process.argv.slice(2));
await drainStdio();
process.exit(status);
