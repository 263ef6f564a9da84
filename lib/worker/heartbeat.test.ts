import { describe, expect, test } from "bun:test";
import { Heartbeat, type HeartbeatTarget } from "./heartbeat.ts";

/** A worker as the heartbeat sees it, that records what it was sent and whether it was declared lost. */
function fakeWorker(atWork = false) {
  const worker = { sent: [] as string[], lost: null as string | null, atWork };
  const target: HeartbeatTarget = {
    send: (request) => void worker.sent.push(request.type === "heartbeat" ? `heartbeat ${request.timeout_ms}` : request.type),
    listening: () => worker.lost === null,
    atWork: () => worker.atWork,
    lose: (reason) => void (worker.lost = reason),
  };
  return Object.assign(worker, { target });
}

describe("Heartbeat", () => {
  test("arms the watchdog, then pings while the worker answers", async () => {
    const w = fakeWorker();
    const beat = new Heartbeat({ intervalMs: 20, timeoutMs: 200 }, w.target);
    try {
      for (let i = 0; i < 8; i++) {
        await Bun.sleep(20);
        beat.heard();
      }
      expect(w.sent[0]).toBe("heartbeat 200");
      expect(w.sent.filter((t) => t === "ping").length).toBeGreaterThan(2);
      expect(w.lost).toBeNull();
      expect(beat.silent()).toBe(false);
    } finally {
      beat.stop();
    }
  });

  test("a silent idle worker is declared lost, named; a request sent into the silence is suspect", async () => {
    const w = fakeWorker();
    const beat = new Heartbeat({ intervalMs: 20, timeoutMs: 150 }, w.target);
    try {
      await Bun.sleep(80);
      expect(beat.silent()).toBe(true); // past two and a half pings
      for (let i = 0; i < 100 && w.lost === null; i++) await Bun.sleep(10);
      expect(w.lost).toMatch(/^was lost: no answer to the heartbeat for \d+ s \(connection lost\?\)$/);
    } finally {
      beat.stop();
    }
    expect(beat.silent()).toBe(false); // stopped: nothing to suspect
  });

  test("a worker at work (a C loop cannot answer) is not declared lost", async () => {
    const w = fakeWorker(true);
    const beat = new Heartbeat({ intervalMs: 20, timeoutMs: 60 }, w.target);
    try {
      await Bun.sleep(250);
      expect(w.lost).toBeNull();
      w.atWork = false;
      for (let i = 0; i < 100 && w.lost === null; i++) await Bun.sleep(10);
      expect(w.lost).not.toBeNull();
    } finally {
      beat.stop();
    }
  });
});
