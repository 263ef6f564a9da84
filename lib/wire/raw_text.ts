// The old home of lib/wire/output_frames.ts, kept so that modules importing from here (lib/worker,
// lib/session, lib/cli/render.ts) compile until they import output_frames.ts; then delete it.
export { type OutputFrame, RawText, readOutputFrame } from "./output_frames.ts";
