// Drives Yuxi's OpenAI-compatible /v1 with the official openai npm client:
// list models, a completion, a streamed completion with usage, an auth
// error, and a conversation continued through `user`. Prints one JSON
// object with what it saw; exits non-zero on the first surprise.
// Env: YUXI_BASE_URL (…/v1), YUXI_API_KEY.
import OpenAI from "openai";

const baseURL = process.env.YUXI_BASE_URL;
const apiKey = process.env.YUXI_API_KEY;
if (!baseURL || !apiKey) throw new Error("YUXI_BASE_URL and YUXI_API_KEY are required");
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

const first = await client.chat.completions.create({
  model: "default-chatbot",
  user: "npm-user",
  messages: [{ role: "user", content: "remember: the code is 1234" }],
});
out.completion = { object: first.object, content: first.choices[0].message.content, finish: first.choices[0].finish_reason,
  total_tokens: first.usage?.total_tokens };

const stream = await client.chat.completions.create({
  model: "default-chatbot",
  user: "npm-stream",
  messages: [{ role: "user", content: "stream it" }],
  stream: true,
  stream_options: { include_usage: true },
});
let text = "", finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  for (const c of chunk.choices) {
    text += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
  if (chunk.usage) usage = chunk.usage;
}
out.stream = { content: text, finish, total_tokens: usage?.total_tokens, chunks };

try {
  await new OpenAI({ baseURL, apiKey: "yxkey_not_a_key", maxRetries: 0 }).models.list();
  out.auth_error = null;
} catch (e) {
  out.auth_error = { status: e.status, authentication: e instanceof OpenAI.AuthenticationError, type: e.type ?? e.error?.type };
}

const second = await client.chat.completions.create({
  model: "default-chatbot",
  user: "npm-user",
  messages: [{ role: "user", content: "what is the code?" }],
});
out.continued = { content: second.choices[0].message.content };

console.log(JSON.stringify(out));
