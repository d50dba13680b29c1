// The cotal plugin for OpenCode, which `cotal spawn --agent opencode` loads: it tells the agent's
// `cotal mcp` (through `cotal hook`) what the session does, so the agent's status follows it, and
// while the session is idle it waits for what should wake the agent and starts a turn with it:
// OpenCode has no way for an MCP server to wake a session, but a plugin may prompt one.
//
// COTAL_BIN, COTAL_SPACE and COTAL_AGENT name the cotal command, the space and the agent.
import { execFile } from "node:child_process";

const bin = process.env.COTAL_BIN || "cotal";
const space = process.env.COTAL_SPACE || "main";
const agent = process.env.COTAL_AGENT || "";

// hook runs `cotal hook EVENT [PAYLOAD]` and resolves to what it printed ("" on any failure: a
// hook never fails the session).
function hook(event, payload) {
  const args = ["hook", event];
  if (payload !== undefined) args.push(JSON.stringify(payload));
  args.push("--space", space, "--agent", agent);
  return new Promise((resolve) => {
    const child = execFile(bin, args, { timeout: 20000, maxBuffer: 1 << 20 }, (err, stdout) => resolve(err ? "" : String(stdout)));
    child.stdin.end(); // the hook's input, when there is one, is its PAYLOAD argument
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const CotalPlugin = async ({ client }) => {
  // idle is the session a wait loop runs for, while it is idle; null while a turn runs.
  let idle = null;
  // pending is what a wait handed in that no turn has carried yet: the hook took it from the
  // inbox, so it is kept here until a prompt takes it.
  let pending = "";

  // deliver starts a turn with what is pending; on failure it stays for the next idle.
  async function deliver(sessionID) {
    const text = pending;
    try {
      await client.session.prompt({ path: { id: sessionID }, body: { parts: [{ type: "text", text }] } });
      if (pending === text) pending = "";
    } catch (e) {
      // The session is busy or gone: the text waits for its next idle.
    }
  }

  async function waitFor(sessionID) {
    idle = sessionID;
    let backoff = 250;
    while (idle === sessionID) {
      const started = Date.now();
      const text = await hook("wait");
      if (text.trim() || pending) {
        pending += text;
        if (idle === sessionID) {
          idle = null;
          await deliver(sessionID);
        }
        return;
      }
      // A wait that came back at once, empty, failed (no cotal mcp answers yet): back off.
      if (Date.now() - started < 1000) {
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 30000);
      } else {
        backoff = 250;
      }
    }
  }

  return {
    event: async ({ event }) => {
      const sessionID = event && event.properties && event.properties.sessionID;
      if (event.type === "session.idle" && sessionID) {
        await hook("stop");
        if (pending) await deliver(sessionID);
        if (idle !== sessionID) waitFor(sessionID); // more may come, and a failed delivery retries with it
      } else if (event.type === "session.deleted") {
        idle = null;
        await hook("session-end");
      }
    },
    "chat.message": async () => {
      idle = null;
      await hook("tool"); // working; what waits is handed in by the wait loop, never lost here
    },
    "tool.execute.before": async (input) => {
      await hook("tool", { tool_name: (input && input.tool) || "" });
    },
    "permission.ask": async () => {
      await hook("notification", { message: "waiting for a permission" });
    },
  };
};
