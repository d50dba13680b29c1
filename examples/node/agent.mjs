// A Cotal agent in Node, written from docs/clients.md alone: it connects with a minted credential
// and its inbox prefix, keeps a presence row, posts hello to a channel, and answers each direct
// message it passes through the guard with a post on the channel and a DM back, until it has
// answered COTAL_ANSWERS of them (default 1).
//
//   cotal mint nodey --subscribe general --provision --json   # creds, servers, lifecycleUid, inboxPrefix
//   COTAL_SERVERS=… COTAL_CREDS=… COTAL_INBOX_PREFIX=… COTAL_LIFECYCLE=… COTAL_PRINCIPAL=local.nodey node agent.mjs
import { readFile } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { connect, credsAuthenticator } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";

function required(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is required (see the header of agent.mjs)`);
    process.exit(2);
  }
  return v;
}

const servers = required("COTAL_SERVERS").split(",");
const principal = required("COTAL_PRINCIPAL"); // owner.actor
const lifecycle = required("COTAL_LIFECYCLE");
const inboxPrefix = required("COTAL_INBOX_PREFIX");
const creds = await readFile(required("COTAL_CREDS"));
const space = process.env.COTAL_SPACE || "main";
const channel = process.env.COTAL_CHANNEL || "general";
const answers = Number(process.env.COTAL_ANSWERS || "1");
const [owner, actor] = principal.split(".");

// The credential may subscribe to its own inbox only: every request, JetStream's included, needs it.
const nc = await connect({ servers, authenticator: credsAuthenticator(creds), inboxPrefix, name: `cotal-node ${principal}` });
const js = jetstream(nc);

// A message: exactly one routing field, the sender as the subject says, text parts.
function message(routing, text) {
  return { id: randomUUID(), ts: Date.now(), space, from: { id: principal, name: actor }, ...routing, parts: [{ kind: "text", text }] };
}

// Publish through JetStream, the id as Nats-Msg-Id so a retry is stored once.
async function publish(subject, msg) {
  await js.publish(subject, JSON.stringify(msg), { msgID: msg.id });
}

const post = (text) => publish(`cotal.${space}.chat.${principal}.${channel}`, message({ channel }, text));

// Presence: the row under our own key, rewritten every 2 s; offline once at the end.
const presenceSubject = `$KV.cotal_presence_${space}.${principal}`;
const card = { id: principal, name: actor, kind: "agent", owner, actor };
const presence = (status) => JSON.stringify({ card, status, ts: Date.now(), lifecycleUid: lifecycle });
await js.publish(presenceSubject, presence("idle"));
const heartbeat = setInterval(() => {
  js.publish(presenceSubject, presence("idle")).catch((err) => console.error(`presence: ${err.message}`));
}, 2000);

// The guard: a DM subject is cotal.<space>.inst.<recipient owner>.<actor>.<sender owner>.<actor>;
// the payload must be a message whose from.id is that sender. Anything else is terminated.
const principalOwner = /^(local|u_[a-z2-7]{26})$/;
function guard(subject, data) {
  const t = subject.split(".");
  if (t.length !== 7 || t[0] !== "cotal" || t[2] !== "inst" || !principalOwner.test(t[5])) {
    return { reason: "malformed-subject" };
  }
  const sender = `${t[5]}.${t[6]}`;
  let msg;
  try {
    msg = JSON.parse(data);
  } catch {
    return { reason: "malformed-json" };
  }
  if (!msg || typeof msg !== "object" || !Array.isArray(msg.parts) || typeof msg.id !== "string") {
    return { reason: "malformed-json" };
  }
  if (!msg.from || msg.from.id !== sender) {
    return { reason: "sender-mismatch" };
  }
  return { msg, sender };
}

await post(`hello from node ${actor}`);
console.log(`${principal} is present in ${space}, posted to #${channel}, waiting for direct messages`);

const seen = new Set();
const consumer = await js.consumers.get(`DM_${space}`, `dm_${owner}-${actor}-${lifecycle}`);
const dms = await consumer.consume();
let answered = 0;
for await (const m of dms) {
  const g = guard(m.subject, m.string());
  if (g.reason) {
    console.error(`terminated ${m.subject}: ${g.reason}`);
    m.term(g.reason);
    continue;
  }
  if (!seen.has(g.msg.id)) {
    seen.add(g.msg.id);
    // Peer text is data, never instructions: it is quoted back, not obeyed.
    const text = g.msg.parts.filter((p) => p.kind === "text").map((p) => p.text).join(" ");
    await post(`echo: ${text} (from ${g.sender})`);
    const [so, sa] = g.sender.split(".");
    await publish(`cotal.${space}.inst.${so}.${sa}.${principal}`, message({ to: g.sender, replyTo: g.msg.id }, `echo: ${text}`));
    answered++;
  }
  m.ack();
  if (answered >= answers) {
    break;
  }
}

clearInterval(heartbeat);
await js.publish(presenceSubject, presence("offline"));
await nc.drain();
console.log(`${principal} answered ${answered} direct message(s) and left`);
