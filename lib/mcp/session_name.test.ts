import { describe, expect, test } from "bun:test";
import { SESSION_NAME } from "../core/names.ts";
import { sessionNameForDir } from "./session_name.ts";

describe("the MCP server's default session name", () => {
  test("is the directory's name and a hash of its path, always a valid session name", () => {
    expect(sessionNameForDir("/home/me/My Project")).toMatch(/^My-Project-[0-9a-f]{6}$/);
    expect(sessionNameForDir("/")).toMatch(/^mcp-[0-9a-f]{6}$/);
    expect(sessionNameForDir("/tmp/.hidden")).toMatch(/^hidden-[0-9a-f]{6}$/);
    expect(sessionNameForDir(`/x/${"é".repeat(10)}`)).toMatch(/^mcp-[0-9a-f]{6}$/);
    expect(sessionNameForDir(`/x/${"a".repeat(200)}`)).toMatch(SESSION_NAME);
    // Two checkouts of the same name get two sessions.
    expect(sessionNameForDir("/a/app")).not.toBe(sessionNameForDir("/b/app"));
    expect(sessionNameForDir("/a/app")).toBe(sessionNameForDir("/a/app/"));
  });
});
