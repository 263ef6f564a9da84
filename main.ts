#!/usr/bin/env bun
// The awrepl executable: everything lives in lib/cli/program.ts; this file only runs it and exits with
// its status (explicitly, so a stray handle can never keep a finished command alive).
import { main } from "./lib/cli/program.ts";

const status = await main(process.argv.slice(2));
process.exit(status);
