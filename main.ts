#!/usr/bin/env bun
// The awrepl executable: everything lives in lib/cli/program.ts; this file only runs it and exits with
// its status — explicitly, so a stray handle can never keep a finished command alive, and only after
// everything written to stdout/stderr has reached the OS (see lib/cli/stdio.ts).
import { main } from "./lib/cli/program.ts";
import { drainStdio, stdoutWasLost } from "./lib/cli/stdio.ts";

const status = await main(process.argv.slice(2));
await drainStdio();
// Output that could not be written (a full disk) was not delivered: that is awrepl's failure (125).
process.exit(status === 0 && stdoutWasLost() ? 125 : status);
