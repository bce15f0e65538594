import { describe, expect, it } from "vitest";
import { sameOrigin } from "./origin";

describe("sameOrigin", () => {
  it("ignores the path and default port", () => {
    expect(sameOrigin("https://api.example.com/v1", "https://API.example.com:443/v2")).toBe(true);
  });
  it("tells another host, port or scheme apart", () => {
    expect(sameOrigin("https://api.example.com/v1", "https://evil.example.com/v1")).toBe(false);
    expect(sameOrigin("https://api.example.com/v1", "https://api.example.com:8443/v1")).toBe(false);
    expect(sameOrigin("https://api.example.com/v1", "http://api.example.com/v1")).toBe(false);
  });
  it("counts a URL that does not parse as another server", () => {
    expect(sameOrigin("https://api.example.com/v1", "api.example.com")).toBe(false);
  });
});
