#!/usr/bin/env bash
# `npm run test:unit`: the quick tests, for the edit-test loop: every test file beside a module in
# lib/ that starts nothing (no Python worker, no supervisor, no binary, no sandbox: the pure modules).
# A file is left out by what it uses, so a new pure test joins by itself. `npm test` runs everything.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(find lib -name '*.test.ts' | sort | xargs grep -L -E 'spawn|Worker\.start|ReplSession|withHome|Supervisor|requireBwrap|awreplBinary|PYTHON|execFile|attach\(')
exec ./node_modules/.bin/bun test "${files[@]}"
