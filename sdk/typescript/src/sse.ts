/** A POST answer's `text/event-stream` body as an async iterator of `{event, data, id}`.
 * `EventSource` cannot POST nor send `Authorization`, so the stream is read from `fetch`'s body
 * and parsed with eventsource-parser (the WHATWG SSE grammar: comments, `retry:`, multi-line
 * data, CRLF). Only web APIs: runs in Node >= 20 and browsers alike. */

import { createParser, type EventSourceMessage } from "eventsource-parser";

import { VibeError } from "./errors.js";

export interface SseEvent {
  event: string;
  data: unknown;
  id?: string;
}

/** Events until the body ends; the reader is released (the connection closed) when the
 * consumer stops early (`break`), the signal aborts, or an error is thrown. `terminal` names
 * the events after which the stream is complete; a body that ends before one is an error. */
export async function* sseEvents(
  body: ReadableStream<Uint8Array>,
  terminal: ReadonlySet<string>,
): AsyncGenerator<SseEvent, void, undefined> {
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (m) => queue.push(m) });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      parser.feed(done ? decoder.decode() : decoder.decode(value, { stream: true }));
      while (queue.length) {
        const m = queue.shift()!;
        const name = m.event ?? "message";
        let data: unknown;
        try {
          data = JSON.parse(m.data);
        } catch (cause) {
          throw new VibeError("bad_response", `event '${name}' carries data that is not JSON`, 0, undefined, undefined, { cause });
        }
        yield m.id === undefined ? { event: name, data } : { event: name, data, id: m.id };
        if (terminal.has(name)) {
          finished = true;
          return;
        }
      }
      if (done) break;
    }
    if (!finished) throw new VibeError("stream_interrupted", "the stream ended before its last event", 0);
  } finally {
    // an early exit (break, abort, error) closes the connection; after the end it is a no-op
    await reader.cancel().catch(() => undefined);
  }
}
