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

export const CotalPlugin = async ({ client }) => {
  // idle is the session a wait loop runs for, while it is idle; null while a turn runs.
  let idle = null;

  async function waitFor(sessionID) {
    idle = sessionID;
    while (idle === sessionID) {
      const text = await hook("wait");
      if (idle !== sessionID || !text.trim()) continue;
      idle = null;
      try {
        await client.session.prompt({ path: { id: sessionID }, body: { parts: [{ type: "text", text }] } });
      } catch (e) {
        // OpenCode refuses a prompt only for a session that is gone: what it carried was handed
        // in, so it is gone with the session.
      }
      return;
    }
  }

  return {
    event: async ({ event }) => {
      const sessionID = event && event.properties && event.properties.sessionID;
      if (event.type === "session.idle" && sessionID) {
        await hook("stop");
        if (idle !== sessionID) waitFor(sessionID);
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
